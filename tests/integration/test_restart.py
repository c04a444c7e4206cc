"""Rolling restarts of the real sandbox through real SSH hosts: node mode, zone mode, both versions."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml
from elasticsearch import Elasticsearch

from orchestrator.sandbox.load import LoadGenerator
from orchestrator.sandbox.rest import access_of
from tests.helpers import REPO, STEADY_LOAD_PAUSE_S, assert_no_traceback, closed_at_teardown, json_lines, orchestrate
from tests.integration.conftest import SandboxManager, Shape, es_client
from tests.integration.test_sandbox import ssh

ALLOC = "cluster.routing.allocation.enable"


def settings(es: Elasticsearch) -> dict[str, Any]:
    raw = es.cluster.get_settings(flat_settings=True)
    return {"persistent": raw["persistent"], "transient": raw["transient"]}


def starts_logged(info: dict[str, Any]) -> dict[str, int]:
    """How many times each node's Elasticsearch has started, from its own log: proof of 'exactly once'."""
    counts = {}
    for n in info["nodes"]:
        log = Path(info["inventory"]).parent / "hosts" / n["name"] / "node" / "logs" / "sandbox.log"
        counts[n["name"]] = log.read_text().count("] starting ...")
    return counts


def prepared(sandboxes: SandboxManager, shape: Shape) -> tuple[dict[str, Any], Elasticsearch]:
    info = sandboxes.get(shape)
    es = es_client(info)
    if not es.indices.exists(index="sample-1"):
        proc = orchestrate("sandbox", "load", "--docs", "6000")
        assert proc.returncode == 0, proc.stderr
    es.cluster.health(wait_for_status="green", timeout="60s")
    return info, es


def doc_counts(es: Elasticsearch) -> dict[str, int]:
    es.indices.refresh(index="sample-*")
    return {i: es.count(index=i)["count"] for i in ("sample-1", "sample-2", "sample-3")}


def run_restart_and_verify(sandboxes: SandboxManager, shape: Shape, by: str,
                           under_load: bool = False, tuned: bool = False) -> dict[str, Any]:
    info, es = prepared(sandboxes, shape)
    if tuned:  # every host tuned before: each is read ahead and needs nothing while its node is down
        proc = orchestrate("tune", "--cluster", "sandbox", "--apply", "--yes")
        assert proc.returncode == 0, proc.stderr
    load = None
    if under_load:
        load = closed_at_teardown(LoadGenerator(info["endpoints"], index="load-test", duration_s=600, max_docs=200_000,
                                                access=access_of(info), pause_s=STEADY_LOAD_PAUSE_S))
        load.start_then_mark("during")
    # Settings in both scopes, including one the run raises: all must come back exactly.
    es.cluster.put_settings(transient={"cluster.routing.allocation.node_concurrent_recoveries": "3"},
                            persistent={"indices.recovery.max_bytes_per_sec": "50mb",
                                        "cluster.routing.allocation.cluster_concurrent_rebalance": "2"})
    try:
        before_settings = settings(es)
        before_docs = doc_counts(es)
        before_starts = starts_logged(info)
        before_pids = {n["name"]: n["pid"] for n in info["nodes"]}
        master_before = es.cat.master(format="json")[0]["node"]

        planned = json.loads(orchestrate("plan", "--cluster", "sandbox", "--by", by, "--json").stdout)
        proc = orchestrate("restart", "--cluster", "sandbox", "--by", by, "--yes", "--json", timeout=900)
        if load is not None:
            load.mark("after")
            time.sleep(3)
            load.stop()
            report = load.report()
            print(f"load during the {by}-mode restart: {json.dumps(report)}")  # the figures, in the test log
            assert load.missing_acknowledged() == [], "an acknowledged document was lost"
            assert report["red_samples"] == 0 and report["health_samples"] > 10
            assert report["windows"]["during"]["index_ok"] > 0
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert_no_traceback(proc)
        lines = json_lines(proc.stdout)
        summary = lines[-1]
        assert summary["event"] == "summary" and summary["result"] == "succeeded"
        # The estimate, from each node's last restart in its own log (not fixed figures: 2m06s for a run of
        # 31-46 s before). Printed for the record; bounded loosely, as a timing on a shared machine: a cold
        # sandbox's first plan reads starts slowed by three JVMs booting at once on two cores (1.4-1.55x here),
        # while a node booting under this test's load takes longer than its last start did (0.47-0.51 measured on
        # 2026-11-26, 72-80 s against an estimate of 37 s; 0.34 on a slower CI machine on 2026-11-27, 97.9 s
        # against 33.6 s): within 4x when slower, 2.5x when faster. Fixed figures were 4x too high for a fast run.
        ratio = planned["estimate_s"] / summary["duration_s"]
        print(f"{by}-mode estimate {planned['estimate_s']} s, actual {summary['duration_s']} s, ratio {ratio:.2f}")
        assert any("last restart in its own log" in n for n in planned["notes"]), planned["notes"]
        assert 0.25 <= ratio <= 2.5, (planned["estimate_s"], summary["duration_s"])
        assert {n["name"] for n in summary["nodes"]} == set(before_pids)
        for n in summary["nodes"]:
            assert n["restarted"] is True
            assert set(n["phases"]) >= {"stop", "start", "join", "recovery"}
            assert n["recovery"]["bytes_from_peers"] >= 0 and n["recovery"]["bytes_reused"] >= 0

        after = sandboxes.status()
        assert all(after_pid != before_pids[n["name"]] for n in after["nodes"] for after_pid in [n["pid"]])
        assert starts_logged(after) == {k: v + 1 for k, v in before_starts.items()}, "each node started exactly once"
        assert es.cluster.health()["status"] == "green"
        assert doc_counts(es) == before_docs  # sample-* indices take no writes during the run
        assert settings(es) == before_settings
        # The elected master (at the start) is in the last batch.
        assert master_before in summary["batches"][-1]["nodes"]
        read_ahead = check_audit_log(summary, by)
        if tuned:
            assert read_ahead == set(before_pids), "hosts already tuned: each read ahead, none touched while down"
        # The lock index (made by this run if no earlier one did): released, and hidden from index patterns.
        assert not es.exists(index="orchestrator-locks", id="run"), "the lock is released"
        # Its journal's copy stays beside it, saying the run's end, for `status` from any machine.
        copied = es.get(index="orchestrator-locks", id="journal")["_source"]
        assert copied["run_id"] == summary["run_id"] and '"state":"succeeded"' in copied["base"].replace(" ", "")
        hidden = es.indices.get_settings(index="orchestrator-locks", name="index.hidden")
        assert hidden["orchestrator-locks"]["settings"]["index"]["hidden"] == "true"
        assert "orchestrator-locks" not in {row["index"] for row in es.cat.indices(index="*", format="json")}
        return summary
    finally:  # a failed assertion above must not leave the next test these settings
        es.cluster.put_settings(transient={"cluster.routing.allocation.node_concurrent_recoveries": None},
                                persistent={"indices.recovery.max_bytes_per_sec": None,
                                            "cluster.routing.allocation.cluster_concurrent_rebalance": None})


def lock_index_documents(es: Elasticsearch) -> dict[str, Any]:
    """The documents of the lock's index (the lock, a pause, the journal's copy), each with its version."""
    if not es.indices.exists(index="orchestrator-locks"):
        return {}
    es.indices.refresh(index="orchestrator-locks")
    found = es.search(index="orchestrator-locks", size=1000, version=True)["hits"]["hits"]
    return {h["_id"]: h["_version"] for h in found}


def test_plan_changes_nothing_and_orders_master_last(sandboxes: SandboxManager) -> None:
    info, es = prepared(sandboxes, Shape())
    before = settings(es)
    documents = lock_index_documents(es)
    pids = {n["name"]: n["pid"] for n in info["nodes"]}
    proc = orchestrate("plan", "--cluster", "sandbox", "--json")
    assert proc.returncode == 0, proc.stderr
    plan = json.loads(proc.stdout)
    assert plan["safe"] is True
    master = es.cat.master(format="json")[0]["node"]
    assert [b["nodes"] for b in plan["batches"]][-1] == [master]
    assert {s["key"] for s in plan["settings"]} >= {ALLOC, "indices.recovery.max_bytes_per_sec"}
    # The raised limits come from the nodes as they report themselves: their processors here.
    cores = min(n["os"]["allocated_processors"] for n in es.nodes.info(metric="os")["nodes"].values())
    concurrent = next(s for s in plan["settings"] if s["key"].endswith("node_concurrent_recoveries"))
    assert "smallest data node (es-" in concurrent["why"] and f": {cores})" in concurrent["why"], concurrent
    human = orchestrate("plan", "--cluster", "sandbox")
    assert human.returncode == 0 and "SAFE" in human.stdout and "THP" in human.stdout
    assert settings(es) == before
    assert {n["name"]: n["pid"] for n in sandboxes.status()["nodes"]} == pids
    assert lock_index_documents(es) == documents, "no lock taken, no document written"


def test_plan_says_unsafe_for_an_index_without_replicas(sandboxes: SandboxManager) -> None:
    _info, es = prepared(sandboxes, Shape())
    es.indices.create(index="no-replica", settings={"number_of_shards": 3, "number_of_replicas": 0})
    try:
        es.cluster.health(index="no-replica", wait_for_status="green", timeout="30s")
        proc = orchestrate("plan", "--cluster", "sandbox")
        assert proc.returncode == 6
        assert "no-replica" in proc.stdout and "0 replicas" in proc.stdout
        refused = orchestrate("restart", "--cluster", "sandbox", "--yes")
        assert refused.returncode == 5 and "no-replica" in refused.stderr
        accepted = orchestrate("plan", "--cluster", "sandbox", "--allow-unavailable", "no-repl*")
        assert accepted.returncode == 0, accepted.stdout
        assert "index no-replica will be unavailable while it restarts (accepted by --allow-unavailable" in \
            accepted.stdout.replace("\n", " ")
    finally:
        es.indices.delete(index="no-replica")


def check_audit_log(summary: dict[str, Any], by: str) -> set[str]:
    """The run's audit log beside its journal: who ran it, each stop and start on each host, the
    settings requests, the events; its size is printed (a figure for the docs). Returns the nodes
    whose host tuning was read ahead (while they ran) and needed nothing: on those hosts, nothing ran
    between the stop and the start."""
    log = Path(summary["journal"]).with_name(f"{summary['run_id']}.log.jsonl")
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    kinds = Counter(line["kind"] for line in lines)
    assert lines[0]["kind"] == "invocation" and lines[0]["run_id"] == summary["run_id"]
    commands = [line for line in lines if line["kind"] == "command"]
    for node in summary["nodes"]:
        for verb in ("stop", "start"):
            # A stop also reads how it ended (Result=timeout: killed) in the same round trip.
            assert any(c["node"] == node["name"] and f"systemctl {verb} elasticsearch" in c["command"]
                       and c["rc"] == 0 for c in commands), f"no `systemctl {verb}` logged for {node['name']}"
    assert any(r["method"] == "PUT" and r["url"].endswith("/_cluster/settings") and r["status"] == 200
               for r in lines if r["kind"] == "request")
    assert kinds["event"] > 0, dict(kinds)
    # A run that started green waits for green server-side, never for yellow and then again.
    health = [r["url"] for r in lines if r["kind"] == "request" and "/_cluster/health?" in r["url"]]
    assert any("wait_for_status=green" in u for u in health) and not any("wait_for_status=yellow" in u
                                                                         for u in health), health
    read_ahead = set()
    for node in summary["nodes"]:
        mine = [c["command"] for c in commands if c["node"] == node["name"]]
        stop = next(i for i, c in enumerate(mine) if "systemctl stop elasticsearch" in c)
        start = next(i for i, c in enumerate(mine) if c.endswith("systemctl start elasticsearch"))
        said = [e["message"] for e in lines if e["kind"] == "event" and e.get("node") == node["name"]
                and "host tuning:" in e["message"]]
        assert len(said) == 1, said
        if "as read" in said[0]:
            assert mine[stop + 1:start] == [], f"{node['name']}: read ahead, yet commands ran while it was down"
            read_ahead.add(node["name"])
        else:
            assert mine[stop + 1:start], f"{node['name']}: tuned while down, yet no command ran then"
    print(f"audit log of the {by}-mode restart of {len(summary['nodes'])} nodes: {log.stat().st_size} bytes, "
          f"{len(lines)} lines {dict(kinds)}")
    return read_ahead


def settled_health(es: Elasticsearch, unassigned: int, timeout_s: float = 60) -> dict[str, Any]:
    """Health once nothing moves and ``unassigned`` copies are left (replicas are assigned in rounds)."""
    deadline = time.monotonic() + timeout_s
    while True:
        health = dict(es.cluster.health(wait_for_no_initializing_shards=True, timeout="10s"))
        if health["unassigned_shards"] == unassigned and not health["relocating_shards"]:
            return health
        assert time.monotonic() < deadline, f"the cluster did not settle with {unassigned} unassigned: {health}"
        time.sleep(0.5)


def test_allow_yellow_is_kept_by_the_run_and_it_finishes_on_a_yellow_no_reason_settles(
        sandboxes: SandboxManager) -> None:
    """An allocation filter keeps one copy of each shard out: a yellow that no documented reason settles
    (shards/settled.py). Without --allow-yellow the restart is refused; with it, every batch's gate and
    recovery wait accept that yellow (and only it: each batch waits until no more copies are unassigned
    than at the start), and the run finishes."""
    _info, es = prepared(sandboxes, Shape())
    es.indices.create(index="over-replicated", settings={"number_of_shards": 2, "number_of_replicas": 2,
                                                         "index.routing.allocation.exclude._name": "es-3"})
    try:
        health = settled_health(es, unassigned=2)
        assert health["status"] == "yellow", health
        refused = orchestrate("restart", "--cluster", "sandbox", "--yes")
        assert refused.returncode == 5 and "yellow" in refused.stderr, refused.stderr[-1500:]
        # The two nodes that hold the index's copies: two batches, each gate and recovery wait on that yellow.
        proc = orchestrate("restart", "--cluster", "sandbox", "--yes", "--json", "--allow-yellow", "--nodes", "es-1",
                           "--nodes", "es-2", timeout=900)
        assert proc.returncode == 0, proc.stderr[-3000:]
        summary = json_lines(proc.stdout)[-1]
        assert summary["result"] == "succeeded" and summary["options"]["allow_yellow"] is True
        assert all(n["restarted"] for n in summary["nodes"])
        assert json.loads(Path(summary["journal"]).read_text())["spec"]["options"]["allow_yellow"] is True
        assert settled_health(es, unassigned=2)["status"] == "yellow"
    finally:
        es.indices.delete(index="over-replicated")


def test_an_installed_wheel_plans_the_sandbox_with_its_shipped_playbook(sandboxes: SandboxManager,
                                                                      tmp_path: Path) -> None:
    """`pip install .` (not editable): the package carries its playbooks and tuning profiles, and
    `--cluster sandbox` is found without a source checkout."""
    prepared(sandboxes, Shape())
    site = tmp_path / "site"
    built = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site),
                            str(REPO)], capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr[-2000:]
    assert (site / "orchestrator" / "shipped" / "playbooks" / "elasticsearch-rolling.yaml").is_file()
    env = {**os.environ, "PYTHONPATH": str(site)}
    where = subprocess.run([sys.executable, "-c", "import orchestrator; print(orchestrator.__file__)"],
                           capture_output=True, text=True, cwd=tmp_path, env=env)
    assert where.stdout.startswith(str(site)), where.stdout + where.stderr
    proc = subprocess.run([sys.executable, "-m", "orchestrator", "plan", "--cluster", "sandbox", "--json"],
                          capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    plan = json.loads(proc.stdout)
    assert plan["safe"] and len(plan["batches"]) == 3 and plan["product"] == "elasticsearch"


def test_node_mode_restart_of_three_nodes_under_load(sandboxes: SandboxManager, tmp_path: Path) -> None:
    summary = run_restart_and_verify(sandboxes, Shape(), "node", under_load=True, tuned=True)
    assert len(summary["batches"]) == 3
    # `status` shows the run and nothing pending; `report` draws it; restart left the page beside the journal.
    proc = orchestrate("status", "--cluster", "sandbox", "--json")
    assert proc.returncode == 0, proc.stderr
    info = json.loads(proc.stdout)
    assert info["run"]["state"] == "succeeded" and info["run"]["run_id"] == summary["run_id"]
    assert info["temporary_settings"] == [] and info["lock"] is None
    page = tmp_path / "report.html"
    report = orchestrate("report", "--cluster", "sandbox", "--html", str(page))
    assert report.returncode == 0 and "SUCCEEDED" in report.stdout, report.stderr
    html = page.read_text()
    # A bar per phase (stop, tune, start, join, recovery) for each of the 3 nodes.
    timeline = html.split('id="timeline"')[1].split("</svg>")[0]
    assert timeline.count("<rect") == 15 and all(f"es-{i}" in html for i in (1, 2, 3))
    assert Path(summary["journal"]).with_suffix(".html").exists(), "restart writes the report beside the journal"


def test_under_writes_a_restarted_node_waits_for_retention_leases_and_copies_nothing(
        sandboxes: SandboxManager, tmp_path: Path) -> None:
    """Writes move the commit the flush makes past leases the primary renews only every 30 s: without
    waiting for the renewal, the node's copies of the written index are copied again in full.

    On a fresh sandbox: after other tests' restarts and merges, an idle copy is now and then copied in
    full although its lease was current (1 run in 3 of test_forcemerge.py before this test; issue 16's
    open case, docs/benchmarks.md). That is measured by `make bench`, not asserted here."""
    sandboxes.get(Shape(), fresh=True)
    info, es = prepared(sandboxes, Shape())
    load = closed_at_teardown(LoadGenerator(info["endpoints"], index="lease-test", duration_s=300, max_docs=50_000,
                                            access=access_of(info), pause_s=STEADY_LOAD_PAUSE_S))
    load.start_then_mark("during")
    inventory = custom_inventory(tmp_path, lambda inv: inv.setdefault("recovery", {}).update(
        lease_wait_min_bytes="0b"))
    held = {(r["index"], int(r["shard"])) for r in es.cat.shards(format="json", h="index,shard,node")
            if r["node"] == "es-2"}
    started_ms = time.time() * 1000
    try:
        proc = orchestrate("restart", "--config", str(inventory), "--nodes", "es-2", "--yes", "--json", timeout=600)
    finally:
        load.stop()
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert load.missing_acknowledged() == []
    lines = json_lines(proc.stdout)
    messages = [line.get("message", "") for line in lines]
    assert any("waiting for Elasticsearch to renew the retention leases" in m for m in messages), messages
    assert any("retention leases renewed after" in m for m in messages), messages
    # From Elasticsearch itself: every recovery onto es-2 since the run began replayed operations or
    # reused files: not one byte was copied from a peer, for the written index too.
    onto = [(index, s) for index, body in es.indices.recovery(index="*", active_only=False).items()
            for s in body["shards"]
            if s["target"]["name"] == "es-2" and s["start_time_in_millis"] >= started_ms and s["type"] == "PEER"]
    assert "lease-test" in {index for index, _ in onto}, "es-2 held a copy of the written index"
    copied = [(index, s["id"], s["source"]["name"], s["index"]["size"]["recovered_in_bytes"],
               "held before" if (index, s["id"]) in held else "new on es-2") for index, s in onto
              if s["index"]["size"]["recovered_in_bytes"]]
    assert copied == [], f"copied from peers (index, shard, source, bytes): {copied}; the run said: " + "; ".join(
        m for m in messages if "lease" in m or "copied from peers" in m)
    assert lines[-1]["nodes"][0]["recovery"]["bytes_from_peers"] == 0
    es.indices.delete(index="lease-test")


def custom_inventory(tmp_path: Path, change: Any) -> Path:
    inv = yaml.safe_load(Path(sandbox_inventory()).read_text())
    change(inv)
    path = tmp_path / "inventory.yaml"
    path.write_text(yaml.safe_dump(inv))
    return path


def sandbox_inventory() -> str:
    return str(json.loads(orchestrate("sandbox", "status", "--json").stdout)["inventory"])


def test_wrong_host_key_fails_preflight_and_changes_nothing(sandboxes: SandboxManager, tmp_path: Path) -> None:
    _info, es = prepared(sandboxes, Shape())
    before = settings(es)
    known = Path(yaml.safe_load(Path(sandbox_inventory()).read_text())["ssh"]["known_hosts"]).read_text()
    other_key = subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "k")],
                               capture_output=True)
    assert other_key.returncode == 0
    fake = (tmp_path / "k.pub").read_text().split()
    lines = known.splitlines()
    lines[1] = f"{lines[1].split()[0]} {fake[0]} {fake[1]}"  # es-2's key replaced
    (tmp_path / "known_hosts").write_text("\n".join(lines) + "\n")
    path = custom_inventory(tmp_path, lambda inv: inv["ssh"].update(known_hosts=str(tmp_path / "known_hosts")))
    proc = orchestrate("restart", "--config", str(path), "--yes")
    assert proc.returncode == 5, proc.stderr
    assert "host key does not match" in proc.stderr and "es-2" in proc.stderr
    assert_no_traceback(proc)
    assert settings(es) == before


def test_missing_node_fails_preflight(sandboxes: SandboxManager, tmp_path: Path) -> None:
    _info, es = prepared(sandboxes, Shape())
    before = settings(es)
    path = custom_inventory(tmp_path, lambda inv: inv["nodes"].append({"name": "es-9", "host": "10.231.0.19"}))
    proc = orchestrate("restart", "--config", str(path), "--yes")
    assert proc.returncode == 5
    assert "es-9" in proc.stderr and "not in the cluster" in proc.stderr
    assert settings(es) == before


def start_background_run(*extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "orchestrator", "restart", "--cluster", "sandbox", "--yes",
                             "--json", *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)


def end_background_run(proc: subprocess.Popen[str], sig: signal.Signals, timeout: float) -> str:
    """Signal the run (by its PID), wait for it, and close its pipes; return all it wrote (stdout, stderr)."""
    if proc.poll() is None:
        os.kill(proc.pid, sig)
    out, err = proc.communicate(timeout=timeout)
    return out + err


def read_events_until(proc: subprocess.Popen[str], predicate: Any, timeout: float) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        if line.startswith("{"):
            events.append(json.loads(line))
            if predicate(events[-1]):
                return events
    raise AssertionError(f"the awaited event never came; saw {[e.get('message') for e in events][-5:]}")


def kill_while_batch_two_is_down() -> None:
    """Start a run and SIGKILL it while the second batch's node is down: the worst moment."""
    run = start_background_run()
    try:
        read_events_until(run, lambda e: e.get("event") == "phase" and e.get("batch") == 2
                          and e.get("phase") == "stopped", 300)
    finally:
        end_background_run(run, signal.SIGKILL, 30)


def test_second_concurrent_run_is_refused_and_two_stop_signals_leave_nothing_half_set(
        sandboxes: SandboxManager, tmp_path: Path) -> None:
    """While a run (of one node) has its node down: a second run, from another machine (a state directory of its
    own: it knows nothing of the first run), is refused by the lock in the cluster, changing nothing, and `unlock`
    keeps a live run's lock. Then SIGTERM and, while the run stops safely, SIGINT: the second signal is refused,
    the node is brought back, every setting restored, exit 130; `resume` finishes the run."""
    info, es = prepared(sandboxes, Shape())
    before = settings(es)
    first = start_background_run("--nodes", "es-1")
    try:
        read_events_until(first, lambda e: e.get("event") == "phase" and e.get("phase") == "stopped", 300)
        second = orchestrate("restart", "--config", info["inventory"], "--yes",
                             env={"ORCHESTRATOR_STATE": str(tmp_path / "machine-b")})
        assert second.returncode in (5, 7), second.stderr
        assert "another run holds this cluster's lock" in second.stderr, second.stderr
        assert not list((tmp_path / "machine-b").glob("runs/*/*.json")), "the refused run wrote no journal"
        kept = orchestrate("unlock", "--cluster", "sandbox", "--yes")  # a live run's lock is not removed
        assert kept.returncode == 6 and "is alive: it renewed its lock" in kept.stderr, kept.stderr
        status = json.loads(orchestrate("status", "--cluster", "sandbox", "--json").stdout)
        assert status["lock"]["run_id"] == status["run"]["run_id"]
        first.send_signal(signal.SIGTERM)
        time.sleep(0.3)
        said = end_background_run(first, signal.SIGINT, 600)  # the second one, while it stops safely
    finally:
        if first.poll() is None:
            end_background_run(first, signal.SIGKILL, 30)
    assert first.returncode == 130, said[-2000:]
    assert "already stopping at a safe point" in said and "temporary settings restored" in said, said[-2000:]
    assert settings(es) == before
    assert es.cluster.health(wait_for_status="green", timeout="120s")["status"] == "green"
    resumed = orchestrate("resume", "--cluster", "sandbox")  # the stopped run finishes cleanly
    assert resumed.returncode == 0, resumed.stderr[-2000:]


def test_node_that_does_not_come_back_stops_the_run(sandboxes: SandboxManager, tmp_path: Path) -> None:
    info, es = prepared(sandboxes, Shape())
    # A drop-in on es-1 whose service exits at once: the node never comes back.
    drop_in = "/etc/systemd/system/elasticsearch.service.d/broken.conf"
    broken = ssh(info, "es-1", f"mkdir -p {Path(drop_in).parent} && printf '[Service]\\nExecStart=\\n"
                               f"ExecStart=/bin/false\\n' > {drop_in} && systemctl daemon-reload")
    assert broken.returncode == 0, broken.stderr

    def short_join(inv: dict[str, Any]) -> None:
        inv["timeouts"]["join_s"] = 15

    path = custom_inventory(tmp_path, short_join)
    try:
        proc = orchestrate("restart", "--config", str(path), "--nodes", "es-1", "--yes", timeout=600)
        assert proc.returncode in (4, 6), proc.stderr
        assert "es-1" in proc.stderr
        assert_no_traceback(proc)
        assert settings(es)["persistent"].get(ALLOC) == "primaries"
        # The failed run keeps its lock, marked failed: `unlock` keeps it, `status` says resume finishes it.
        kept = orchestrate("unlock", "--cluster", "sandbox", "--yes")
        assert kept.returncode == 6 and "waits for `orchestrate resume`" in kept.stderr, kept.stderr
        assert "FAILED and waits for `orchestrate resume`" in orchestrate("status", "--cluster", "sandbox").stdout
    finally:
        ssh(info, "es-1", f"rm -f {drop_in} && systemctl daemon-reload")
    # Resumed with the sandbox's own inventory (--yes: it differs from the run's): 15 s to rejoin only
    # served to fail fast on the broken unit, and would race the next node's boot on a busy machine.
    resumed = orchestrate("resume", "--cluster", "sandbox", "--yes", timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert ALLOC not in settings(es)["persistent"]


@pytest.mark.sandbox_shape("local")
def test_local_mode_restart_with_service_commands(sandboxes: SandboxManager) -> None:
    """No SSH: the `commands` service manager and the local transport, as for a non-root user."""
    info = sandboxes.get(Shape(hosts="local", secured=False))  # service commands; insecure for CI's time
    inv = yaml.safe_load(Path(info["inventory"]).read_text())
    assert inv["service"]["manager"] == "commands" and inv["ssh"]["transport"] == "local"
    before = {n["name"]: n["pid"] for n in info["nodes"]}
    proc = orchestrate("restart", "--cluster", "sandbox", "--yes", "--json", timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json_lines(proc.stdout)[-1]["result"] == "succeeded"
    after = {n["name"]: n["pid"] for n in sandboxes.status()["nodes"]}
    assert all(after[n] != before[n] for n in before)
