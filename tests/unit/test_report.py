"""The run report is built from the journal alone: bars per phase, totals, a self-contained page."""

from __future__ import annotations

from orchestrator.es.product import PRODUCT as ELASTICSEARCH
from orchestrator.restart.journal import Journal, NodeRecord, RunState
from orchestrator.restart.report import html, timeline, totals
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
    assert "http" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "<th>from peers</th>" in page and "<td>900 B</td>" in page, "the product's columns"
