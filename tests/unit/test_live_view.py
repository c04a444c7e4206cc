"""The live view (issue 60's stumbles): its ETA moves between batches' ends, its "waiting on" column says what a
node's rejoin waits for, and its title says what searchers see; `status` names the nodes away (a window's several)."""

from __future__ import annotations

from rich.console import Console

from orchestrator.cli.render import RunView
from orchestrator.restart.events import Event
from orchestrator.testing.fake import FakeCluster
from tests.unit.test_engine import ORIGINAL, inventory, new_journal, run, state_dir


def shown(view: RunView) -> str:
    console = Console(width=200, record=True)
    console.print(view.render())
    return console.export_text()


def test_the_eta_counts_down_from_the_last_one_said_and_the_title_says_what_searchers_see() -> None:
    view = RunView(as_json=False, nodes=["es-1"])
    view.live_mode = False  # what is rendered, not where: no terminal here
    view(Event("batch", "batch 1/3: es-1 (es-1)", eta_s=600))
    view.eta_at -= 120  # two minutes later, no batch ended meanwhile
    assert "ETA 8m" in shown(view), shown(view)
    view.eta_at -= 3600
    assert "ETA 0s" in shown(view) or "ETA 0.0s" in shown(view), shown(view)  # never below zero
    view(Event("search", "searches: 12.0 queries/s, 3.1 ms each, 0 queued", data={}))
    assert "ETA 0s searches: 12.0 queries/s, 3.1 ms each" in " ".join(shown(view).split())


def test_a_rejoin_says_what_it_waits_for_in_the_node_s_row() -> None:
    names = ["a", "b"]
    with state_dir():
        cluster = FakeCluster.of(names, settings=dict(ORIGINAL), join_polls=3)
        # Still booting at the end of each look's server-side wait: three looks miss before it joins.
        cluster.await_identity = lambda plan, name, timeout_s: cluster.live_identity(plan, name)  # type: ignore[method-assign]
        events = run(inventory(names), cluster, new_journal(inventory(names), cluster))
        waits = [e for e in events if e.kind == "wait" and "waiting to rejoin" in e.message]
        assert {e.node for e in waits} == {"a", "b"}, [e.message for e in events]
        assert waits[0].message == "a: waiting to rejoin: a is not in the cluster yet", waits[0].message
        view = RunView(as_json=False, nodes=names)
        view.live_mode = False
        view(Event("phase", "a: joining", node="a", phase="joining"))
        view(waits[0])
        row = next(line for line in shown(view).splitlines() if line.strip().startswith("a "))
        assert row.rstrip().endswith("waiting to rejoin: a is not in the cluster yet"), row


def test_status_says_which_nodes_are_away_and_in_which_phase() -> None:
    from orchestrator.cli.restart_cmd import away_line

    nodes = {"a": {"phase": "done"}, "b": {"phase": "recovering"}, "c": {"phase": "stopped"}, "d": {"phase": "pending"}}
    assert away_line(nodes) == "away now: b (recovering), c (stopped)"
    assert away_line({"a": {"phase": "done"}, "d": {"phase": "pending"}}) == ""


def test_on_a_terminal_a_stopped_run_is_said_once_and_the_live_table_gives_way_to_the_report(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """After Ctrl-C the result was said twice (the run's last event, then the command's own line) and the live
    table stayed above the report's: the command's line alone says a run that did not succeed, and the live
    table is transient."""
    import io

    from orchestrator.cli import render

    out = io.StringIO()
    console = Console(file=out, force_terminal=True, color_system=None, width=120)
    monkeypatch.setattr(render.terminal, "err", console)
    view = RunView(as_json=False, nodes=["es-1"])
    view.live_mode = True  # as on a terminal
    with view:
        assert view.live is not None and view.live.transient, "the live table gives way to the report's"
        view(Event("batch", "batch 1/3: es-1 (es-1)"))
        view(Event("run", "run aborted: stopped by the operator (SIGINT)", data={"result": "aborted"}))
        view(Event("run", "run succeeded: all 3 batches restarted", data={"result": "succeeded"}))
    said = out.getvalue()
    assert "batch 1/3: es-1" in said and "run succeeded" in said
    assert "run aborted" not in said, "the command's own `aborted: ...` line says it, once"
