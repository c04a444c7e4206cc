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
    assert found is not None and (found.stop_s, found.start_s) == (0.22, LAUNCH_S + 4.0)
    assert found.loading[1] - found.loading[0] == 3.0, "its loading: the first line to `starting ...`"
    first_start_only = last_restart("\n".join(LOG.splitlines()[:3]))
    assert first_start_only is not None
    assert (first_start_only.stop_s, first_start_only.start_s) == (None, LAUNCH_S + 8.5)
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


# The sandbox's first boot (2026-11-24, 2 cores): three nodes loading at once, each about twice as long as
# one alone (3.2 s from its first line to `starting ...`, 4.3 s to `started`).
COLD_BOOT = {"es-1": ("22:22:36,775", "22:22:43,954", "22:22:46,070"),
             "es-2": ("22:22:36,621", "22:22:42,998", "22:22:44,547"),
             "es-3": ("22:22:37,018", "22:22:43,030", "22:22:44,761")}


def cold_boot_log(name: str) -> str:
    first, loaded, started = COLD_BOOT[name]
    return (f"[2026-11-24T{first}][INFO ][o.e.b.Elasticsearch      ] [{name}] version[9.5.3], pid[41]\n"
            f"[2026-11-24T{loaded}][INFO ][o.e.n.Node               ] [{name}] starting ...\n"
            f"[2026-11-24T{started}][INFO ][o.e.n.Node               ] [{name}] started {{{name}}}\n")


def test_starts_that_shared_one_kernel_s_cpus_are_counted_at_the_share_each_had() -> None:
    from orchestrator.restart.durations import shared_cpu_starts

    measured = {n: found for n in COLD_BOOT if (found := last_restart(cold_boot_log(n))) is not None}
    assert [round(m.start_s - LAUNCH_S, 1) for m in measured.values()] == [9.3, 7.9, 7.7]
    shared = shared_cpu_starts(measured, {n: "btime 1795500000, 2 cpus" for n in measured})
    # es-1 loaded 7.2 s, of which 6.0 s with two others and 0.3 s with one: 3.1 s alone, + 2.1 s to join.
    assert [round(m.start_s - LAUNCH_S, 1) for m in shared.values()] == [5.2, 3.8, 3.7]
    apart = shared_cpu_starts(measured, {"es-1": "a", "es-2": "b", "es-3": "c"})
    assert apart == measured, "hosts of their own kernels shared nothing"
    assert shared_cpu_starts(measured, {}) == measured, "a kernel not read: nothing is assumed"
