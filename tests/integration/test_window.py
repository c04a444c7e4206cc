"""The window (issue 57) on real nodes: several nodes away at once within `--max-unavailable`, each admitted on a
live per-shard proof, under a steady write load; SIGKILLed with two nodes in the window, then resumed.

On the "zones" group's sandbox (6 nodes in 2 zones, 3 of them master-eligible and holding data, Elasticsearch 8):
the window holds one zone at a time, masters alone, so its widest moment is the two data nodes of zone-2 (which
allocation awareness keeps from sharing a shard). What shows it is the cluster's own account, sampled every
0.5 s by the load's health watcher: never red, and at some moment two nodes fewer than six.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from typing import Any

import pytest

from orchestrator.sandbox.load import LoadGenerator
from orchestrator.sandbox.rest import access_of
from tests.helpers import REPO, assert_no_traceback, json_lines, orchestrate
from tests.integration.conftest import SIX_NODES_TWO_ZONES, SandboxManager
from tests.integration.node_logs import away_since, marks, overlapping
from tests.integration.test_restart import end_background_run, prepared, read_events_until, settings, starts_logged

DELAYED = "index.unassigned.node_left.delayed_timeout"


def delays(es: Any) -> dict[str, str | None]:
    """Each sample index's own delayed_timeout (None: none of its own)."""
    raw = es.indices.get_settings(index="sample-*", name=DELAYED, flat_settings=True)
    return {index: body["settings"].get(DELAYED) for index, body in raw.items()}


def two_away(events: list[dict[str, Any]]) -> bool:
    """Two batches in the window and one of their nodes stopped: the moment to kill the run."""
    begun = {e["batch"] for e in events if e.get("event") == "batch" and "/" in str(e.get("message", "")).split(":")[0]}
    done = {e["batch"] for e in events if e.get("event") == "batch" and (e.get("data") or {}).get("state") == "done"}
    stopped = {e["node"] for e in events if e.get("event") == "phase" and e.get("phase") == "stopped"}
    started = {e["node"] for e in events if e.get("event") == "phase" and e.get("phase") == "starting"}
    return len(begun - done) >= 2 and bool(stopped - started)


@pytest.mark.sandbox_shape("zones")
def test_a_window_of_three_under_writes_is_never_red_and_killed_with_two_nodes_in_it_resumes_once_each(
        sandboxes: SandboxManager) -> None:
    info, es = prepared(sandboxes, SIX_NODES_TWO_ZONES)
    es.indices.put_settings(index="sample-2", settings={DELAYED: "2m"})  # an index's own value, to be kept
    before_settings, before_delays, before_starts = settings(es), delays(es), starts_logged(info)
    before_marks = marks(info)
    plan = orchestrate("plan", "--cluster", "sandbox", "--max-unavailable", "3", "--json", timeout=300)
    assert plan.returncode == 0, plan.stderr[-2000:]
    planned = json.loads(plan.stdout)
    assert [b["nodes"][0] for b in planned["batches"]][:3] == ["es-5", "es-4", "es-6"], "the smallest zone first"
    assert any(s["key"] == DELAYED for s in planned["settings"]), planned["settings"]
    load = LoadGenerator(info["endpoints"], index="load-window", duration_s=900, max_docs=200_000,
                         access=access_of(info))
    load.start_then_mark("during")
    try:
        run = subprocess.Popen([sys.executable, "-m", "orchestrator", "restart", "--cluster", "sandbox",
                                "--max-unavailable", "3", "--yes", "--json"], cwd=REPO, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            seen: list[dict[str, Any]] = []
            read_events_until(run, lambda e: seen.append(e) or two_away(seen), 600)
        finally:
            end_background_run(run, signal.SIGKILL, 30)
        resumed = orchestrate("resume", "--cluster", "sandbox", "--json", timeout=900)
        load.mark("after")
        time.sleep(3)
    finally:
        load.stop()
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert_no_traceback(resumed)
    summary = json_lines(resumed.stdout)[-1]
    # What searchers saw, read from the nodes' own counters through both runs: the baseline the first run measured
    # before its first stop (kept by the journal for the resume), then the load's searches interval by interval.
    searched = [e["data"] for e in json_lines(resumed.stdout) if e.get("event") == "search"]
    assert searched and max(s["queries"] for s in searched) > 0, searched
    assert summary["search"]["baseline"]["queries"] > 0 and summary["search"]["baseline"]["mean_ms"] >= 0, summary
    report = load.report()
    print(f"load during the window's run: {json.dumps(report)}")
    assert summary["result"] == "succeeded", summary
    assert load.missing_acknowledged() == [], "an acknowledged document was lost"
    assert report["red_samples"] == 0 and report["windows"]["during"]["index_ok"] > 0, report
    assert report["fewest_nodes"] is not None and report["fewest_nodes"] <= 4, "two nodes were away together"
    assert starts_logged(sandboxes.status()) == {k: v + 1 for k, v in before_starts.items()}, "each node once"
    # The nodes' own account of when each was away: once each, a master-eligible node never beside another node,
    # never two zones at once, and two nodes down together at some time.
    away = away_since(sandboxes.status(), before_marks)
    assert sorted(a.node for a in away) == sorted(before_starts), f"each node away once, by its log: {away}"
    together = overlapping(away)
    assert together, f"no two nodes were down at once: {away}"
    assert not [p for p in together if "m" in p[0].roles + p[1].roles], f"a master beside another: {together}"
    assert all(a.zone == b.zone for a, b in together), f"two zones away at once: {together}"
    assert es.cluster.health(wait_for_status="green", timeout="60s")["status"] == "green"
    assert settings(es) == before_settings, "every cluster setting as before"
    assert delays(es) == before_delays, "each index's delayed_timeout as before (sample-2's own 2m kept)"
    es.indices.put_settings(index="sample-2", settings={DELAYED: None})
    es.indices.delete(index="load-window")  # the group's upgrade next: no more shards than it had
