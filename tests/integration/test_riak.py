"""Riak rolling restarts through real SSH hosts running the Riak stand-in (tests/fixtures/riak).

What each test proves is read from outside the tool: the stand-in's own logs (when each node
stopped and started, when each handoff finished), its cluster state file, and the hosts.
"""

from __future__ import annotations

import itertools
import json
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import assert_no_traceback, json_lines, orchestrate
from tests.integration.conftest import SandboxManager, Shape
from tests.integration.test_restart import kill_while_batch_two_is_down

pytestmark = pytest.mark.sandbox_shape("riak")
RIAK = Shape(product="riak", secured=False)
CONFIGURED_LIMIT = 2  # riak.conf's transfer_limit in the sandbox


def cluster_dir(info: dict[str, Any]) -> Path:
    return Path(info["inventory"]).parent / "riak-cluster"


def cluster_state(info: dict[str, Any]) -> dict[str, Any]:
    return dict(json.loads((cluster_dir(info) / "state.json").read_text()))


def node_events(info: dict[str, Any]) -> list[tuple[float, str, str]]:
    """(time, what, node) from every stand-in log: starting, stopping, stopped, handoff done (to node)."""
    events = []
    for log in cluster_dir(info).glob("*.log"):
        for line in log.read_text().splitlines():
            if m := re.match(r"^([\d.]+) (starting|stopping|stopped) (\S+)", line):
                events.append((float(m.group(1)), m.group(2), m.group(3)))
            elif m := re.match(r"^([\d.]+) handoff done \d+ -> (\S+)", line):
                events.append((float(m.group(1)), "handoff", m.group(2)))
    return sorted(events)


def ssh(info: dict[str, Any], host: str, command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ssh", "-F", info["ssh_config"], host, command], capture_output=True, text=True,
                          timeout=60)


def ready(sandboxes: SandboxManager) -> dict[str, Any]:
    """The Riak sandbox, settled: every node serving, no transfer, no stall switch, limits as configured."""
    info = sandboxes.get(RIAK)
    (cluster_dir(info) / "stall").unlink(missing_ok=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        state = cluster_state(info)
        if not state["transfers"] and all(n["limit"] == CONFIGURED_LIMIT for n in state["nodes"].values()):
            return info
        time.sleep(0.5)
    raise AssertionError(f"the Riak sandbox did not settle: {cluster_state(info)}")


def assert_each_node_restarted_once_waiting_for_handoffs(info: dict[str, Any], since: float,
                                                         order: list[str], journal: str) -> None:
    """Each node started once; its batch ended only after every handoff back to it finished; the next
    node stopped only after that."""
    events = [e for e in node_events(info) if e[0] >= since]
    run = json.loads(Path(journal).read_text())
    done_at = {run["spec"]["plan"]["node_ids"][name]: rec["started_at"]["done"] for name, rec in run["nodes"].items()}
    starts = [node for _, what, node in events if what == "starting"]
    assert sorted(starts) == sorted(order), f"each node starts exactly once: {starts}"
    stops = {node: t for t, what, node in events if what == "stopping"}
    for earlier, later in itertools.pairwise(order):
        handed = [t for t, what, node in events if what == "handoff" and node == earlier]
        assert handed, f"no partition was handed back to {earlier}"
        assert max(handed) <= done_at[earlier], f"the batch of {earlier} ended before its handoffs finished"
        assert max(handed) < stops[later], f"{later} was stopped before the handoffs to {earlier} finished"


def resume_and_verify(info: dict[str, Any], since: float) -> None:
    """`resume` finishes the run: every node restarted exactly once in plan order, limits restored."""
    proc = orchestrate("resume", "--cluster", "sandbox", "--json", timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json_lines(proc.stdout)[-1]
    assert summary["result"] == "succeeded"
    assert_each_node_restarted_once_waiting_for_handoffs(
        info, since, ["riak@10.231.0.12", "riak@10.231.0.13", "riak@10.231.0.11"], summary["journal"])
    assert {s["limit"] for s in cluster_state(info)["nodes"].values()} == {CONFIGURED_LIMIT}


def test_riak_plan_is_safe_changes_nothing_and_says_why_when_a_node_is_down(sandboxes: SandboxManager) -> None:
    info = ready(sandboxes)
    since = time.time()
    before = cluster_state(info)
    proc = orchestrate("plan", "--cluster", "sandbox", "--json")
    assert proc.returncode == 0, proc.stderr
    plan = json_lines(proc.stdout)[-1]
    assert plan["product"] == "riak" and plan["safe"]
    assert [b["nodes"] for b in plan["batches"]] == [["riak-2"], ["riak-3"], ["riak-1"]]  # the claimant last
    assert {s["scope"]: (s["before"], s["during"]) for s in plan["settings"]} == {
        f"riak@{n['host']}": (CONFIGURED_LIMIT, 8) for n in info["nodes"]}
    after = cluster_state(info)
    assert {n: (s["started"], s["limit"]) for n, s in after["nodes"].items()} == {
        n: (s["started"], s["limit"]) for n, s in before["nodes"].items()}, "plan restarted or changed a node"
    table = orchestrate("plan", "--cluster", "sandbox")
    assert "ring share" in table.stdout and "transfer_limit" in table.stdout, table.stdout

    stopped = ssh(info, "riak-2", "riak stop")
    assert stopped.returncode == 0, stopped.stderr
    try:
        unsafe = orchestrate("plan", "--cluster", "sandbox")
        assert unsafe.returncode == 6, unsafe.stdout
        assert "unreachable: riak@10.231.0.12" in unsafe.stdout.replace("\n", " ")
        refused = orchestrate("restart", "--cluster", "sandbox", "--yes")
        assert refused.returncode == 5 and "unreachable" in refused.stderr
        assert_no_traceback(refused)
    finally:
        assert ssh(info, "riak-2", "riak start").returncode == 0
    assert [e for e in node_events(info) if e[1] in ("starting", "stopping") and e[0] >= since
            and e[2] != "riak@10.231.0.12"] == [], "a refused restart touched another node"


def test_riak_rolling_restart_waits_for_handoffs_and_restores_limits(sandboxes: SandboxManager) -> None:
    info = ready(sandboxes)
    since = time.time()
    proc = orchestrate("restart", "--cluster", "sandbox", "--yes", "--json", timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert_no_traceback(proc)
    lines = json_lines(proc.stdout)
    summary = lines[-1]
    assert summary["result"] == "succeeded" and summary["product"] == "riak"
    order = [f"riak@10.231.0.1{b['nodes'][0][-1]}" for b in summary["batches"]]
    assert_each_node_restarted_once_waiting_for_handoffs(info, since, order, summary["journal"])
    handed_back = [node for _, what, node in node_events(info) if what == "handoff" and _ >= since]
    for n in summary["nodes"]:
        assert n["restarted"] and set(n["phases"]) >= {"stop", "start", "join", "service", "recovery"}
        # Counted while the node was down, so a handoff too quick to be seen active still counts.
        riak_name = next(f"riak@{h['host']}" for h in info["nodes"] if h["name"] == n["name"])
        assert n["recovery"]["handoff_partitions"] == handed_back.count(riak_name) > 0, (n, handed_back)
    # The limit was raised for the run, set again on each restarted node, and restored exactly.
    messages = [e.get("message", "") for e in lines]
    assert sum("transfer_limit=8" in m and m.startswith("set ") for m in messages) == 3
    assert sum("transfer limit set to 8 again" in m for m in messages) == 3
    # riak-3 runs as a Riak 3.x package (`riak-admin` fails there): found out and said, once.
    assert sum("riak-3: admin commands run as `riak admin`" in m for m in messages) == 1, messages
    assert {n: s["limit"] for n, s in cluster_state(info)["nodes"].items()} == {
        f"riak@{n['host']}": CONFIGURED_LIMIT for n in info["nodes"]}
    assert not cluster_state(info)["transfers"]
    # Host tuning ran with the Riak profile, Erlang schedulers included.
    conf = ssh(info, "riak-1", "cat /etc/riak/riak.conf; cat /sys/kernel/mm/transparent_hugepage/enabled")
    assert "erlang.schedulers.total" in conf.stdout and "never" in conf.stdout, conf.stdout
    report = orchestrate("report", "--cluster", "sandbox")
    assert report.returncode == 0 and "handoffs" in report.stdout, report.stdout + report.stderr
    status = json.loads(orchestrate("status", "--cluster", "sandbox", "--json").stdout)
    assert status["health"]["status"] == "ready" and status["temporary_settings"] == []


def test_stalled_transfer_stops_the_run_with_a_clear_message_then_resume(sandboxes: SandboxManager) -> None:
    info = ready(sandboxes)
    (cluster_dir(info) / "stall").write_text("all\n")
    since = time.time()
    proc = orchestrate("restart", "--cluster", "sandbox", "--yes", "--json", timeout=600)
    assert proc.returncode == 6, proc.stderr[-3000:]
    assert_no_traceback(proc)
    said = proc.stderr.replace("\n", " ")
    assert "handoff stalled after restarting riak-2" in said, said[-2000:]
    assert re.search(r"partition \d+ \(riak_kv_vnode\) from riak@10\.231\.0\.1\d to riak@10\.231\.0\.12", said)
    assert "made no progress for 10 s" in said
    starts = [e for e in node_events(info) if e[0] >= since and e[1] == "starting"]
    assert [e[2] for e in starts] == ["riak@10.231.0.12"], "the run went on past the stalled node"
    status = json.loads(orchestrate("status", "--cluster", "sandbox", "--json").stdout)
    assert status["run"]["state"] == "failed"

    (cluster_dir(info) / "stall").unlink()
    resume_and_verify(info, since)


def test_riak_sigkill_mid_run_then_resume_restarts_no_node_twice(sandboxes: SandboxManager) -> None:
    info = ready(sandboxes)
    since = time.time()
    kill_while_batch_two_is_down()
    status = json.loads(orchestrate("status", "--cluster", "sandbox", "--json").stdout)
    assert any(s["key"] == "transfer_limit" for s in status["temporary_settings"])
    resume_and_verify(info, since)


def test_riak_nodes_pending_for_a_changed_riak_conf_and_a_new_release_are_restarted_alone(
        sandboxes: SandboxManager) -> None:
    """`orchestrate pending` on Riak (the stand-in): the release a node started with (`riak-admin status`)
    against the installed one (start_erl.data), riak.conf's change time against the process's start."""
    info = ready(sandboxes)

    def pending() -> tuple[int, dict[str, dict[str, Any]]]:
        proc = orchestrate("pending", "--cluster", "sandbox", "--json", timeout=300)
        assert_no_traceback(proc)
        return proc.returncode, {line["node"]: line for line in json_lines(proc.stdout)[:-1]}

    code, verdicts = pending()
    assert code == 0 and {v["state"] for v in verdicts.values()} == {"clean"}, verdicts
    release = "/usr/lib/riak/releases/start_erl.data"
    assert ssh(info, "riak-2", "printf '## tuned by the team\\n' >> /etc/riak/riak.conf").returncode == 0
    installed = ssh(info, "riak-3", f"awk '{{print $NF}}' {release}").stdout.strip()
    assert installed, "the stand-in's release file"
    newer = f"{installed}1"  # 2.9.10 -> 2.9.101: a newer release unpacked by the package
    assert ssh(info, "riak-3", f"sed -i 's/ {installed}$/ {newer}/' {release}").returncode == 0
    code, verdicts = pending()
    assert code == 1 and [n for n, v in verdicts.items() if v["state"] == "pending"] == ["riak-2", "riak-3"], verdicts
    assert verdicts["riak-2"]["reasons"][0]["evidence"].startswith("/etc/riak/riak.conf changed after the node started")
    assert verdicts["riak-3"]["reasons"][0]["evidence"] == \
        f"the home's own version is {newer}, the node runs {installed}"
    since = time.time()
    proc = orchestrate("restart", "--cluster", "sandbox", "--pending", "--yes", "--json", timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    starts = [node for t, what, node in node_events(info) if what == "starting" and t >= since]
    assert sorted(starts) == ["riak@10.231.0.12", "riak@10.231.0.13"], starts
    code, verdicts = pending()
    assert code == 0, verdicts
