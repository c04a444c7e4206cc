"""A first plan's estimate from each node's last restart in its own log (restart/durations.py)."""

from __future__ import annotations

from orchestrator.restart.durations import (
    LAUNCH_S,
    UNSEEN_STOP_S,
    LastRestart,
    last_restart,
    with_measured_restarts,
)
from orchestrator.restart.plan import EST_START_TO_JOIN_S, EST_STOP_S, Batch, Mode, Plan

LOG = """\
[2026-11-24T19:29:58,000][INFO ][o.e.b.Elasticsearch      ] [es-1] version[9.5.3], pid[100], build[tar/367ec31]
[2026-11-24T19:30:00,000][INFO ][o.e.n.Node               ] [es-1] starting ...
[2026-11-24T19:30:06,500][INFO ][o.e.n.Node               ] [es-1] started {es-1}{abc}{10.0.0.1}
[2026-11-24T19:38:35,841][INFO ][o.e.n.Node               ] [es-1] stopping ...
[2026-11-24T19:38:36,057][INFO ][o.e.n.Node               ] [es-1] stopped
[2026-11-24T19:38:36,061][INFO ][o.e.n.Node               ] [es-1] closed
[2026-11-24T19:38:37,018][INFO ][o.o.n.Node               ] [es-1] version[3.8.0], pid[650], build[tar/e5a3c56]
[2026-11-24T19:38:40,018][INFO ][o.e.n.Node               ] [es-1] starting ...
[2026-11-24T19:38:41,018][INFO ][o.e.n.Node               ] [es-1] started {es-1}{abc}{10.0.0.1}
"""


def test_the_last_stop_and_start_are_read_from_the_node_s_own_log() -> None:
    found = last_restart(LOG)
    # From the new process's first line (most of a start is before `starting ...`) to `started`.
    assert found == LastRestart(stop_s=0.22, start_s=LAUNCH_S + 4.0)
    first_start_only = last_restart("\n".join(LOG.splitlines()[:3]))
    assert first_start_only == LastRestart(stop_s=None, start_s=LAUNCH_S + 8.5)
    assert first_start_only.total_s == UNSEEN_STOP_S + LAUNCH_S + 8.5, "a stop never seen: a graceful one's"
    # A start still under way (no `started` after the last first line): the last whole one counts.
    assert last_restart(LOG + LOG.splitlines()[6] + "\n") == found
    assert last_restart("no such lines\n[garbage] started\n") is None


def test_each_batch_takes_its_slowest_node_and_an_unread_node_the_median() -> None:
    restart_part = EST_STOP_S + EST_START_TO_JOIN_S
    plan = Plan(cluster="c", product="elasticsearch", mode=Mode.NODE, batches=(
        Batch(1, "a", ("a",), restart_part + 5.0), Batch(2, "b+c", ("b", "c"), restart_part + 1.0),
        Batch(3, "d", ("d",), restart_part)), settings=(), tuning=(), estimate_s=3 * restart_part + 6.0,
        problems=())
    measured = {"a": LastRestart(1.0, 9.0), "b": LastRestart(2.0, 4.0), "c": LastRestart(0.5, 20.0)}
    found = with_measured_restarts(plan, measured)
    assert [b.estimate_s for b in found.batches] == [15.0, 21.5, 10.0]  # d: the median of 10, 6, 20.5
    assert found.estimate_s == 46.5 and "last restart in its own log" in found.notes[-1]
    assert with_measured_restarts(plan, {}) is plan
