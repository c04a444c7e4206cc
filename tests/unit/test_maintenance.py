"""Maintenance windows (issue 60): the schedule read as operators write it, and runs over the fake cluster whose
clock is the calendar: a batch begins only if it should end before its window closes; the run then stops (or
holds) with every node back and every setting restored, and goes on in the next window, each node once."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml

from orchestrator.config.maintenance import Schedule, Window, parse_days, parse_until
from orchestrator.config.model import Inventory
from orchestrator.errors import ConfigError, OutsideWindow
from orchestrator.restart.engine import Engine
from orchestrator.restart.journal import BatchRecord, BatchState, Journal, RunOptions, RunState, UndoState
from orchestrator.restart.plan import Mode
from orchestrator.testing.fake import FakeClock, FakeCluster
from tests.unit.test_engine import ORIGINAL, engine, inventory, new_journal, state_dir
from tests.unit.test_window_run import WINDOWED, layout

MONDAY_20 = datetime(2026, 11, 23, 20, 0, tzinfo=UTC)  # FakeClock's calendar starts here
BATCH_S = 25.0  # each batch's time on the fake clock (its hold step moves the clock on)


def at(text: str) -> datetime:
    return datetime.fromisoformat(text)


# --- the schedule --------------------------------------------------------------------------------------
def test_days_as_operators_write_them() -> None:
    assert parse_days("Mon-Fri") == {0, 1, 2, 3, 4}
    assert parse_days("Fri-Mon") == {4, 5, 6, 0}, "a range wraps over the week's end"
    assert parse_days("sat,Sunday") == {5, 6} and parse_days("daily") == set(range(7))
    for bad in ("Mo", "Funday", "Mon-Tue-Wed"):
        with pytest.raises(ValueError, match="not a day"):
            parse_days(bad)


def test_a_window_across_midnight_belongs_to_the_day_it_opens_in_its_own_zone() -> None:
    weeknights = Schedule.of(["Mon-Fri 22:00-06:00 Europe/Berlin"])
    # Friday 23:00 in Berlin (22:00 UTC in winter): open until Saturday 06:00 Berlin.
    assert weeknights.closes_at(at("2026-11-27T22:00+00:00")) == at("2026-11-28T06:00+01:00")
    # Saturday 23:00 Berlin: closed; the next opening is Monday 22:00 Berlin.
    assert not weeknights.is_open(at("2026-11-28T22:00+00:00"))
    assert weeknights.next_opening(at("2026-11-28T22:00+00:00")) == at("2026-11-30T22:00+01:00")
    # Summer time: the same wall-clock hours, an hour earlier in UTC.
    assert weeknights.closes_at(at("2026-07-01T21:00+00:00")) == at("2026-07-02T06:00+02:00")


def test_a_batch_fits_only_if_it_ends_before_the_window_closes() -> None:
    nights = Schedule.of(["daily 22:00-23:00"])
    assert nights.fits(at("2026-11-26T22:30+00:00"), 1800)
    assert not nights.fits(at("2026-11-26T22:30+00:00"), 1801)
    assert not nights.fits(at("2026-11-26T21:59+00:00"), 10), "closed before it opens"
    # The next opening long enough for an hour and a half: none within a week of one-hour windows.
    assert nights.next_opening(at("2026-11-26T23:30+00:00"), 5400) is None
    assert nights.next_opening(at("2026-11-26T23:30+00:00"), 600) == at("2026-11-27T22:00+00:00")
    # Windows that touch are one: 22:00-23:00 and 23:00-01:00 hold a two-hour batch begun at 22:30.
    joined = Schedule.of(["daily 22:00-23:00", "daily 23:00-01:00"])
    assert joined.fits(at("2026-11-26T22:30+00:00"), 2 * 3600)


def test_until_cuts_the_windows_and_alone_is_a_window_from_now() -> None:
    now = at("2026-11-26T22:30+00:00")
    cut = Schedule.of(["daily 22:00-23:00"], until=at("2026-11-26T22:45+00:00"))
    assert cut.closes_at(now) == at("2026-11-26T22:45+00:00") and cut.next_opening(now + timedelta(hours=1)) is None
    alone = Schedule.of([], until=at("2026-11-27T06:00+00:00"))
    assert alone.fits(now, 3600) and not alone.fits(now, 8 * 3600) and alone.next_opening(now, 8 * 3600) is None
    assert Schedule().fits(now, 10**9), "no windows: always open"
    assert parse_until("2026-11-27T06:00+01:00", now) == at("2026-11-27T05:00+00:00")
    local = parse_until("06:00", now)
    assert local > now and local - now <= timedelta(days=1) and local.astimezone().strftime("%H:%M") == "06:00"
    with pytest.raises(ValueError, match="not a time"):
        parse_until("tomorrow", now)


def test_a_window_the_inventory_cannot_read_is_said_with_its_place(tmp_path: Path) -> None:
    from orchestrator.config.inventory import load_inventory

    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({
        "cluster": {"name": "c"}, "nodes": [{"name": "n1", "host": "h1"}],
        "maintenance": {"windows": ["Mon-Fri 22:00-06:00 Europe/Berlin", "Weekdays 22:00-06:00",
                                    "Sat 22:00-06:00 Mars/Olympus"], "outside": "later"}}))
    with pytest.raises(ConfigError) as raised:
        load_inventory(None, path)
    said = str(raised.value)
    assert "maintenance.windows" in said and "'Weekdays' is not a day" in said, said
    assert "maintenance.outside" in said, said
    Window.parse("Sat 22:00-06:00 UTC")  # the zone alone was not the problem of the first
    with pytest.raises(ValueError, match="not a time zone"):
        Window.parse("Sat 22:00-06:00 Mars/Olympus")


# --- runs over the fake cluster ------------------------------------------------------------------------
def windowed_inventory(names: list[str], windows: list[str], outside: str = "stop") -> Inventory:
    base = inventory(names).model_dump(mode="json")
    return Inventory.model_validate({**base, "maintenance": {"windows": windows, "outside": outside}})


def slow_engine(inv: Inventory, cluster: FakeCluster, journal: Journal, clock: FakeClock) -> tuple[Engine, list]:
    """An engine over the fake whose batches each take BATCH_S on ``clock`` (its calendar): the hold step,
    the batch's first, moves the clock on; what each stop saw of the calendar is kept."""
    events: list = []
    eng = engine(inv, cluster, journal, events)
    eng.ctx.clock = clock
    real_hold = eng.procedure.batch[0][1]
    stops_at: list[datetime] = []

    def hold_slowly(ctx, batch: BatchRecord) -> None:  # type: ignore[no-untyped-def]
        real_hold(ctx, batch)
        stops_at.append(clock.wall())
        clock.advance(BATCH_S)

    from dataclasses import replace
    eng.procedure = replace(eng.procedure, batch=(("hold_setting", hold_slowly), *eng.procedure.batch[1:]))
    eng.stops_at = stops_at  # type: ignore[attr-defined]
    return eng, events


def test_before_anything_is_measured_a_batch_is_fitted_to_the_window_by_its_own_estimate_in_the_plan() -> None:
    """No batch measured yet and no earlier run: the plan's estimate of the batch about to begin decides, not
    another batch's. A first batch of ten minutes is not begun in a one-minute window whose later batches (5 s
    each) would fit; a first batch of 5 s is, before later ones of ten minutes."""
    from dataclasses import replace

    names = ["a", "b", "c", "d"]
    inv = windowed_inventory(names, ["Mon 20:00-20:01 UTC"])

    def starts_with_first_batch_of(first_s: float, others_s: float) -> tuple[list[int], str]:
        with state_dir():
            cluster = FakeCluster.of(names, settings=dict(ORIGINAL))
            journal = new_journal(inv, cluster)
            journal.spec = replace(journal.spec, plan=replace(journal.plan, batches=tuple(
                replace(b, estimate_s=first_s if b.number == 1 else others_s) for b in journal.plan.batches)))
            eng, _ = slow_engine(inv, cluster, journal, FakeClock(MONDAY_20))
            with pytest.raises(OutsideWindow) as stopped:
                eng.run()
            return [n.starts for n in cluster.nodes.values()], str(stopped.value)

    starts, said = starts_with_first_batch_of(600.0, 5.0)
    assert starts == [0, 0, 0, 0] and "batch 1 (a) not begun" in said, said
    starts, said = starts_with_first_batch_of(5.0, 600.0)
    assert starts == [1, 1, 0, 0], said  # then measured (25 s a batch): two fit the minute


def test_a_batch_that_would_end_after_the_window_closes_is_not_begun_and_the_next_window_finishes_the_run() -> None:
    names = ["a", "b", "c", "d"]
    inv = windowed_inventory(names, ["Mon 20:00-20:01 UTC"])  # one minute: two batches of 25 s fit, not three
    with state_dir():
        cluster = FakeCluster.of(names, settings=dict(ORIGINAL))
        journal = new_journal(inv, cluster)
        eng, _ = slow_engine(inv, cluster, journal, FakeClock(MONDAY_20))
        with pytest.raises(OutsideWindow) as stopped:
            eng.run()
        assert stopped.value.exit_code == 12
        assert journal.state is RunState.STOPPED, journal.message
        assert [n.starts for n in cluster.nodes.values()] == [1, 1, 0, 0], "two batches in the window, none after"
        assert cluster.away() == set() and cluster.settings == ORIGINAL, "every node back, every setting restored"
        assert all(u.state is UndoState.RESTORED for u in journal.undo)
        assert stopped.value.opens == MONDAY_20 + timedelta(days=7), "the next window: next Monday"
        assert "batch 3 (c) not begun" in str(stopped.value) and "next window it fits opens" in str(stopped.value)
        # What its next try does, on the error and in the journal, which `status` and `resume` read.
        assert stopped.value.resume == journal.resume == "continues the remaining batches"

        # A resume outside any window changes nothing, not even the run's setup (its raised limit).
        undo_before = len(journal.undo)
        tuesday, _ = slow_engine(inv, cluster, journal, FakeClock(MONDAY_20 + timedelta(days=1)))
        with pytest.raises(OutsideWindow, match="outside the maintenance windows"):
            tuesday.run()
        assert [n.starts for n in cluster.nodes.values()] == [1, 1, 0, 0] and cluster.settings == ORIGINAL
        assert len(journal.undo) == undo_before, "no setting set outside the window"

        # Next Monday's window: the rest, each node once.
        monday, _ = slow_engine(inv, cluster, journal, FakeClock(MONDAY_20 + timedelta(days=7)))
        monday.run()
        assert journal.state is RunState.SUCCEEDED, journal.message
        assert [n.starts for n in cluster.nodes.values()] == [1, 1, 1, 1]
        assert cluster.settings == ORIGINAL
        every_stop = [*eng.stops_at, *monday.stops_at]  # type: ignore[attr-defined]
        schedule = inv.maintenance.schedule()
        assert all(schedule.fits(t, BATCH_S) for t in every_stop), "every batch began where it fit its window"


def test_a_window_of_nodes_drains_when_the_maintenance_window_closes() -> None:
    names = [f"n{i}" for i in range(1, 9)]
    inv = windowed_inventory(names, ["Mon 20:00-20:02 UTC"])
    with state_dir():
        cluster = FakeCluster.of(names, settings=dict(ORIGINAL), copies=layout(names, 1))
        journal = new_journal(inv, cluster, options=RunOptions(max_unavailable="3"), playbook=WINDOWED)
        eng, _ = slow_engine(inv, cluster, journal, FakeClock(MONDAY_20))
        with pytest.raises(OutsideWindow):
            eng.run()
        started = sum(n.starts for n in cluster.nodes.values())
        assert journal.state is RunState.STOPPED and 0 < started < len(names), (journal.message, started)
        assert cluster.away() == set() and cluster.settings == ORIGINAL
        assert "not begun" in journal.message, journal.message

        # The next Monday's window made an hour long (windows are not part of what a run does: resume takes
        # today's): the rest of the nodes, each once.
        longer = windowed_inventory(names, ["Mon 20:00-21:00 UTC"])
        monday, _ = slow_engine(longer, cluster, journal, FakeClock(MONDAY_20 + timedelta(days=7)))
        monday.run()
        assert journal.state is RunState.SUCCEEDED, journal.message
        assert {n.name: n.starts for n in cluster.nodes.values()} == dict.fromkeys(names, 1)
        assert cluster.unavailable == [] and cluster.settings == ORIGINAL


class BoundedClock(FakeClock):
    """A fake clock that refuses to wait past ``limit_s`` in all: a loop that would wait for next week fails."""

    def __init__(self, start: datetime, limit_s: float) -> None:
        super().__init__(start)
        self.limit_s = limit_s

    def advance(self, seconds: float) -> None:
        if self.now + seconds > self.limit_s:
            raise AssertionError(f"waited past {self.limit_s:.0f} s")
        super().advance(seconds)


def test_a_window_of_nodes_emptied_when_its_next_node_cannot_end_in_the_maintenance_window_stops_there() -> None:
    """The window's first node alone (the ramp), then too little of the maintenance window left for the next
    (`outside: stop`): with nobody away the run stops at once, rather than turning in its loop until a later
    window opens."""
    names = [f"n{i}" for i in range(1, 7)]
    inv = windowed_inventory(names, ["Mon 20:00-20:01 UTC"])
    with state_dir():
        cluster = FakeCluster.of(names, settings=dict(ORIGINAL), copies=layout(names, 1))
        journal = new_journal(inv, cluster, options=RunOptions(max_unavailable="3"), playbook=WINDOWED)
        eng, _ = slow_engine(inv, cluster, journal, BoundedClock(MONDAY_20 + timedelta(seconds=20), 600))
        with pytest.raises(OutsideWindow):
            eng.run()
        assert sum(n.starts for n in cluster.nodes.values()) == 1 and cluster.away() == set()
        assert journal.state is RunState.STOPPED and cluster.settings == ORIGINAL, journal.message


def test_a_window_s_next_node_that_cannot_end_in_the_maintenance_window_waits_for_those_away_then_the_run_stops(
        ) -> None:
    """Nodes still away when the next one could not end before the maintenance window closes: it is not begun,
    the loop waits for those away to come back (a turn that waits, not one that turns again at once: a loop that
    never waits never takes them in), then the emptied window stops the run."""
    from tests.unit.test_window_run import slowed

    names = [f"n{i}" for i in range(1, 7)]
    inv = windowed_inventory(names, ["Mon 20:00-20:01 UTC"])
    with state_dir():
        cluster = FakeCluster.of(names, settings=dict(ORIGINAL), start_takes_s=0.3)
        journal = new_journal(inv, cluster, options=RunOptions(max_unavailable="3"), playbook=WINDOWED)
        eng, _ = slow_engine(inv, cluster, journal, BoundedClock(MONDAY_20, 600))
        slowed(eng, "n3", 1.0)  # n3 away the longest: the window is not empty when the next node is looked at
        asked_with_nodes_away: list[int] = []
        real_within = eng.within_window

        def within(batch):  # type: ignore[no-untyped-def]
            away = sum(1 for b in journal.batches if b.state is BatchState.RUNNING)
            if away:
                asked_with_nodes_away.append(away)
                assert len(asked_with_nodes_away) < 50, "the loop turned again at once, never waiting for those away"
            real_within(batch)

        eng.within_window = within  # type: ignore[method-assign]
        with pytest.raises(OutsideWindow):
            eng.run()
        assert asked_with_nodes_away, "a node was looked at while others were away"
        assert sum(n.starts for n in cluster.nodes.values()) in (2, 3) and cluster.away() == set()
        assert journal.state is RunState.STOPPED and cluster.settings == ORIGINAL, journal.message


def test_outside_its_window_a_run_holds_with_its_lock_then_goes_on_or_with_outside_stop_ends_with_exit_12(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Through the application (its lock, its journal): started an hour before its window, the run holds
    (`outside: wait`, the default) with nothing done, says when it goes on, and finishes once the window opens; with
    `outside: stop` it ends at once (exit 12) and `resume` in the window finishes it. Each node once."""
    import functools

    from orchestrator import api
    from orchestrator.restart import journal as journals
    from orchestrator.restart.context import RunContext
    from orchestrator.runs import restart as runs_restart
    from orchestrator.testing.fake import FLEET, LIMIT

    monkeypatch.setenv("ORCHESTRATOR_STATE", str(tmp_path / "state"))
    try:
        for outside in ("wait", "stop"):
            clock = FakeClock(MONDAY_20)  # the window opens at 21:00
            monkeypatch.setattr(runs_restart, "RunContext", functools.partial(RunContext, clock=clock))
            inventory_file = tmp_path / f"{outside}.yaml"
            inventory_file.write_text(yaml.safe_dump({
                "cluster": {"name": outside, "product": "fake"}, "ssh": {"transport": "local"},
                "tuning": {"profile": "none"}, "maintenance": {"windows": ["Mon 21:00-22:00 UTC"], "outside": outside},
                "nodes": [{"name": n, "host": f"{outside}-{n}"} for n in ("n1", "n2")],
                "timeouts": {"join_s": 30, "recovery_s": 60, "poll_interval_s": 0.05}}))
            cluster = FLEET[outside] = FakeCluster.of(["n1", "n2"], settings={("cluster", LIMIT): "normal"})
            said: list[tuple[str, str]] = []

            def heard(event: api.Event, at: FakeClock = clock, said: list[tuple[str, str]] = said) -> None:
                said.append((event.kind, event.message))
                if event.kind == "batch" and "done" not in event.message:
                    assert at.wall() >= MONDAY_20 + timedelta(hours=1), f"a batch began before its window: {event}"

            if outside == "wait":
                assert api.restart(config=inventory_file, on_event=heard).result == "succeeded"
                held = [m for kind, m in said if "held outside the maintenance window" in m]
                assert held and "2026-11-23T21:00+00:00 (in 1 h 0 min)" in held[0], said
                assert [m for _, m in said].index(held[0]) < [k for k, _ in said].index("batch")
            else:
                with pytest.raises(OutsideWindow) as stopped:
                    api.restart(config=inventory_file, on_event=heard)
                assert stopped.value.exit_code == 12 and "opens 2026-11-23T21:00+00:00" in str(stopped.value)
                assert [n.starts for n in cluster.nodes.values()] == [0, 0], "nothing done outside the window"
                latest = journals.latest(outside)
                assert latest is not None and latest.state is RunState.STOPPED
                clock.advance(3600)
                assert api.resume(config=inventory_file, on_event=heard).result == "succeeded"
            assert [n.starts for n in cluster.nodes.values()] == [1, 1]
            assert cluster.settings == {("cluster", LIMIT): "normal"}
    finally:
        FLEET.clear()


def test_the_plan_says_its_windows_when_it_begins_and_ends_in_calendar_time() -> None:
    from orchestrator.restart.plan import Batch, Plan
    from orchestrator.runs.plans import with_schedule_notes

    names = ["a", "b", "c"]
    plan = Plan(cluster="c", product="fake", mode=Mode.NODE, settings=(), tuning=(),
                batches=tuple(Batch(number=i + 1, label=n, nodes=(n,), estimate_s=1200)
                                                                for i, n in enumerate(names)),
                estimate_s=3600, problems=(), node_ids={n: n for n in names})
    inv = windowed_inventory(names, ["Mon 20:00-21:00 UTC"], outside="wait")
    closed = with_schedule_notes(plan, inv, RunOptions(), now=MONDAY_20 - timedelta(hours=2))
    said = closed.notes[-1]
    assert "maintenance windows: Mon 20:00-21:00 UTC; the first batch begins 2026-11-23T20:00+00:00 (in 2 h 0 min)" \
        in said and "the run holds, its lock kept" in said, said
    assert "it ends about 2026-11-23T21:00+00:00" in said, "three batches of 20 min fill the hour"
    late = with_schedule_notes(plan, inv, RunOptions(), now=MONDAY_20 + timedelta(minutes=30))
    assert "open now, until 2026-11-23T21:00+00:00" in late.notes[-1]
    assert "it ends about 2026-11-30T20:40+00:00" in late.notes[-1], "one batch now, the last two next Monday"
    assert with_schedule_notes(plan, inventory(names), RunOptions()) is plan, "no windows: nothing said"


@pytest.mark.parametrize("until", ["25:00", "tomorrow", "2026-13-01T00:00"])
def test_an_until_that_is_not_a_time_is_refused_before_the_cluster_is_asked(tmp_path: Path, until: str) -> None:
    from tests.unit.test_cli_properties import run as orchestrate

    inv = tmp_path / "c.yaml"
    inv.write_text("cluster: {name: c, endpoints: ['http://127.0.0.1:9']}\nssh: {transport: local}\n"
                   "nodes: [{name: a, host: h}]\n")
    for command in ("plan", "restart"):
        proc = orchestrate(command, "--config", str(inv), "--until", until, *(["--yes"] * (command != "plan")))
        assert proc.returncode == 2, (until, proc.stderr)
        assert "--until" in proc.stderr and "Traceback" not in proc.stderr
