"""Faults on the real sandbox: killed at every state, a node dying, a host cut off, the cluster's HTTP
unreachable for 20 s while SSH works, SSH alone dropped while the node serves, secrets kept out."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from tests.helpers import REPO, assert_no_traceback, closed_at_teardown, json_lines, orchestrate
from tests.integration.conftest import SandboxManager, Shape
from tests.integration.node_logs import assert_one_node_away_at_a_time, away_since, log_of, marks, overlapping
from tests.integration.test_restart import (
    ALLOC,
    doc_counts,
    end_background_run,
    prepared,
    read_events_until,
    settings,
    starts_logged,
)
from tests.integration.test_sandbox import ssh, wait_for

KILL_POINTS = {
    "after allocation is restricted": lambda e: e.get("event") == "undo" and e.get("batch") == 2
    and "primaries" in e.get("message", ""),
    "after start, before join": lambda e: e.get("event") == "phase" and e.get("batch") == 2
    and e.get("phase") == "starting",
    "during recovery": lambda e: e.get("event") == "phase" and e.get("batch") == 2 and e.get("phase") == "recovering",
    "during restore": lambda e: e.get("event") == "undo" and "restored persistent indices.recovery" in e.get("message",
                                                                                                          ""),
}


def test_sigkill_at_each_state_in_turn_then_resume(sandboxes: SandboxManager) -> None:
    """One run, killed at each state in the order a run reaches them, each time resumed in the
    background: every kill leaves a different half-done step for the next resume to finish. Killed with
    batch 2's node down, the run's temporary setting stays in force and `status` shows it with its undo
    record; the last resume goes on to batch 3 and finishes: each node restarted exactly once."""
    info, es = prepared(sandboxes, Shape())
    before_settings = settings(es)
    before_starts = starts_logged(info)
    command = ("restart", "--cluster", "sandbox", "--yes")
    for point, reached in KILL_POINTS.items():
        run = background_run(*command)
        try:
            read_events_until(run, reached, 300)
        finally:
            said = end_background_run(run, signal.SIGKILL, 30)
        assert "Traceback" not in said, f"killed {point}: {said[-2000:]}"
        if point == "after start, before join":  # batch 2's node down: what the run left, as status says it
            assert settings(es)["persistent"].get(ALLOC) == "primaries", "left behind, recorded in the journal"
            status = json.loads(orchestrate("status", "--cluster", "sandbox", "--json").stdout)
            assert any(s["key"] == ALLOC for s in status["temporary_settings"]), status["temporary_settings"]
        command = ("resume", "--cluster", "sandbox")
    proc = orchestrate("resume", "--cluster", "sandbox", "--json", timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json_lines(proc.stdout)[-1]["result"] == "succeeded"
    assert starts_logged(sandboxes.status()) == {k: v + 1 for k, v in before_starts.items()}, "a node restarted twice"
    assert settings(es) == before_settings
    assert es.cluster.health(wait_for_status="green", timeout="60s")["status"] == "green"


def first_batches(es: Any, count: int) -> list[str]:
    """The first ``count`` nodes a restart would take, the elected master never among them (it goes last): a run
    of fewer nodes, where a test needs no more (each node more is 15 s of CI)."""
    master = es.cat.master(format="json")[0]["node"]
    return [n for n in ("es-1", "es-2", "es-3") if n != master][:count]


def background_run(*args: str) -> subprocess.Popen[str]:
    """`orchestrate ARGS --json` in the background (ARGS: `restart ... --yes` or `resume ...`)."""
    return subprocess.Popen([sys.executable, "-m", "orchestrator", *args, "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)


def inventory_with(tmp_path: Path, info: dict[str, Any], change: Any) -> Path:
    inv = yaml.safe_load(Path(info["inventory"]).read_text())
    change(inv)
    path = tmp_path / "inv.yaml"
    path.write_text(yaml.safe_dump(inv))
    return path


def fault_once_stopped(path: Path, node: str, fault: Callable[[], object], repair: Callable[[], object] | None = None,
                       nodes: list[str] | None = None, hold: bool = False) -> tuple[int | None, str]:
    """Restart with the inventory at ``path`` (only ``nodes``, in that order, if given); once ``node`` is
    stopped, cause ``fault`` and wait for the run to end (``repair`` runs after, whatever happens). Returns
    its exit code and all it wrote. ``hold``: the run is paused (SIGSTOP) while ``fault`` runs, so that the
    fault surely lands while ``node`` is down: on a busy machine the run may start it again within seconds."""
    run = background_run("restart", "--config", str(path), "--yes", *(a for n in nodes or () for a in ("--nodes", n)))
    try:
        read_events_until(run, lambda e: e.get("event") == "phase" and e.get("node") == node
                          and e.get("phase") == "stopped", 300)
        if hold:
            run.send_signal(signal.SIGSTOP)
        try:
            fault()
        finally:
            if hold:
                run.send_signal(signal.SIGCONT)
        said = end_background_run(run, signal.SIGCONT, 600)  # SIGCONT: only wait for it to end
    finally:
        if repair is not None:
            repair()
        if run.poll() is None:
            end_background_run(run, signal.SIGKILL, 30)
    return run.returncode, said


def test_another_node_dying_stops_the_run_and_says_why(sandboxes: SandboxManager, tmp_path: Path) -> None:
    info, es = prepared(sandboxes, Shape())

    def short(inv: dict[str, Any]) -> None:
        inv["timeouts"]["recovery_s"] = 20

    path = inventory_with(tmp_path, info, short)
    plan = json.loads(orchestrate("plan", "--config", str(path), "--json").stdout)
    first, last = plan["batches"][0]["nodes"][0], plan["batches"][-1]["nodes"][0]
    # A node that is not restarting dies while the first batch is under way (a run of that node alone).
    rc, said = fault_once_stopped(
        path, first, lambda: ssh(info, last, "systemctl stop elasticsearch").check_returncode(), nodes=[first])
    assert rc == 6, said[-2000:]
    # It stops while waiting for batch 1 to recover, or before batch 2: either way it names the cause,
    # and the node that went away.
    assert "only 2 of 3 nodes" in said and ("batch 2" in said or "green again" in said)
    assert f"({last} not in it)" in said, said[-2000:]
    assert ssh(info, last, "systemctl start elasticsearch").returncode == 0
    es.cluster.health(wait_for_nodes="3", wait_for_status="green", timeout="120s")
    # Resumed with the sandbox's own inventory (--yes: it differs from the run's): the short timeout
    # only served to provoke the failure, and would race a slow recovery on a busy machine.
    resumed = orchestrate("resume", "--cluster", "sandbox", "--yes", timeout=900)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert ALLOC not in settings(es)["persistent"]


def test_host_cut_off_during_its_batch(sandboxes: SandboxManager, tmp_path: Path) -> None:
    info, es = prepared(sandboxes, Shape())

    def quick_ssh(inv: dict[str, Any]) -> None:
        inv["ssh"]["command_timeout_s"] = 15

    path = inventory_with(tmp_path, info, quick_ssh)
    plan = json.loads(orchestrate("plan", "--config", str(path), "--json").stdout)
    victim = plan["batches"][0]["nodes"][0]
    veth = f"orv{int(victim.split('-')[1])}"
    rc, said = fault_once_stopped(path, victim, lambda: subprocess.run(["ip", "link", "set", veth, "down"], check=True),
                                  repair=lambda: subprocess.run(["ip", "link", "set", veth, "up"], check=False),
                                  nodes=[victim])
    assert rc in (4, 6), said[-2000:]
    assert victim in said
    assert settings(es)["persistent"].get(ALLOC) == "primaries", "allocation stays restricted while a node is away"
    time.sleep(1)
    resumed = orchestrate("resume", "--cluster", "sandbox", "--yes", timeout=900)  # normal timeouts again
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert es.cluster.health(wait_for_status="green", timeout="60s")["status"] == "green"


def test_secrets_never_appear_in_output_or_journal(sandboxes: SandboxManager, tmp_path: Path) -> None:
    info, es = prepared(sandboxes, Shape())
    canary = "canary-S3cr3t-7f1e"
    # A real user of the secured sandbox, with the tool's role: the secret is used, and must not leak.
    es.security.put_user(username="operator", password=canary, roles=["orchestrator"])

    def with_secret(inv: dict[str, Any]) -> None:
        inv["cluster"]["username"] = "operator"
        inv["cluster"]["password"] = {"env": "ORCH_TEST_PASSWORD"}

    path = inventory_with(tmp_path, info, with_secret)
    env = {"ORCH_TEST_PASSWORD": canary}
    outputs = [orchestrate(*args, env=env, timeout=900) for args in (
        ("plan", "--config", str(path), "--json"), ("status", "--config", str(path), "--json"),
        # One node's batch uses the secret in every step a whole restart does (each more node: 30-40 s).
        ("restart", "--config", str(path), "--nodes", "es-1", "--yes", "--json"), ("status", "--config", str(path)))]
    for proc in outputs:
        assert_no_traceback(proc)
        assert canary not in proc.stdout and canary not in proc.stderr
    restarted = outputs[2]
    assert restarted.returncode == 0, restarted.stderr[-2000:]
    assert json_lines(restarted.stdout)[-1]["result"] == "succeeded"
    journal = Path(json_lines(restarted.stdout)[-1]["journal"])  # the run's own journal, and its directory
    journal_dir = journal.parent
    assert journal.is_file() and {f.name for f in journal_dir.glob("*")} >= {journal.name, f"{journal.stem}.log.jsonl"}
    for f in journal_dir.glob("*"):
        assert canary not in f.read_text(errors="replace"), f
        assert f.stat().st_mode & 0o077 == 0, f"{f} is readable by others"
    assert journal_dir.stat().st_mode & 0o077 == 0
    missing = orchestrate("plan", "--config", str(path))
    assert missing.returncode == 2 and "ORCH_TEST_PASSWORD is not set" in missing.stderr
    es.security.delete_user(username="operator")


def test_refused_ssh_key_fails_preflight_and_changes_nothing(sandboxes: SandboxManager, tmp_path: Path) -> None:
    info, es = prepared(sandboxes, Shape())
    before = settings(es)
    made = subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "stranger")],
                          capture_output=True)
    assert made.returncode == 0
    path = inventory_with(tmp_path, info, lambda inv: inv["ssh"].update(key_file=str(tmp_path / "stranger")))
    proc = orchestrate("restart", "--config", str(path), "--yes")
    assert proc.returncode == 5, proc.stderr
    assert "SSH key was refused" in proc.stderr
    assert_no_traceback(proc)
    assert settings(es) == before


class DroppedReplies:
    """A host that drops its replies from one TCP port (a blackhole rule of its own network namespace:
    `ip rule ... sport PORT blackhole`), as a firewall dropping packets does: the other side's packets
    arrive, nothing comes back, nothing is refused. Lifted after ``for_s`` by a timer (bounded), or at
    the latest by ``lift``."""

    def __init__(self, hosts: list[str], port: int, for_s: float) -> None:
        self.hosts, self.port = hosts, port
        self.timer = threading.Timer(for_s, self.lift)
        self.timer.daemon = True
        self.cut_at = self.lifted_at = 0.0

    def _rule(self, action: str, host: str) -> None:
        subprocess.run(["ip", "netns", "exec", f"orch-{host}", "ip", "rule", action, "ipproto", "6", "sport",
                        str(self.port), "blackhole", "pref", "100"], check=action == "add", capture_output=True)

    def cut(self) -> None:
        for host in self.hosts:
            self._rule("add", host)
        self.cut_at = time.monotonic()
        self.timer.start()

    def lift(self) -> None:
        self.timer.cancel()
        for host in self.hosts:
            self._rule("del", host)
        self.lifted_at = self.lifted_at or time.monotonic()


def test_the_cluster_unreachable_over_http_for_20_s_while_ssh_works(sandboxes: SandboxManager, tmp_path: Path) -> None:
    """Every node's HTTP replies dropped for 20 s once the first node is stopped (SSH and the cluster's own
    transport untouched): the run ends within its timeouts, succeeded or failing with the cause named, no
    second node goes down meanwhile, and a resume finishes it: green, every document there, every setting
    back, each node started once more."""
    info, es = prepared(sandboxes, Shape())
    before_docs, before_settings, before_starts = doc_counts(es), settings(es), starts_logged(info)
    before_marks = marks(info)
    path = inventory_with(tmp_path, info, lambda inv: None)
    first, second = first_batches(es, 2)  # the second is the node that must not go down meanwhile
    cut = DroppedReplies(["es-1", "es-2", "es-3"], 9200, for_s=20)
    started = time.monotonic()
    rc, said = fault_once_stopped(path, first, cut.cut, repair=cut.lift, nodes=[first, second])
    assert time.monotonic() - started < 600
    assert "Traceback" not in said
    if rc != 0:  # a clean failure: the cause named, then a resume once the cluster answers again
        assert rc in (4, 6) and ("did not answer" in said or "unreachable" in said.lower()), said[-2000:]
        resumed = orchestrate("resume", "--cluster", "sandbox", "--yes", timeout=900)
        assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert_one_node_away_at_a_time(away_since(info, before_marks))
    assert es.cluster.health(wait_for_status="green", timeout="60s")["status"] == "green"
    assert doc_counts(es) == before_docs and settings(es) == before_settings
    restarted = {n: c - before_starts[n] for n, c in starts_logged(info).items()}
    assert restarted == {n: 1 if n in (first, second) else 0 for n in before_starts}, restarted


def test_ssh_dropped_on_the_next_host_while_its_node_serves(sandboxes: SandboxManager, tmp_path: Path) -> None:
    """The next batch's host drops its SSH replies (its node keeps serving) from while the first node is
    stopped: the run never takes that node down, ends naming it within the SSH timeouts, and a resume
    once SSH is back finishes: green, every setting back, each node started once more."""
    info, es = prepared(sandboxes, Shape())
    before_settings, before_starts, before_marks = settings(es), starts_logged(info), marks(info)

    def quick_ssh(inv: dict[str, Any]) -> None:
        inv["ssh"]["command_timeout_s"] = 15
        inv["ssh"]["connect_timeout_s"] = 5

    path = inventory_with(tmp_path, info, quick_ssh)
    first, second = first_batches(es, 2)
    cut = DroppedReplies([second], 22, for_s=240)
    rc, said = fault_once_stopped(path, first, cut.cut, repair=cut.lift, nodes=[first, second])
    assert rc in (4, 6), said[-2000:]
    assert "Traceback" not in said and second in said, said[-2000:]
    # Its stop was attempted over the dropped SSH and failed: the node itself kept serving all along.
    assert starts_logged(info)[second] == before_starts[second], "the node behind the dropped SSH kept running"
    assert es.cluster.health(wait_for_nodes="3", timeout="60s")["number_of_nodes"] == 3
    resumed = orchestrate("resume", "--cluster", "sandbox", "--yes", timeout=900)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert_one_node_away_at_a_time(away_since(info, before_marks))
    assert es.cluster.health(wait_for_status="green", timeout="60s")["status"] == "green"
    assert settings(es) == before_settings
    restarted = {n: c - before_starts[n] for n, c in starts_logged(info).items()}
    assert restarted == {n: 1 if n in (first, second) else 0 for n in before_starts}, restarted


def test_the_elected_master_restarted_by_someone_else_mid_batch(sandboxes: SandboxManager, tmp_path: Path) -> None:
    """Once the first node is stopped, someone restarts the elected master (another node) by hand: the run
    never takes a second node down while the cluster is short of the master, ends succeeded or naming the
    node it lost, and a resume finishes: green, every document there, every setting back."""
    info, es = prepared(sandboxes, Shape())
    before_docs, before_settings, before_starts = doc_counts(es), settings(es), starts_logged(info)
    before_marks = marks(info)
    path = inventory_with(tmp_path, info, lambda inv: None)
    first, second = first_batches(es, 2)  # the run's: the master is the one someone else restarts
    restarted: list[str] = []

    def restart_the_master() -> None:
        """Begun without waiting for it; returns once the master's own log says it is stopping (the run, held
        meanwhile, then goes on with the master away)."""
        master = es.cat.master(format="json")[0]["node"]
        assert master != first, "the stopped node cannot be the elected master"
        restarted.append(master)
        mark = marks(info)[master]
        assert ssh(info, master, "systemctl --no-block restart elasticsearch").returncode == 0
        logged = lambda: log_of(info, master).read_text().splitlines()[mark:]  # noqa: E731
        wait_for(lambda: any(line.endswith("] stopping ...") for line in logged()), 60, f"{master} to begin to stop")

    rc, said = fault_once_stopped(path, first, restart_the_master, nodes=[first, second], hold=True)
    assert "Traceback" not in said
    if rc != 0:
        assert rc in (4, 6) and restarted[0] in said, said[-2000:]
        # As an operator would: the master back and every primary active (the security index too: without it
        # the native users' credentials are refused) before the resume.
        es.cluster.health(wait_for_nodes="3", wait_for_status="yellow", timeout="120s")
        resumed = orchestrate("resume", "--cluster", "sandbox", "--yes", timeout=900)
        assert resumed.returncode == 0, resumed.stderr[-2000:]
    # By the nodes' own logs: the hand restart came while the first node was down; apart from it, one at a time.
    away = away_since(info, before_marks)
    by_hand = next(a for a in away if a.node == restarted[0])
    assert by_hand in {x for pair in overlapping(away) for x in pair if first in (pair[0].node, pair[1].node)}, away
    assert_one_node_away_at_a_time([a for a in away if a is not by_hand])
    assert es.cluster.health(wait_for_status="green", timeout="60s")["status"] == "green"
    assert doc_counts(es) == before_docs and settings(es) == before_settings
    starts = {n: c - before_starts[n] for n, c in starts_logged(info).items()}
    assert starts == dict.fromkeys(("es-1", "es-2", "es-3"), 1), f"each once, the master by hand: {starts}"


def test_a_latency_budget_throttles_recovery_and_a_sigkill_then_resume_puts_the_rate_back(
        sandboxes: SandboxManager, tmp_path: Path) -> None:
    """A search latency budget no search keeps (0.001 ms), under a steady search load, held by a probe the tool
    times on real nodes: the run halves the recovery rate it raised (the controller's move, through the run's undo
    record); killed (SIGKILL) once it has, `resume` finishes, and the cluster's own rate from before the run is
    back exactly. Each node started once more."""
    from orchestrator.sandbox.load import LoadGenerator
    from orchestrator.sandbox.rest import access_of

    rate = "indices.recovery.max_bytes_per_sec"
    info, es = prepared(sandboxes, Shape())
    es.cluster.put_settings(persistent={rate: "25mb"})  # the cluster's own, lower than what the run raises it to
    before, before_starts = settings(es), starts_logged(info)
    # With a probe of the load's index, timed by the tool: the budget holds the probe's time.
    path = inventory_with(tmp_path, info, lambda inv: inv.update(search={
        "interval_s": 1, "latency_budget": "0.001ms", "sustain_s": 0, "recovery_floor": "10mb",
        "probe": {"index": "load-budget", "query": {"match_all": {}}}}))
    load = closed_at_teardown(LoadGenerator(info["endpoints"], index="load-budget", duration_s=600, max_docs=20_000,
                                            access=access_of(info)))
    load.start_then_mark("during")
    two = first_batches(es, 2)  # a node's recovery to throttle, and a next one (each node more is CI's time)
    try:
        run = background_run("restart", "--config", str(path), "--yes", *(a for n in two for a in ("--nodes", n)))
        try:
            seen = read_events_until(run, lambda e: e.get("event") == "step"
                                     and "recovery rate halved" in e.get("message", ""), 600)
            raised = next(e["data"]["value"] for e in seen if e.get("event") == "undo"
                          and (e.get("data") or {}).get("key") == rate)
            halving = next(e["message"] for e in seen if "recovery rate halved" in e.get("message", ""))
            probes = [e["data"]["probe_ms"] for e in seen if e.get("event") == "search"
                      and (e.get("data") or {}).get("probe_ms") is not None]
            assert probes and "the probe's time" in halving, (probes, halving)
            moved = es.cluster.get_settings(flat_settings=True)["persistent"][rate]
            assert moved != raised and moved != "25mb", (raised, moved)  # halved from the run's own rate
        finally:
            end_background_run(run, signal.SIGKILL, 30)
        resumed = orchestrate("resume", "--cluster", "sandbox", "--yes", "--json", timeout=900)
    finally:
        load.stop()
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert_no_traceback(resumed)
    assert settings(es) == before, "the cluster's own rate back exactly"
    restarted = {n: c - before_starts[n] for n, c in starts_logged(info).items()}
    assert restarted == {n: 1 if n in two else 0 for n in before_starts}, restarted
    es.cluster.put_settings(persistent={rate: None})
    es.indices.delete(index="load-budget")


def test_outside_its_maintenance_window_a_run_holds_with_no_node_away_then_goes_on_when_it_opens(
        sandboxes: SandboxManager, tmp_path: Path) -> None:
    """Started 20-80 s before its only window opens (`outside: wait`, the default), the run (of two nodes: the
    next batch holds too) holds on the real clock, its lock kept, says when it goes on, and no node stops before
    the opening (by the nodes' own logs); then it restarts each of its nodes once and puts every setting back."""
    from datetime import UTC, datetime, timedelta

    info, es = prepared(sandboxes, Shape())
    # The next whole minute at least 20 s away: time for the run to plan and reach its hold before it opens.
    opens = (datetime.now(UTC) + timedelta(seconds=80)).replace(second=0, microsecond=0)
    two = first_batches(es, 2)
    window = f"daily {opens:%H:%M}-{opens + timedelta(minutes=30):%H:%M} UTC"
    path = inventory_with(tmp_path, info, lambda inv: inv.update(maintenance={"windows": [window]}))
    before, before_starts, log_marks = settings(es), starts_logged(info), marks(info)
    result = orchestrate("restart", "--config", str(path), "--yes", "--json", *(a for n in two for a in ("--nodes", n)),
                         timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    assert_no_traceback(result)
    said = [e.get("message", "") for e in json_lines(result.stdout)]
    held = [m for m in said if "held outside the maintenance window" in m]
    assert held and opens.isoformat(timespec="minutes") in held[0], said[:10]
    away = away_since(info, log_marks)
    assert sorted(a.node for a in away) == sorted(two), away
    assert all(a.stopped >= opens.astimezone().replace(tzinfo=None) for a in away), (opens, away)  # logs: local time
    assert settings(es) == before, "every setting back"
    restarted = {n: c - before_starts[n] for n, c in starts_logged(info).items()}
    assert restarted == {n: 1 if n in two else 0 for n in before_starts}, restarted
