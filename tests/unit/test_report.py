"""The run report is built from the journal alone: bars per phase, totals, a self-contained page."""

from __future__ import annotations

import itertools
import re

from orchestrator.es.product import PRODUCT as ELASTICSEARCH
from orchestrator.restart.journal import Journal, NodeRecord, RunState, UndoRecord, UndoState
from orchestrator.restart.report import html, model, timeline, totals
from tests.unit.journals import journal_of, plan_of


def finished_journal() -> Journal:
    marks = {"stopping": 100.0, "stopped": 102.0, "tuned": 103.0, "starting": 103.5, "start_issued": 104.0,
             "joined": 110.0, "recovering": 110.5, "done": 115.0}
    a = NodeRecord("es-1", 1, phase="done", restarted=True, phases={"stop": 2.0, "join": 6.0},
                   started_at=marks, recovery={"bytes_from_peers": 100, "bytes_reused": 900})
    b = NodeRecord("es-<2>", 2, phase="pending")
    journal = journal_of(plan_of([["es-1"], ["es-<2>"]]), state=RunState.FAILED, created=99.0, finished=120.0)
    journal.nodes = {"es-1": a, "es-<2>": b}
    return journal


def test_timeline_has_one_bar_per_finished_phase() -> None:
    bars = timeline(finished_journal())
    assert [(b.phase, b.end - b.start) for b in bars] == [("stop", 2.0), ("tune", 1.0), ("start", 0.5),
                                                          ("join", 6.0), ("recovery", 4.5)]


def test_totals_and_reuse_ratio() -> None:
    t = totals(finished_journal())
    assert (t["nodes_restarted"], t["nodes"], t["duration_s"], t["reuse_ratio"]) == (1, 2, 21.0, 0.9)


def test_page_is_self_contained_and_escaped() -> None:
    page = html(finished_journal(), ELASTICSEARCH.report_columns)
    assert page.startswith("<!doctype html>") and "<svg" in page and "<script" not in page
    assert "es-&lt;2&gt;" in page and "es-<2>" not in page
    assert re.findall(r"https?://[^\s\"']+", page) == ["http://www.w3.org/2000/svg"] * 2, "nothing fetched"
    assert "<th>from peers</th>" in page and "<td>900 B</td>" in page, "the product's columns"


def test_every_node_has_a_row_failures_are_drawn_and_settings_listed() -> None:
    journal = finished_journal()
    journal.nodes["es-1"].phase = "recovering"  # the run failed while es-1 recovered
    journal.nodes["es-1"].started_at = {k: v for k, v in journal.nodes["es-1"].started_at.items() if k != "done"}
    journal.message = "timed out after 60 s waiting for the cluster to be green again"
    journal.undo = [UndoRecord(1, "cluster.routing.allocation.enable", "persistent", None, "primaries",
                               UndoState.APPLIED, 1),
                    UndoRecord(2, "indices.recovery.max_bytes_per_sec", "persistent", "40mb", "200mb",
                               UndoState.RESTORED)]
    m = model(journal, ELASTICSEARCH.report_columns)
    assert [(r["name"], r["state"]) for r in m["rows"]] == [("es-1", "failed"), ("es-<2>", "not reached")]
    assert m["rows"][0]["failure"]["title"].startswith("es-1 failed here: timed out after 60 s")
    assert [(s["key"], s["state"]) for s in m["settings"]] == [("cluster.routing.allocation.enable", "STILL SET"),
                                                              ("indices.recovery.max_bytes_per_sec", "restored")]
    assert ("reused from the nodes' disks", "900 B (90% of what recovered)") in m["summary"]
    assert re.fullmatch(r"\d\d:\d\d:\d\d", m["ticks"][0]["label"]) and "UTC" in m["zone"]
    page = html(journal, ELASTICSEARCH.report_columns)
    assert 'class="failure" id="failure"' in page and 'data-state="not reached"' in page
    assert '<td class="still-set">STILL SET</td>' in page


def test_short_phases_are_shown_to_the_tenth_ticks_are_round_and_labels_stay_in_the_picture() -> None:
    from orchestrator.restart.journal import HistoryEntry
    from orchestrator.restart.report import LABEL_WIDTH, TIMELINE_WIDTH, even_ticks

    journal = finished_journal()
    journal.nodes["es-1"].phases = {"stop": 0.24, "tune": 1.14, "start": 0.05, "join": 6.6, "recovery": 31.0}
    m = model(journal, ELASTICSEARCH.report_columns)
    assert m["rows"][0]["phases"][:5] == ["0.24s", "1.1s", "0.05s", "6.6s", "31s"], "never 0s for a short phase"
    # Ticks on round times at an even step, whatever the run's own start.
    ticks = even_ticks(1000.3, 95.0)
    steps = {round(b[0] - a[0], 6) for a, b in itertools.pairwise(ticks)}
    assert steps == {15.0} and all(at % 15 == 0 for at, _ in ticks) and 3 <= len(ticks) <= 8
    assert len({t["x"] for t in m["ticks"]}) == len(m["ticks"])
    # A run aborted with a node back: its phase as the CLI says it, not "stopped"; a mark's label never
    # runs past the picture's right edge (it goes before the mark instead).
    journal.state = RunState.ABORTED
    journal.nodes["es-1"].phase = "joined"
    journal.nodes["es-<2>"].phase = "stopping"
    journal.nodes["es-<2>"].started_at = {"stopping": 119.0}
    journal.history = [HistoryEntry(110.0, "failed", "timed out"), HistoryEntry(111.0, "resumed", "resumed from "
                       "failed; inventory changed: ssh.user"), HistoryEntry(120.0, "aborted", "interrupted")]
    m = model(journal, ELASTICSEARCH.report_columns)
    assert [(r["name"], r["state"]) for r in m["rows"]] == [("es-1", "joined"), ("es-<2>", "stopped")]
    mark = m["rows"][1]["failure"]
    assert mark["anchor"] == "end" and mark["label_x"] < LABEL_WIDTH + TIMELINE_WIDTH
    page = html(journal, ELASTICSEARCH.report_columns)
    assert 'id="history"' in page and "inventory changed: ssh.user" in page and page.count("<tr><td") >= 3


def test_a_setting_set_again_on_resume_is_one_row_and_an_index_setting_of_many_indices_is_one_row() -> None:
    """Issue 60: the recovery limits were listed twice after a stop and a resume; a window's run changes one
    setting of every index (issue 57): one row that counts them, not one per index."""
    journal = finished_journal()
    journal.undo = [
        UndoRecord(1, "indices.recovery.max_bytes_per_sec", "persistent", None, "128mb", UndoState.RESTORED),
        UndoRecord(2, "indices.recovery.max_bytes_per_sec", "persistent", None, "128mb", UndoState.RESTORED),
        *(UndoRecord(3 + i, f"logs-{i}/index.unassigned.node_left.delayed_timeout", "index", None, "900s",
                     UndoState.RESTORED) for i in range(40)),
        UndoRecord(50, "logs-x/index.unassigned.node_left.delayed_timeout", "index", "2m", "900s", UndoState.APPLIED),
    ]
    rows = {r["key"]: r for r in model(journal)["settings"]}
    assert list(rows) == ["indices.recovery.max_bytes_per_sec", "index.unassigned.node_left.delayed_timeout"]
    assert rows["indices.recovery.max_bytes_per_sec"]["state"] == "restored (set 2 times)"
    index_row = rows["index.unassigned.node_left.delayed_timeout"]
    assert index_row["scope"] == "index (41)" and index_row["state"] == "STILL SET" and not index_row["restored"]
    assert html(journal).count("delayed_timeout") == 1


def test_where_a_run_was_interrupted_and_resumed_is_marked_on_the_timeline() -> None:
    """Issue 60: the page did not show where a run stopped and went on again."""
    from orchestrator.restart.journal import HistoryEntry

    journal = finished_journal()
    journal.history = [HistoryEntry(104.0, "aborted", "stopped by the operator (SIGINT)"),
                       HistoryEntry(108.0, "resumed", "resumed from aborted"),
                       HistoryEntry(120.0, "failed", "timed out")]
    m = model(journal)
    assert [(b["label"], b["x"]) for b in m["breaks"]] == [("aborted", m["breaks"][0]["x"]),
                                                           ("resumed", m["breaks"][1]["x"])]
    assert m["breaks"][0]["x"] < m["breaks"][1]["x"] and m["breaks"][1]["title"].startswith("resumed at ")
    page = html(journal)
    assert page.count('class="break"') == 2 and ">resumed</text>" in page and ">aborted</text>" in page
    journal.history = journal.history[-1:]  # a run that never stopped before its end: no mark
    assert model(journal)["breaks"] == [] and 'class="break"' not in html(journal)


def test_the_searches_of_the_run_are_plotted_on_the_timeline_s_axis_with_the_baseline_and_the_rate() -> None:
    """Issue 59: what searchers saw through the run, and the recovery rate the budget moved, drawn (people would
    rather look than read); the journal keeps the series bounded, the whole run drawn more coarsely."""
    from orchestrator.restart.journal import SERIES_POINTS
    from orchestrator.testing.fake import FakeCluster
    from tests.unit.test_engine import ORIGINAL, inventory, new_journal, state_dir

    journal = finished_journal()
    assert model(journal)["searches"] is None and 'id="searches"' not in html(journal), "not watched: no plot"
    with state_dir():
        recorded = new_journal(inventory(["a"]), FakeCluster.of(["a"], settings=dict(ORIGINAL)))
        for i in range(SERIES_POINTS + 1):  # one more than kept: every other point dropped, first and last kept
            at = 100.0 + i * 20 / SERIES_POINTS
            recorded.record_search({"at": at, "worst_ms": 4.0 + (i > SERIES_POINTS // 2) * 8, "mean_ms": 3.0},
                                   {"worst_ms": 4.0, "mean_ms": 3.0},
                                   200_000_000 if i < SERIES_POINTS // 2 else 100_000_000)
        assert Journal.load(recorded.path).search["series"] == recorded.search["series"], "kept on disk"  # type: ignore[arg-type]
    journal.search = recorded.search
    series = journal.search["series"]
    assert len(series) <= SERIES_POINTS and series[0][0] == 100.0 and series[-1][0] == 120.0
    plot = model(journal)["searches"]
    latency = [tuple(map(float, p.split(","))) for p in plot["latency"].split()]
    assert len(latency) == len(series) and latency == sorted(latency), "left to right in time"
    assert latency[0][1] == plot["baseline_y"], "the first points at the baseline"
    assert min(y for _, y in latency) == 10.0 and plot["top_ms"] == "12.0 ms", "the highest point at the top"
    rates = [float(p.split(",")[1]) for p in plot["rate"].split()]
    assert rates[0] == 10.0 and rates[-1] > rates[0], "the rate halved: its line lower"
    page = html(journal)
    assert 'id="searches"' in page and 'class="latency"' in page and 'class="rate"' in page


def test_a_run_the_engine_made_has_a_bar_for_each_phase_of_each_node() -> None:
    """The marks as a run writes them, in its order: a bar for each phase each node went through (a start's mark
    written before its phase began would leave the start's bar out)."""
    from orchestrator.testing.fake import FakeCluster
    from tests.unit.test_engine import ORIGINAL, inventory, new_journal, run, state_dir

    names = ["a", "b"]
    with state_dir():
        cluster = FakeCluster.of(names, settings=dict(ORIGINAL))
        journal = new_journal(inventory(names), cluster)
        run(inventory(names), cluster, journal)
    bars = timeline(journal)
    assert sorted((b.node, b.phase) for b in bars) == sorted(
        (n, p) for n in names for p in ("stop", "tune", "start", "join")), bars  # the fake's playbook: no recovery
