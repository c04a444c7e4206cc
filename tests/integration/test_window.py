"""The window (issue 57) on real nodes: several nodes away at once within `--max-unavailable`, each admitted on a
live per-shard proof, under a steady write load. On the "zones" group's sandbox: 9 Elasticsearch 8 nodes in 3
zones, the first 3 master-eligible (one in each zone, holding data too), the other 6 data-only.

What shows each claim is the cluster's and the nodes' own account, never the tool's journal: the load's health
watcher (every 0.5 s: never red, and how few nodes were in the cluster at once), and each node's log (when it
was away, from its "stopping ..." line to its next "started" line: who was away together, each node started
once).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from orchestrator.restart.lock import LOCK_INDEX
from orchestrator.sandbox.load import LoadGenerator
from orchestrator.sandbox.rest import access_of
from tests.helpers import REPO, STEADY_LOAD_PAUSE_S, assert_no_traceback, closed_at_teardown, json_lines, orchestrate
from tests.integration.conftest import NINE_NODES_THREE_ZONES, SandboxManager
from tests.integration.node_logs import Away, away_since, marks, overlapping
from tests.integration.test_restart import end_background_run, prepared, read_events_until, settings, starts_logged

pytestmark = pytest.mark.sandbox_shape("zones")

DELAYED = "index.unassigned.node_left.delayed_timeout"
AWARENESS = "cluster.routing.allocation.awareness.attributes"
# The balancer off for these tests: between two restarts it moves copies in either mode (one at a time too: seen
# here), which would hide what the window must show, that no copy of a node away is placed elsewhere.
REBALANCE = "cluster.routing.rebalance.enable"
MASTERS = ("es-1", "es-2", "es-3")
PIN = "index.routing.allocation.include._name"


def delays(es: Any) -> dict[str, str | None]:
    """Each index's own delayed_timeout (None: none of its own)."""
    raw = es.indices.get_settings(index="*", name=DELAYED, flat_settings=True, expand_wildcards="open")
    return {index: body["settings"].get(DELAYED) for index, body in raw.items() if not index.startswith(".")}


def in_the_window(events: list[dict[str, Any]]) -> set[int]:
    """The batches admitted and not yet done, from the run's events."""
    begun = {e["batch"] for e in events if e.get("event") == "batch" and "/" in str(e.get("message", "")).split(":")[0]}
    done = {e["batch"] for e in events if e.get("event") == "batch" and (e.get("data") or {}).get("state") == "done"}
    return begun - done


def stopped_not_started(events: list[dict[str, Any]]) -> set[str]:
    stopped = {e["node"] for e in events if e.get("event") == "phase" and e.get("phase") == "stopped"}
    started = {e["node"] for e in events if e.get("event") == "phase" and e.get("phase") == "starting"}
    return stopped - started


def most_away_together(away: list[Away]) -> int:
    """The most nodes away at one moment, by their own logs."""
    return max((sum(1 for b in away if b.stopped <= a.stopped < b.started) for a in away), default=0)


def window_run_under_load(info: dict[str, Any], index: str, *args: str,
                          kill_when: Any = None) -> tuple[subprocess.CompletedProcess[str] | None, dict[str, Any],
                                                          LoadGenerator]:
    """A window's run (`restart ARGS --max-unavailable 3`) under a steady write and search load on ``index``;
    SIGKILLed at the first event for which ``kill_when`` (the events so far) holds, then resumed. Returns the
    resume (or None) and the run's summary, and the load (stopped)."""
    load = closed_at_teardown(LoadGenerator(info["endpoints"], index=index, duration_s=900, max_docs=200_000,
                                            access=access_of(info), pause_s=STEADY_LOAD_PAUSE_S))
    load.start_then_mark("during")
    resumed = None
    try:
        run = subprocess.Popen([sys.executable, "-m", "orchestrator", "restart", *args, "--max-unavailable", "3",
                                "--yes", "--json"], cwd=REPO, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if kill_when is not None:
            seen: list[dict[str, Any]] = []
            try:
                read_events_until(run, lambda e: seen.append(e) or kill_when(seen), 900)
            finally:
                end_background_run(run, signal.SIGKILL, 30)
            resumed = orchestrate("resume", *args[:2], "--json", timeout=900)
            finished = resumed
        else:
            out, err = run.communicate(timeout=900)
            finished = subprocess.CompletedProcess(run.args, run.returncode, out, err)
        load.mark("after")
        time.sleep(3)
    finally:
        load.stop()
    assert finished.returncode == 0, finished.stderr[-3000:]
    assert_no_traceback(finished)
    summary = json_lines(finished.stdout)[-1]
    assert summary["result"] == "succeeded", summary
    report = load.report()
    print(f"load during the window's run: {json.dumps(report)}")
    assert load.missing_acknowledged() == [], "an acknowledged document was lost"
    assert report["red_samples"] == 0 and report["windows"]["during"]["index_ok"] > 0, report
    return resumed, summary, load


def assert_each_once_masters_alone(info: dict[str, Any], before_starts: dict[str, int],
                                   away: list[Away]) -> list[tuple[Away, Away]]:
    """Each node of ``before_starts`` started once more (its own log), and away once, the others not at all; a
    master-eligible node never beside another."""
    now = starts_logged(info)
    assert {k: now[k] for k in before_starts} == {k: v + 1 for k, v in before_starts.items()}, "each node once"
    assert sorted(a.node for a in away) == sorted(before_starts), f"each node away once, by its log: {away}"
    together = overlapping(away)
    assert together, f"no two nodes were down at once: {away}"
    assert not [p for p in together if "m" in p[0].roles + p[1].roles], f"a master beside another: {together}"
    return together


def placement(es: Any, pattern: str = "sample-*") -> set[tuple[str, str, str]]:
    """Where each copy of ``pattern``'s indices is: (index, shard, node)."""
    rows = es.cat.shards(index=pattern, format="json", h="index,shard,node")
    return {(r["index"], r["shard"], r["node"]) for r in rows}


def test_nine_nodes_in_three_zones_go_a_zone_at_a_time_never_red_each_once(sandboxes: SandboxManager) -> None:
    """A budget of 3 on the data nodes of 9 nodes in 3 zones, under writes: the window holds one zone at a time
    (zones are hints; each node is still proven shard by shard), so its widest moment is a zone's two data nodes.
    Never red, each node once, no copy placed anywhere but where it was (the cluster waited for the nodes away:
    each index's delay), every setting and each index's own delay as before. The masters (alone, last) are the
    no-zone test's."""
    info, es = prepared(sandboxes, NINE_NODES_THREE_ZONES)
    es.indices.put_settings(index="sample-2", settings={DELAYED: "2m"})  # an index's own value, to be kept
    es.cluster.put_settings(persistent={REBALANCE: "none"})
    before_settings, before_delays, before_starts, before_marks = settings(es), delays(es), starts_logged(info), \
        marks(info)
    # The load's index made first and the cluster settled: a balancer's move after an index is created is not the
    # run's doing. Then no copy may be placed elsewhere than it is.
    es.indices.create(index="load-zones", settings={"number_of_shards": 1, "number_of_replicas": 1})
    es.cluster.health(wait_for_status="green", wait_for_no_relocating_shards=True, timeout="120s")
    before_placement = placement(es, "sample-*,load-zones")
    masters_out = [a for m in MASTERS for a in ("--exclude", m)]
    planned = orchestrate("plan", "--cluster", "sandbox", "--max-unavailable", "3", *masters_out, "--json",
                          timeout=300)
    assert planned.returncode == 0, planned.stderr[-2000:]
    plan = json.loads(planned.stdout)
    assert any("held below the budget" in n and "zone" in n for n in plan["notes"]), plan["notes"]
    _, summary, _ = window_run_under_load(info, "load-zones", "--cluster", "sandbox", *masters_out)
    away = away_since(sandboxes.status(), before_marks)
    data_nodes = {k: v for k, v in before_starts.items() if k not in MASTERS}
    together = assert_each_once_masters_alone(sandboxes.status(), data_nodes, away)
    assert all(a.zone == b.zone for a, b in together), f"two zones away at once: {together}"
    assert es.cluster.health(wait_for_status="green", timeout="60s")["status"] == "green"
    assert placement(es, "sample-*,load-zones") == before_placement, "every copy back on its node, none elsewhere"
    assert settings(es) == before_settings, "every cluster setting as before"
    assert delays(es) == before_delays, "each index's delayed_timeout as before (sample-2's own 2m kept)"
    print("recovered from peers / reused:", {n["name"]: (n["recovery"].get("bytes_from_peers"),
                                                          n["recovery"].get("bytes_reused")) for n in summary["nodes"]})
    es.indices.put_settings(index="sample-2", settings={DELAYED: None})
    es.cluster.put_settings(persistent={REBALANCE: None})
    es.indices.delete(index="load-zones")


# The no-zone test's layout: the data nodes hold only these indices, each pinned to two nodes (allocation
# filtering). Who shares data with whom is then known: the trap's two nodes may never be away together, though
# nothing else keeps them apart; es-4, es-8, es-9 and es-6 share nothing among them, so that once the window has
# opened to 3 (after three nodes left it clean) it can hold three.
PAIRS = {"trap": ("es-5", "es-6"), "w-1": ("es-4", "es-8"), "w-2": ("es-7", "es-9"), "w-3": ("es-4", "es-9")}


def pinned_layout(es: Any) -> None:
    """Every other index onto the masters, the pairs' indices onto their two nodes, the cluster's own awareness
    off (no zones anywhere); then green with nothing moving."""
    es.cluster.put_settings(persistent={AWARENESS: "", REBALANCE: "none"})
    es.indices.put_settings(index="sample-*", settings={PIN: ",".join(MASTERS)})
    es.indices.create(index="load-pairs", settings={"number_of_shards": 1, "number_of_replicas": 1,
                                                    PIN: ",".join(MASTERS)})
    for index, pair in PAIRS.items():
        es.indices.create(index=index, settings={"number_of_shards": 1, "number_of_replicas": 1, PIN: ",".join(pair)})
        es.index(index=index, document={"pinned": pair}, refresh=True)
    health = es.cluster.health(wait_for_status="green", wait_for_no_relocating_shards=True, timeout="120s")
    assert health["status"] == "green" and health["relocating_shards"] == 0, health
    held = {(r["index"], r["node"]) for r in es.cat.shards(format="json", h="index,node")}
    assert {(i, n) for i, pair in PAIRS.items() for n in pair} <= held, held
    assert not [n for i, n in held if n not in MASTERS and i not in (*PAIRS, LOCK_INDEX)], held


def test_without_zones_three_nodes_go_together_the_trap_s_two_never_and_a_kill_with_three_away_resumes(
        sandboxes: SandboxManager, tmp_path: Path) -> None:
    """A budget of 3 with no zone known, on a layout built to trap it: the two nodes that alone hold an index
    (allocation filtering) are never away together, yet three other nodes are; SIGKILLed with three nodes in the
    window, `resume` brings them back and finishes. Under writes: never red, no acknowledged write lost, each node
    started once, a master never beside another node, every setting as before."""
    info, es = prepared(sandboxes, NINE_NODES_THREE_ZONES)
    pinned_layout(es)
    try:
        inventory = yaml.safe_load(Path(info["inventory"]).read_text())
        inventory["cluster"]["awareness_attribute"] = "rack"  # no node has one: the tool knows no zone
        for node in inventory["nodes"]:
            node.pop("zone", None)
        config = tmp_path / "no-zones.yaml"
        config.write_text(yaml.safe_dump(inventory))
        before_settings, before_delays, before_starts, before_marks = settings(es), delays(es), \
            starts_logged(info), marks(info)
        planned = json.loads(orchestrate("plan", "--config", str(config), "--max-unavailable", "3", "--json").stdout)
        assert [b["nodes"][0] for b in planned["batches"]][:6] == [f"es-{i}" for i in range(4, 10)], planned

        def three_away(events: list[dict[str, Any]]) -> bool:
            return len(in_the_window(events)) >= 3 and bool(stopped_not_started(events))

        resumed, summary, _ = window_run_under_load(info, "load-pairs", "--config", str(config),
                                                    kill_when=three_away)
        assert resumed is not None
        away = away_since(sandboxes.status(), before_marks)
        together = assert_each_once_masters_alone(sandboxes.status(), before_starts, away)
        shared = [(a.node, b.node) for a, b in together
                  if any({a.node, b.node} == set(pair) for pair in PAIRS.values())]
        assert shared == [], f"two nodes holding the only copies of an index were away together: {shared}"
        assert most_away_together(away) >= 2, f"nodes were away together: {away}"
        # What searchers saw through both runs, from the nodes' own counters: the baseline the first run measured
        # before its first stop (kept by the journal for the resume), then the load's searches interval by interval.
        searched = [e["data"] for e in json_lines(resumed.stdout) if e.get("event") == "search"]
        assert searched and max(s["queries"] for s in searched) > 0, searched
        assert summary["search"]["baseline"]["queries"] > 0, summary["search"]
        assert es.cluster.health(wait_for_status="green", timeout="60s")["status"] == "green"
        assert settings(es) == before_settings, "every cluster setting as before"
        assert delays(es) == before_delays, "each index's delayed_timeout as before"
        assert es.count(index="trap")["count"] == 1
    finally:
        es.indices.delete(index=[*PAIRS, "load-pairs"], ignore_unavailable=True)
        es.indices.put_settings(index="sample-*", settings={PIN: None})
        es.cluster.put_settings(persistent={AWARENESS: None, REBALANCE: None})
        es.cluster.health(wait_for_status="green", wait_for_no_relocating_shards=True, timeout="120s")
