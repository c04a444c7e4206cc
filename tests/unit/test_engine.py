"""The restart engine over a fake cluster: the state machine, in milliseconds.

The real engine, journal, steps, undo records and lock run against orchestrator.testing's fake
cluster and hosts; the clock is fake, so waits cost nothing.
"""

from __future__ import annotations

import os
import tempfile
import threading
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestrator.config.model import Inventory, NodeEntry
from orchestrator.config.playbook import Playbook
from orchestrator.errors import (
    Aborted,
    HostDidNotReturn,
    HostError,
    OrchestratorError,
    StoppedAfter,
    UnsafeToProceed,
    WaitTimeout,
)
from orchestrator.hosts.changes import HostChange, KnobValues
from orchestrator.hosts.service import ServiceControl
from orchestrator.hosts.transport import CommandResult
from orchestrator.restart import journal as journals
from orchestrator.restart.context import RunContext
from orchestrator.restart.engine import Engine
from orchestrator.restart.events import Event
from orchestrator.restart.journal import (
    BatchRecord,
    BatchState,
    Journal,
    NodeRecord,
    RunOptions,
    RunSpec,
    RunState,
    UndoState,
)
from orchestrator.restart.lock import PAUSE_DOC, request_pause
from orchestrator.restart.phases import Phase
from orchestrator.restart.plan import Mode, Plan
from orchestrator.restart.procedure import resolve
from orchestrator.restart.reboot import with_reboot
from orchestrator.testing.fake import HELD, LIMIT, PRODUCT, Crash, FakeClock, FakeCluster, FakeSnapshot, FakeTransport

PLAYBOOK = Playbook.model_validate({
    "name": "fake-rolling", "product": "fake", "before_run": ["raise_limit"],
    "batch": ["hold_setting", "stop_service", "tune_host", "start_service", "wait_for_join", "release_setting"]})
ORIGINAL = {("cluster", LIMIT): "normal"}


@contextmanager
def state_dir() -> Iterator[Path]:
    """Journals in a directory of their own (hypothesis runs many examples per test function)."""
    with tempfile.TemporaryDirectory(dir="/dev/shm" if Path("/dev/shm").is_dir() else None) as tmp:
        before = os.environ.get("ORCHESTRATOR_STATE")
        os.environ["ORCHESTRATOR_STATE"] = tmp
        try:
            yield Path(tmp)
        finally:
            if before is None:
                os.environ.pop("ORCHESTRATOR_STATE")
            else:
                os.environ["ORCHESTRATOR_STATE"] = before


def inventory(names: list[str], zones: list[str] | None = None, join_s: float = 30, **timeouts: float) -> Inventory:
    return Inventory.model_validate({
        "cluster": {"name": "fake", "product": "fake"}, "ssh": {"transport": "local"},
        "nodes": [{"name": n, "host": f"h-{n}", **({"zone": zones[i]} if zones else {})} for i, n in enumerate(names)],
        "timeouts": {"join_s": join_s, "recovery_s": 60, "poll_interval_s": 1, **timeouts}})


def new_journal(inv: Inventory, cluster: FakeCluster, mode: Mode = Mode.NODE,
                options: RunOptions | None = None, playbook: Playbook = PLAYBOOK) -> Journal:
    options = options or RunOptions()
    plan = PRODUCT.plan(inv, cluster.snapshot(), mode, options, ())
    spec = RunSpec(mode=mode, options=options, playbook=playbook.model_dump(mode="json"), inventory_path="-",
                   inventory=inv.model_dump(mode="json"), plan=plan)
    return journals.create(Journal(
        run_id=journals.new_run_id(), cluster="fake", spec=spec,
        batches=[BatchRecord(b.number, b.label, list(b.nodes)) for b in plan.batches],
        nodes={n: NodeRecord(n, b.number) for b in plan.batches for n in b.nodes}))


def engine(inv: Inventory, cluster: FakeCluster, journal: Journal, events: list[Event]) -> Engine:
    transport = FakeTransport(cluster)
    ctx = RunContext(inv=inv, cluster=cluster, transport=transport, service=ServiceControl(transport, inv.service, 60),
                     journal=journal, emit=events.append, clock=FakeClock())
    return Engine(ctx, PRODUCT, resolve(Playbook.model_validate(journal.spec.playbook), PRODUCT))


def fake(names: list[str], zones: list[str] | None = None, **timeouts: float) -> tuple[Inventory, FakeCluster]:
    """An inventory of ``names`` and the fake cluster of them, its settings as before any run."""
    return inventory(names, zones, **timeouts), FakeCluster.of(names, settings=dict(ORIGINAL))


def context_of(inv: Inventory, cluster: FakeCluster, journal: Journal | None = None) -> RunContext:
    """A run's context over the fake cluster (on a new journal unless given), to call one step or hook."""
    return engine(inv, cluster, journal or new_journal(inv, cluster), []).ctx


def after_hold(eng: Engine, then: Callable[[RunContext, BatchRecord], None]) -> None:
    """The batch's first step (hold_setting) followed by ``then``: something happens at that moment."""
    real_hold = eng.procedure.batch[0][1]

    def hold_then(ctx: RunContext, batch: BatchRecord) -> None:
        real_hold(ctx, batch)
        then(ctx, batch)

    eng.procedure = replace(eng.procedure, batch=(("hold_setting", hold_then), *eng.procedure.batch[1:]))


def run(inv: Inventory, cluster: FakeCluster, journal: Journal) -> list[Event]:
    events: list[Event] = []
    engine(inv, cluster, journal, events).run()
    return events


def assert_finished_cleanly(cluster: FakeCluster, journal: Journal) -> None:
    assert journal.state is RunState.SUCCEEDED, journal.message
    assert {n.name: n.starts for n in cluster.nodes.values()} == dict.fromkeys(cluster.nodes, 1), \
        "every node restarted exactly once"
    assert cluster.settings == ORIGINAL, "every temporary setting back as it was"
    for name, at_stop in cluster.settings_at_stop.items():
        assert at_stop.get(("cluster", HELD)) == "held", f"{name} stopped without its batch's setting held"
        assert at_stop.get(("cluster", LIMIT)) == "raised", f"{name} stopped without the run's limit raised"
    assert all(u.state is UndoState.RESTORED for u in journal.undo)
    assert all(n.restarted and n.phase == "joined" for n in journal.nodes.values())


def test_a_run_restarts_each_node_once_and_restores_every_setting() -> None:
    with state_dir():
        inv, cluster = fake(["a", "b", "c"])
        journal = new_journal(inv, cluster)
        events = run(inv, cluster, journal)
        assert_finished_cleanly(cluster, journal)
        assert Journal.load(journal.path).state is RunState.SUCCEEDED  # type: ignore[arg-type]
        assert [e.message for e in events if e.kind == "run"][-1].startswith("run succeeded")


def operations_of_a_whole_run(names: list[str], zones: list[str] | None = None, mode: Mode = Mode.NODE) -> int:
    with state_dir():
        inv, cluster = inventory(names, zones), FakeCluster.of(names, zones, settings=dict(ORIGINAL))
        run(inv, cluster, new_journal(inv, cluster, mode))
        return cluster.operations


@contextmanager
def killed_here(cluster: FakeCluster, journal: Journal) -> Iterator[None]:
    """A run killed at the cluster's crash point as by SIGKILL: no thread of it acts on the cluster after that
    point (the fake refuses them all), and its journal's files are left as they were then. The engine
    catches the crash as any error it does not know and journals it as failed; a killed process writes
    nothing more, so that write, and those of other threads, are undone (else `resume` would read a journal
    no SIGKILL leaves)."""
    from orchestrator.restart.journal_file import changes_path

    assert journal.path is not None
    files = (journal.path, changes_path(journal.path))
    frozen: dict[Path, bytes | None] = {}
    cluster.on_crash = lambda: frozen.update({f: f.read_bytes() if f.exists() else None for f in files})
    with pytest.raises(Crash):
        yield
    cluster.on_crash, cluster.killed = None, False  # a new process
    for f, data in frozen.items():
        if data is None:
            f.unlink(missing_ok=True)
        else:
            f.write_bytes(data)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nodes=st.integers(min_value=1, max_value=4), where=st.floats(min_value=0, max_value=1, exclude_max=True),
       twice=st.booleans(), by_zone=st.booleans())
def test_killed_anywhere_then_resumed_no_node_restarts_twice_and_every_undo_ends_restored(
        nodes: int, where: float, twice: bool, by_zone: bool) -> None:
    """Killed at any operation of any step of any batch (setting writes, stop and start commands),
    then resumed from the journal on disk, perhaps killed again: every node is restarted exactly
    once and every undo record ends restored. By zone, two nodes a batch, each at its own pace."""
    names = [f"n{i}" for i in range(1, nodes + 1)]
    zones = [f"z{i // 2}" for i in range(nodes)] if by_zone else None
    mode = Mode.ZONE if by_zone else Mode.NODE
    total = operations_of_a_whole_run(names, zones, mode)
    with state_dir():
        inv, cluster = inventory(names, zones), FakeCluster.of(names, zones, settings=dict(ORIGINAL))
        journal = new_journal(inv, cluster, mode)
        cluster.crash_at = 1 + int(where * total)
        with killed_here(cluster, journal):
            run(inv, cluster, journal)
        if twice:
            cluster.crash_at = cluster.operations + 1 + int(where * (total - cluster.operations) / 2)
            again = Journal.load(journal.path)  # type: ignore[arg-type]
            with killed_here(cluster, again):
                run(inv, cluster, again)
        resumed = Journal.load(journal.path)  # type: ignore[arg-type]  # what a new process reads
        assert resumed.state is RunState.RUNNING, "killed: no end was journaled"
        run(inv, cluster, resumed)
        assert_finished_cleanly(cluster, resumed)


def test_a_node_that_never_rejoins_stops_the_run_with_the_batch_setting_kept() -> None:
    """As documented: the run fails (exit 6) naming the node; the per-batch setting stays in force (with a
    node away, undoing it would start moving its data), later nodes are untouched, and the journal says
    what is pending for `resume`."""
    with state_dir():
        inv, cluster = inventory(["a", "b", "c"], join_s=20), FakeCluster.of(["a", "b", "c"],
                                                                           settings=dict(ORIGINAL))
        cluster.nodes["a"].rejoins = False
        journal = new_journal(inv, cluster)
        with pytest.raises(WaitTimeout, match="a to rejoin") as err:
            run(inv, cluster, journal)
        assert err.value.exit_code == 6
        assert journal.state is RunState.FAILED and "a to rejoin" in journal.message
        assert cluster.settings[("cluster", HELD)] == "held"
        assert {u.key for u in journal.pending_undo()} == {HELD, LIMIT}
        assert cluster.nodes["b"].starts == cluster.nodes["c"].starts == 0
        cluster.nodes["a"].rejoins = True  # the operator fixed the node
        resumed = Journal.load(journal.path)  # type: ignore[arg-type]
        run(inv, cluster, resumed)
        assert cluster.settings == ORIGINAL and resumed.state is RunState.SUCCEEDED
        assert cluster.nodes["a"].starts == 1, "resume waits for the node; it does not start it again"


def test_zone_batches_stop_their_nodes_together() -> None:
    with state_dir():
        names, zones = ["a", "b", "c", "d"], ["z1", "z1", "z2", "z2"]
        inv = inventory(names, zones)
        cluster = FakeCluster.of(names, zones, settings=dict(ORIGINAL), stop_barrier=threading.Barrier(2))
        journal = new_journal(inv, cluster, Mode.ZONE)
        assert [b.nodes for b in journal.batches] == [["a", "b"], ["c", "d"]]
        run(inv, cluster, journal)  # a sequential stop would break the barrier (BrokenBarrierError)
        assert_finished_cleanly(cluster, journal)


def test_a_failure_in_one_node_of_a_zone_is_reported_with_the_others_state() -> None:
    with state_dir():
        names, zones = ["a", "b"], ["z1", "z1"]
        inv, cluster = inventory(names, zones), FakeCluster.of(names, zones, settings=dict(ORIGINAL))
        cluster.nodes["b"].start_fails = True
        journal = new_journal(inv, cluster, Mode.ZONE)
        with pytest.raises(HostError) as err:
            run(inv, cluster, journal)
        said = str(err.value)
        assert "b: `systemctl start elasticsearch` failed" in said
        # Each node goes at its own pace from its stop to its rejoin: a is back, not held down by b.
        assert "the other nodes of batch 1: a ok (phase joined)" in said
        assert journal.state is RunState.FAILED


def test_a_node_of_a_zone_starts_while_another_still_stops() -> None:
    """From its stop to its rejoin each node of a batch goes at its own pace: b's stop ends only once a
    has started again, which a run stopping every node before starting any could never see."""
    with state_dir():
        names, zones = ["a", "b", "c", "d"], ["z1", "z1", "z2", "z2"]
        inv = inventory(names, zones)
        cluster = FakeCluster.of(names, zones, settings=dict(ORIGINAL), stop_ends_after_start_of={"b": "a", "d": "c"})
        journal = new_journal(inv, cluster, Mode.ZONE)
        events = run(inv, cluster, journal)  # b's stop would time out (and fail the run) if a waited for it
        assert_finished_cleanly(cluster, journal)
        done = journal.batches[0].steps_done
        chain = ["stop_service", "tune_host", "start_service", "wait_for_join"]
        assert [name for name in done if name in chain] == chain, "journaled done in the playbook's order"
        said = [e.message for e in events if e.node in ("a", "b") and e.kind == "phase"]
        b_stopped = next(i for i, text in enumerate(said) if text.startswith("b: stopped in"))
        assert said.index("a: starting the service") < b_stopped


def test_an_unexpected_error_still_leaves_the_journal_saying_failed() -> None:
    with state_dir():
        inv, cluster = fake(["a"])
        journal = new_journal(inv, cluster)
        events: list[Event] = []
        eng = engine(inv, cluster, journal, events)

        def broken(ctx: RunContext, batch: BatchRecord) -> None:
            raise ZeroDivisionError("a bug")

        eng.procedure = resolve(PLAYBOOK, PRODUCT).__class__(PLAYBOOK, (("hold_setting", broken),), ())
        with pytest.raises(ZeroDivisionError):
            eng.run()
        on_disk = Journal.load(journal.path)  # type: ignore[arg-type]
        assert on_disk.state is RunState.FAILED and "internal error: ZeroDivisionError" in on_disk.message


def test_resume_of_a_run_that_failed_for_a_reason_outside_the_tool_is_refused_when_the_product_differs() -> None:
    """An operator error the application catches: a run that failed (its node's start failed) resumed with an
    inventory that names the same cluster as another product. Refused, saying so, before anything is done:
    the journal is as the failure left it and the cluster is not asked anything."""
    from orchestrator.errors import HostError, JournalError
    from orchestrator.es.product import PRODUCT as ELASTICSEARCH
    from orchestrator.runs import restart as runs
    from orchestrator.runs.target import Target, load_procedure

    with state_dir():
        inv, cluster = fake(["a"])
        cluster.nodes["a"].start_fails = True
        journal = new_journal(inv, cluster)
        with pytest.raises(HostError):
            run(inv, cluster, journal)
        assert journal.product == "fake" and journal.state is RunState.FAILED
        other = Inventory.model_validate({**inv.model_dump(mode="json", exclude={"cluster"}),
                                          "cluster": {"name": "fake", "endpoints": ["http://127.0.0.1:9"]}})
        target = Target(other, Path("fake.yaml"), ELASTICSEARCH, load_procedure(other, ELASTICSEARCH),
                        ELASTICSEARCH.connect(other))
        calls = cluster.calls
        with pytest.raises(JournalError, match=f"run {journal.run_id} is a fake run; cluster fake is now "
                                               "elasticsearch"):
            runs.resume(target, lambda e: None)
        assert Journal.load(journal.path).state is RunState.FAILED and cluster.calls == calls  # type: ignore[arg-type]


def test_data_placed_on_a_node_after_planning_stops_the_run_before_that_node_stops() -> None:
    """The last look before a stop reads the live cluster: an index whose only copy landed on batch 2's
    node after the plan (and after batch 2's gate) refuses the stop, nothing of batch 2 is left behind,
    and `resume --allow-unavailable` (recorded in the journal) goes on."""
    with state_dir():
        inv, cluster = fake(["a", "b", "c"])
        journal = new_journal(inv, cluster)
        events: list[Event] = []
        eng = engine(inv, cluster, journal, events)

        def new_index_lands(ctx: RunContext, batch: BatchRecord) -> None:
            if batch.number == 2:  # between batch 2's gate and its stop
                cluster.sole_copies["b"] = ("logs-new",)

        after_hold(eng, new_index_lands)
        with pytest.raises(OrchestratorError, match=r"not stopping batch 2 .*logs-new") as err:
            eng.run()
        assert err.value.exit_code == 6
        on_disk = Journal.load(journal.path)  # type: ignore[arg-type]
        assert on_disk.state is RunState.FAILED
        assert cluster.nodes["b"].starts == 0 and cluster.nodes["b"].up, "batch 2's node was never stopped"
        assert ("cluster", HELD) not in cluster.settings, "batch 2's own setting is restored"
        assert on_disk.batches[1].state == "pending" and on_disk.batches[1].steps_done == []
        assert on_disk.nodes["b"].phase == "pending"

        with pytest.raises(OrchestratorError, match="logs-new"):
            run(inv, cluster, Journal.load(journal.path))  # type: ignore[arg-type]  # still refused
        resumed = Journal.load(journal.path)  # type: ignore[arg-type]
        resumed.accept_unavailable(("logs-*",))
        assert Journal.load(journal.path).spec.options.allow_unavailable == ("logs-*",)  # type: ignore[arg-type]
        run(inv, cluster, resumed)
        assert_finished_cleanly(cluster, resumed)


def test_a_stop_check_is_not_repeated_for_a_batch_whose_node_is_already_down() -> None:
    """Resumed with its node already stopped, a batch brings it back; refusing then would strand it."""
    with state_dir():
        inv, cluster = fake(["a", "b"])
        journal = new_journal(inv, cluster)
        cluster.crash_at = next(i for i in range(1, 200) if crashes_after_stopping(inv, i))
        with killed_here(cluster, journal):
            run(inv, cluster, journal)
        assert not cluster.nodes["a"].up
        cluster.sole_copies["a"] = ("only-here",)
        resumed = Journal.load(journal.path)  # type: ignore[arg-type]
        run(inv, cluster, resumed)
        assert cluster.nodes["a"].up and resumed.state is RunState.SUCCEEDED


def crashes_after_stopping(inv: Inventory, point: int) -> bool:
    """Whether a crash at ``point`` finds node a stopped (the first point where it is)."""
    with state_dir():
        cluster = FakeCluster.of(["a", "b"], settings=dict(ORIGINAL), crash_at=point)
        try:
            run(inv, cluster, new_journal(inv, cluster))
        except Crash:
            return not cluster.nodes["a"].up
        return False


def scripted_gate(cluster: FakeCluster, healthy: list[bool]) -> list[bool]:
    """The gate's samples follow ``healthy`` (then the real cluster); returns the samples taken."""
    taken: list[bool] = []
    real = cluster.gate_snapshot

    def sample(plan: Plan, restarting: Collection[str], proof: bool = False) -> FakeSnapshot:
        snap = real(plan, restarting, proof)
        if len(taken) < len(healthy):
            taken.append(healthy[len(taken)])
            return snap if taken[-1] else replace(snap, down=frozenset({"somebody"}))
        taken.append(True)
        return snap

    cluster.gate_snapshot = sample  # type: ignore[method-assign]
    return taken


def test_a_batch_starts_only_after_the_stable_samples_in_a_row() -> None:
    """stable_samples: 3 -- an unhealthy sample starts the count again."""
    with state_dir():
        inv, cluster = fake(["a"], stable_samples=3)
        taken = scripted_gate(cluster, [True, False, True, True, False, True, True])
        journal = new_journal(inv, cluster)
        run(inv, cluster, journal)
        assert taken[:8] == [True, False, True, True, False, True, True, True], "started at the third in a row"
        assert len(taken) == 9, "8 samples for the gate, then the last look before the stop"
        assert_finished_cleanly(cluster, journal)


def test_the_run_stops_after_unhealthy_s_of_waiting_and_says_why() -> None:
    with state_dir():
        inv, cluster = fake(["a", "b"], unhealthy_s=45)
        scripted_gate(cluster, [False] * 1000)
        journal = new_journal(inv, cluster)
        eng = engine(inv, cluster, journal, [])
        with pytest.raises(UnsafeToProceed, match=r"not going on with batch 1 .*timed out after 45 s.*somebody"):
            eng.run()
        assert 45 <= eng.ctx.clock.monotonic() < 50  # type: ignore[attr-defined]
        assert cluster.nodes["a"].starts == 0 and journal.state is RunState.FAILED


def continue_after(cluster: FakeCluster, polls: int) -> list[str]:
    """`orchestrate continue` from another terminal, after the run has looked ``polls`` times at a pause
    asked for it. Returns the journal's `paused` reason as each look found it."""
    seen: list[str] = []
    real = cluster.read_lock

    def read_lock(index: str, doc_id: str) -> dict[str, object] | None:
        found = real(index, doc_id)
        if doc_id == PAUSE_DOC and found is not None:
            seen.append(str(found.get("reason")))
            if len(seen) >= polls:
                cluster.delete_lock(index, doc_id)
        return real(index, doc_id)

    cluster.read_lock = read_lock  # type: ignore[method-assign]
    return seen


def test_canary_pauses_after_the_first_batch_until_continue() -> None:
    with state_dir():
        inv, cluster = fake(["a", "b", "c"])
        journal = new_journal(inv, cluster, options=RunOptions(canary=True))
        looks = continue_after(cluster, polls=4)
        events: list[Event] = []
        eng = engine(inv, cluster, journal, events)
        eng.run()
        said = [e.message for e in events]
        paused = next(i for i, m in enumerate(said) if m.startswith("paused before batch 2"))
        assert "canary: batch 1 (a) is done" in said[paused] and "orchestrate continue --cluster fake" in said[paused]
        assert said[paused].count("orchestrate continue") == 1, "the way on is said once"
        assert any(m.startswith("continued: batch 2") for m in said[paused:])
        first_of_batch_2 = next(i for i, m in enumerate(said) if m.startswith("batch 2/"))
        assert paused < first_of_batch_2, "batch 2 starts only after continue"
        assert len(looks) == 4 and all(r.startswith("canary") for r in looks)
        assert not any("paused" in m for m in said[first_of_batch_2:] if m.startswith("paused")), "paused once"
        assert_finished_cleanly(cluster, journal)
        assert journal.paused is None


def test_a_pause_asked_from_elsewhere_holds_at_the_next_boundary_and_ctrl_c_still_stops() -> None:
    with state_dir():
        inv, cluster = fake(["a", "b"])
        journal = new_journal(inv, cluster)
        events: list[Event] = []
        eng = engine(inv, cluster, journal, events)

        def someone_pauses(ctx: RunContext, batch: BatchRecord) -> None:
            if batch.number == 1:
                request_pause(cluster, "maintenance window over")

        after_hold(eng, someone_pauses)
        polls = 0
        real_read = cluster.read_lock

        def read_lock(index: str, doc_id: str) -> dict[str, object] | None:
            nonlocal polls
            found = real_read(index, doc_id)
            if found is not None and doc_id == PAUSE_DOC:
                polls += 1
                if polls > 1:  # the first look finds it; from then on the journal says the run is paused
                    assert Journal.load(journal.path).paused == "maintenance window over"  # type: ignore[arg-type]
                if polls == 3:
                    eng.ctx.abort.request("SIGINT")
            return found

        cluster.read_lock = read_lock  # type: ignore[method-assign]
        with pytest.raises(Aborted, match="temporary settings restored"):
            eng.run()
        assert cluster.nodes["a"].starts == 1 and cluster.nodes["b"].starts == 0 and cluster.nodes["b"].up
        assert cluster.settings == ORIGINAL
        assert any(e.message.startswith("paused before batch 2 (b): maintenance window over") for e in events)


def test_pause_between_waits_between_batches_only() -> None:
    with state_dir():
        inv, cluster = fake(["a", "b", "c"])
        journal = new_journal(inv, cluster, options=RunOptions(pause_between_s=300))
        eng = engine(inv, cluster, journal, [])
        eng.run()
        assert_finished_cleanly(cluster, journal)
        assert eng.ctx.clock.monotonic() >= 600  # type: ignore[attr-defined]  # two gaps, none after the last
        assert eng.ctx.clock.monotonic() < 900  # type: ignore[attr-defined]


@dataclass
class ChangingTuner:
    """A tuner that finds one knob to fix on every host, and says so once per host."""

    change: HostChange
    read_ahead: list[str] = field(default_factory=list)

    def __call__(self, node: NodeEntry, read_ahead_ok: bool = False) -> Any:
        return SimpleNamespace(changes=[replace(self.change, knob=f"{self.change.knob} on {node.host}")],
                               read_ahead_s=None, drift=[])

    def look_ahead(self, nodes: Sequence[NodeEntry]) -> None:
        self.read_ahead += [n.name for n in nodes]


def test_host_changes_are_journaled_per_node_once() -> None:
    with state_dir():
        inv, cluster = fake(["a", "b"])
        journal = new_journal(inv, cluster)
        eng = engine(inv, cluster, journal, [])
        change = HostChange("thp.enabled", before=KnobValues("always", None), after=KnobValues("never", "never"))
        eng.ctx.tuner = ChangingTuner(change)
        eng.run()
        on_disk = Journal.load(journal.path)  # type: ignore[arg-type]
        assert {n: r.host_changes for n, r in on_disk.nodes.items()} == {
            "a": [replace(change, knob="thp.enabled on h-a")], "b": [replace(change, knob="thp.enabled on h-b")]}
        # Each batch's hosts are asked to be read ahead at its start, and batch 2's already while batch 1
        # ran, after its tuning (the tuner reads a host once however often it is asked).
        assert eng.ctx.tuner.read_ahead == ["a", "b", "b"]  # type: ignore[union-attr]


def test_stop_after_n_batches_stops_clean_and_resume_goes_on_in_chunks() -> None:
    with state_dir():
        inv, cluster = fake(["a", "b", "c", "d"])
        journal = new_journal(inv, cluster)
        first = engine(inv, cluster, journal, [])
        first.stop_after = 1
        with pytest.raises(StoppedAfter, match=r"stopped after 1 batch as asked.*3 batches left.*"
                                               "temporary settings restored"):
            first.run()
        assert [n.starts for n in cluster.nodes.values()] == [1, 0, 0, 0]
        assert cluster.settings == ORIGINAL, "nothing left raised or held between chunks"
        on_disk = Journal.load(journal.path)  # type: ignore[arg-type]
        assert on_disk.state is RunState.STOPPED and "--stop-after 1" in on_disk.message
        second = engine(inv, cluster, on_disk, [])
        second.stop_after = 2  # resume's own --stop-after
        with pytest.raises(StoppedAfter, match="stopped after 2 batch"):
            second.run()
        assert [n.starts for n in cluster.nodes.values()] == [1, 1, 1, 0]
        last = Journal.load(journal.path)  # type: ignore[arg-type]
        engine(inv, cluster, last, []).run()  # no --stop-after: the rest
        assert_finished_cleanly(cluster, last)


def test_stopped_by_the_operator_between_a_batchs_setting_and_its_stop_then_resumed_sets_it_again() -> None:
    """Ctrl-C after a batch's setting is made but before its node stops: the safe stop restores every
    setting, so `resume` must make them again (the batch's, and the run's raised limit) before stopping."""
    with state_dir():
        inv, cluster = fake(["a", "b", "c"])
        journal = new_journal(inv, cluster)
        eng = engine(inv, cluster, journal, [])

        def ctrl_c(ctx: RunContext, batch: BatchRecord) -> None:
            if batch.number == 2:
                ctx.abort.request("SIGINT")

        after_hold(eng, ctrl_c)
        with pytest.raises(Aborted):
            eng.run()
        assert cluster.settings == ORIGINAL and cluster.nodes["b"].up and cluster.nodes["b"].starts == 0
        resumed = Journal.load(journal.path)  # type: ignore[arg-type]
        run(inv, cluster, resumed)
        assert_finished_cleanly(cluster, resumed)


def test_several_temporary_settings_go_in_one_request_each_way_after_every_undo_record() -> None:
    from orchestrator.restart.steps import restore_settings, set_all_temporarily

    with state_dir():
        inv, cluster = inventory(["a"]), FakeCluster.of(["a"], settings={("cluster", "kept"): "x"})
        journal = new_journal(inv, cluster)
        ctx = context_of(inv, cluster, journal)
        cluster.writes.clear()
        recorded_before_write: list[bool] = []
        put = cluster.put_settings

        def checked(scope: str, values: dict[str, Any]) -> None:
            on_disk = Journal.load(journal.path)  # type: ignore[arg-type]
            recorded_before_write.append({u.key for u in on_disk.undo} >= set(values))
            put(scope, values)

        cluster.put_settings = checked  # type: ignore[method-assign]
        set_all_temporarily(ctx, [("raised", "cluster", None, "10"), ("kept", "cluster", "x", "20")], None)
        assert cluster.writes == [{"raised": "10", "kept": "20"}] and recorded_before_write == [True]
        assert [(u.key, u.state) for u in journal.pending_undo()] == [("raised", UndoState.APPLIED),
                                                                      ("kept", UndoState.APPLIED)]
        restore_settings(ctx)
        assert cluster.writes[1:] == [{"raised": None, "kept": "x"}]
        assert cluster.settings == {("cluster", "kept"): "x"} and journal.pending_undo() == []


def test_a_setting_changed_on_many_things_is_said_in_one_event_each_way_and_a_few_one_by_one() -> None:
    """A window sets each index's delay: thousands of undo records of one setting. The operator reads one event
    for them each way, with the setting, its scope, how many and the value; a setting changed on no more than
    SAID_ONE_BY_ONE things, and any other, is said one by one as before."""
    from orchestrator.restart.steps import SAID_ONE_BY_ONE, restore_settings, set_all_temporarily

    delay, replicas = "index.unassigned.node_left.delayed_timeout", "index.auto_expand_replicas"
    with state_dir():
        inv, cluster = inventory(["a"]), FakeCluster.of(["a"])
        events: list[Event] = []
        ctx = engine(inv, cluster, new_journal(inv, cluster), events).ctx
        many = [(f"logs-{i}/{delay}", "index", None if i % 2 else "1m", "30m") for i in range(SAID_ONE_BY_ONE + 1)]
        few = [(f"logs-{i}/{replicas}", "index", None, "false") for i in range(SAID_ONE_BY_ONE)]
        set_all_temporarily(ctx, [*many, *few, ("cluster.x", "persistent", None, "5")], 3)
        set_now = [e for e in events if e.kind == "undo"]
        [summary] = [e for e in set_now if "count" in e.data]
        assert summary.batch == 3
        assert summary.data == {"key": delay, "scope": "index", "count": len(many), "value": "30m"}
        assert f"on each of {len(many)}, each one's own value journaled" in summary.message
        assert sorted(e.data["key"] for e in set_now if "count" not in e.data) == sorted(
            [k for k, *_ in few] + ["cluster.x"]), "a few of a setting, and the others, one by one"
        events.clear()
        restore_settings(ctx)
        [summary] = [e for e in events if e.kind == "undo" and "count" in e.data]
        assert summary.data == {"key": delay, "scope": "index", "count": len(many)}
        assert summary.message.startswith("restored index ") and f"of {len(many)}" in summary.message
        assert len([e for e in events if e.kind == "undo"]) == 1 + len(few) + 1
        assert cluster.settings == {("index", f"logs-{i}/{delay}"): "1m" for i in range(0, len(many), 2)}


class RebootingHosts(FakeTransport):
    """Hosts with a boot id; `systemctl reboot` gives a new one, unless the host is one that never comes back."""

    def __init__(self, cluster: FakeCluster, lost: set[str]) -> None:
        super().__init__(cluster)
        self.lost = lost
        self.boots = dict.fromkeys(cluster.nodes, 0)

    def run(self, node: NodeEntry, command: str, timeout_s: float | None = None,
            stdin: bytes | None = None) -> CommandResult:
        if command == "cat /proc/sys/kernel/random/boot_id":
            self.commands.append((node.name, command))
            return CommandResult(0, f"boot-{self.boots[node.name]}\n", "")
        if command == "systemctl reboot":
            self.commands.append((node.name, command))
            self.cluster.nodes[node.name].up = False
            if node.name not in self.lost:
                self.boots[node.name] += 1
            return CommandResult(0, "", "")
        return super().run(node, command, timeout_s, stdin)


def test_a_host_that_does_not_come_back_from_its_reboot_ends_the_run_with_every_setting_restored() -> None:
    """A failed start keeps the batch's settings in force (the node is there, in trouble); a host still
    away after reboot_s is lost for longer than planned: its settings are put back, and a resume once it is
    back finishes the run."""
    with state_dir():
        inv, cluster = fake(["a", "b"], reboot_s=120)
        options = RunOptions(reboot=True)
        journal = new_journal(inv, cluster, options=options)
        hosts = RebootingHosts(cluster, lost={"b"})
        playbook = Playbook.model_validate(journal.spec.playbook)

        def engine_over(hosts: RebootingHosts, events: list[Event]) -> Engine:
            ctx = RunContext(inv=inv, cluster=cluster, transport=hosts, service=ServiceControl(hosts, inv.service, 60),
                             journal=journal, emit=events.append, clock=FakeClock())
            return Engine(ctx, PRODUCT, resolve(with_reboot(playbook), PRODUCT))

        events: list[Event] = []
        with pytest.raises(HostDidNotReturn) as err:
            engine_over(hosts, events).run()
        assert "timed out after 120 s waiting for b's host to come back from its reboot" in str(err.value)
        assert str(err.value).endswith("; temporary settings restored; `orchestrate resume` finishes the run once "
                                       "the cause is fixed"), str(err.value)
        assert err.value.exit_code == 4
        assert cluster.settings == ORIGINAL, "the batch's hold and the run's limit both put back"
        assert all(u.state is UndoState.RESTORED for u in journal.undo)
        assert journal.state is RunState.FAILED and journal.said() == str(err.value)
        assert [name for name, command in hosts.commands if command == "systemctl reboot"] == ["a", "b"]

        hosts.lost.clear()  # b is back (with a new boot): a resume finishes the run, rebooting nothing twice
        hosts.boots["b"] += 1
        engine_over(hosts, []).run()
        assert journal.state is RunState.SUCCEEDED, journal.message
        assert [name for name, command in hosts.commands if command == "systemctl reboot"] == ["a", "b"]
        assert cluster.settings == ORIGINAL and all(n.up for n in cluster.nodes.values())
        raised = [u for u in journal.undo if u.key == LIMIT]
        assert len(raised) == 2, "the run's limit raised again by the resume (its before_run ran again)"


def test_a_knob_a_reboot_reverted_is_set_again_and_reported_not_persisted() -> None:
    """After a host's reboot the tuning is read again: what the boot had reverted is fixed, journaled as NOT
    PERSISTED, warned, and named by `status` and the report."""
    from orchestrator.restart.report import not_persisted
    from orchestrator.runs.status import summary

    with state_dir():
        inv, cluster = fake(["a"], reboot_s=120)
        journal = new_journal(inv, cluster, options=RunOptions(reboot=True))
        hosts = RebootingHosts(cluster, lost=set())
        events: list[Event] = []
        ctx = RunContext(inv=inv, cluster=cluster, transport=hosts, service=ServiceControl(hosts, inv.service, 60),
                         journal=journal, emit=events.append, clock=FakeClock())
        reverted = HostChange("thp.enabled", before=KnobValues("always", None), after=KnobValues("never", "never"))
        ctx.tuner = ChangingTuner(reverted)
        Engine(ctx, PRODUCT, resolve(with_reboot(Playbook.model_validate(journal.spec.playbook)), PRODUCT)).run()
        assert journal.state is RunState.SUCCEEDED, journal.message
        on_disk = Journal.load(journal.path)  # type: ignore[arg-type]
        assert [c.not_persisted for c in on_disk.nodes["a"].host_changes] == [False, True]
        warned = [e for e in events if e.kind == "warning" and "NOT PERSISTED" in e.message]
        assert len(warned) == 1 and warned[0].data["changes"][0]["not_persisted"] is True, warned
        assert summary(on_disk)["nodes"][0]["not_persisted"] == ["thp.enabled on h-a"]
        assert not_persisted(on_disk) == [{"node": "a", "knob": "thp.enabled on h-a", "booted": "always",
                                           "fixed": "never"}]


def test_a_failed_start_keeps_the_batch_setting_in_force_for_resume() -> None:
    with state_dir():
        inv, cluster = fake(["a"])
        cluster.nodes["a"].start_fails = True
        journal = new_journal(inv, cluster)
        with pytest.raises(HostError) as err:
            run(inv, cluster, journal)
        assert not isinstance(err.value, HostDidNotReturn)
        assert cluster.settings == {("cluster", LIMIT): "raised", ("cluster", HELD): "held"}
        assert {u.key for u in journal.pending_undo()} == {LIMIT, HELD}


def test_an_abandoned_run_puts_back_every_setting_releases_its_lock_and_lets_a_new_run_start() -> None:
    from orchestrator.errors import JournalError, RunLocked
    from orchestrator.restart.lock import LOCK_INDEX, RUN_DOC
    from orchestrator.runs.restart import abandon_run, unfinished_run

    with state_dir():
        inv, cluster = inventory(["a", "b"], join_s=20), FakeCluster.of(["a", "b"], settings=dict(ORIGINAL))
        cluster.nodes["a"].rejoins = False
        journal = new_journal(inv, cluster)
        with pytest.raises(WaitTimeout):
            run(inv, cluster, journal)
        # The lock as a failed run keeps it (marked failed).
        cluster.locks[(LOCK_INDEX, RUN_DOC)] = {"run_id": journal.run_id, "host": "elsewhere", "pid": 1,
                                                "started": time.time(), "state": "failed"}
        assert unfinished_run("fake") is not None and cluster.settings != ORIGINAL

        events: list[Event] = []
        assert "`orchestrate resume`" in journal.said()
        abandon_run(journal, cluster, "fake", events.append)  # type: ignore[arg-type]
        assert cluster.settings == ORIGINAL, "the batch's hold and the run's limit put back"
        assert journal.state is RunState.ABANDONED and "NOT BACK: a" in journal.message
        assert "orchestrate resume" not in journal.message + events[-1].message, "an abandoned run is not resumed"
        assert events[-1].data == {"result": "abandoned"}
        assert cluster.read_lock(LOCK_INDEX, RUN_DOC) is None
        assert unfinished_run("fake") is None, "a new run may start"
        with pytest.raises(JournalError, match="nothing to abandon"):
            abandon_run(journal, cluster, "fake", events.append)  # type: ignore[arg-type]

        # A run alive elsewhere (its lock renewed a moment ago) is not abandoned, and nothing is changed.
        live = new_journal(inv, cluster)
        cluster.locks[(LOCK_INDEX, RUN_DOC)] = {"run_id": live.run_id, "host": "elsewhere", "pid": 1,
                                                "started": time.time(), "renewed": time.time()}
        cluster.settings[("cluster", HELD)] = "held"
        with pytest.raises(RunLocked, match="still active"):
            abandon_run(live, cluster, "fake", events.append)  # type: ignore[arg-type]
        assert cluster.settings[("cluster", HELD)] == "held" and live.state is not RunState.ABANDONED


def test_a_node_already_running_as_a_new_process_is_not_stopped_again() -> None:
    """A run killed after the node's stop and start but before the journal said so: on resume the stop step
    sees a process other than the one it recorded before the stop, and goes on without stopping it again
    (a node restarted twice is a second recovery). Removing the check fails this."""
    from orchestrator.restart import steps as generic

    with state_dir():
        inv, cluster = fake(["a"])
        journal = new_journal(inv, cluster)
        events: list[Event] = []
        eng = engine(inv, cluster, journal, events)
        journal.process_before("a", cluster.live_identity(journal.plan, "a"))
        journal.set_phase("a", Phase.STOPPING)  # the run was killed here, its stop under way
        cluster.nodes["a"].pid += 1  # stopped and started meanwhile: a new process
        generic.stop_service(eng.ctx, journal.batches[0])
        assert cluster.nodes["a"].up and not [c for n, c in eng.ctx.transport.commands if "stop" in c]  # type: ignore[attr-defined]
        assert any("already restarted (new process), not stopping again" in e.message for e in events)
        assert journal.nodes["a"].phase == "stopped"


def test_status_says_a_run_whose_process_was_killed_on_this_machine_is_interrupted_not_running() -> None:
    """A SIGKILL leaves the journal saying running; the run's lock names its process, gone from this machine."""
    import socket
    import subprocess
    from types import SimpleNamespace

    from orchestrator import products
    from orchestrator.restart.lock import LOCK_INDEX, RUN_DOC
    from orchestrator.runs.status import status

    with state_dir():
        inv, cluster = fake(["a", "b"])
        journal = new_journal(inv, cluster)
        assert Journal.load(journal.path).state is RunState.RUNNING  # type: ignore[arg-type]
        target: Any = SimpleNamespace(cluster=cluster, name="fake", product=products.get("fake"))
        lock = {"run_id": journal.run_id, "host": socket.gethostname(), "pid": os.getpid(), "started": time.time(),
                "renewed": time.time()}
        cluster.locks[(LOCK_INDEX, RUN_DOC)] = lock
        assert status(target)["run"]["state"] == "running", "its process lives"
        ended = subprocess.Popen(["true"])
        ended.wait()
        cluster.locks[(LOCK_INDEX, RUN_DOC)] = {**lock, "pid": ended.pid}
        info = status(target)
        assert info["run"]["state"] == "interrupted" and f"pid {ended.pid}" in info["run"]["message"]
        assert "`orchestrate resume --cluster fake` continues it" in info["run"]["message"]
        assert info["lock"]["gone"] is True
        cluster.locks[(LOCK_INDEX, RUN_DOC)] = {**lock, "pid": ended.pid, "host": "elsewhere"}
        assert status(target)["run"]["state"] == "running", "a process on another machine is not judged from here"


def test_a_failed_runs_next_try_is_said_where_it_is_read_and_never_by_an_abandoned_run() -> None:
    """What the run's next try does is a field of its error and of its journal (errors.py: ``resume``), not
    words in its message: the terminal says it as `orchestrate resume`, `status` too, and an abandoned run,
    which will not be tried again, not at all."""
    from orchestrator.restart.lock import LOCK_INDEX, RUN_DOC
    from orchestrator.runs.restart import abandon_run

    with state_dir():
        inv, cluster = inventory(["a"], join_s=20), FakeCluster.of(["a"], settings=dict(ORIGINAL))
        cluster.nodes["a"].rejoins = False
        journal = new_journal(inv, cluster)
        with pytest.raises(WaitTimeout) as failed:
            run(inv, cluster, journal)
        error = failed.value
        assert error.resume and str(error) == f"{error.what}; `orchestrate resume` {error.resume}"
        assert "orchestrate resume" not in error.what
        loaded = Journal.load(journal.path)  # type: ignore[arg-type]
        assert (loaded.message, loaded.resume) == (error.what, error.resume), "kept apart in the journal"
        assert loaded.said() == str(error) and loaded.history[-1].message == str(error)
        cluster.locks[(LOCK_INDEX, RUN_DOC)] = {"run_id": journal.run_id, "host": "elsewhere", "pid": 1,
                                                "started": time.time(), "state": "failed"}
        abandon_run(loaded, cluster, "fake", lambda e: None)  # type: ignore[arg-type]
        assert error.what in loaded.message and "resume" not in loaded.said()


def test_each_setting_set_and_put_back_is_an_undo_event_saying_what_it_was_and_became() -> None:
    """What `--json` and the audit log show of the run's temporary settings (mutation survivors)."""
    with state_dir():
        inv, cluster = fake(["a"])
        journal = new_journal(inv, cluster)
        undo = [(e.message, e.batch, e.data) for e in run(inv, cluster, journal) if e.kind == "undo"]
    assert undo == [
        ("set cluster fake.limit=raised (was normal)", None,
         {"key": "fake.limit", "scope": "cluster", "before": "normal", "value": "raised"}),
        ("set cluster fake.hold=held (was unset)", 1,
         {"key": "fake.hold", "scope": "cluster", "before": None, "value": "held"}),
        ("restored cluster fake.hold=unset", None, {"key": "fake.hold", "scope": "cluster", "value": None}),
        ("restored cluster fake.limit=normal", None, {"key": "fake.limit", "scope": "cluster", "value": "normal"})]


@pytest.mark.parametrize("both", [False, True])
def test_a_zone_batch_that_fails_says_what_became_of_each_of_its_other_nodes(both: bool) -> None:
    with state_dir():
        zones = ["z1", "z1", "z2"]
        inv, cluster = inventory(["a", "b", "c"], zones=zones), FakeCluster.of(["a", "b", "c"],
                                                                              settings=dict(ORIGINAL), zones=zones)
        cluster.nodes["a"].start_fails = True
        cluster.nodes["b"].start_fails = both
        journal = new_journal(inv, cluster, mode=Mode.ZONE)
        with pytest.raises(HostError) as err:
            run(inv, cluster, journal)
    said = "b failed too (phase starting)" if both else "b ok (phase joined)"
    assert str(err.value).startswith("a: `systemctl start elasticsearch` failed (exit 1): Job for elasticsearch "
                                     f"failed; the other nodes of batch 1: {said}"), err.value


def test_a_runs_prelude_runs_once_before_batch_one_and_never_again_on_resume() -> None:
    """A force-merge carried by `forcemerge --then-restart` (mutation testing found preludes without a unit test)."""
    with state_dir():
        inv, cluster = fake(["a", "b"])
        journal = new_journal(inv, cluster)
        journal.spec = replace(journal.spec, prelude={"merge": {"indices": "logs-*"}, "note": {}})
        ran: list[tuple[str, int]] = []

        def prelude(name: str) -> Any:
            def run_it(ctx: RunContext) -> None:
                ran.append((name, sum(n.starts for n in cluster.nodes.values())))
                ctx.journal.prelude_done(name, {"done": name})
            return run_it

        eng = engine(inv, cluster, journal, [])
        eng.preludes = {"merge": prelude("merge"), "note": prelude("note")}
        cluster.nodes["b"].start_fails = True
        with pytest.raises(HostError):
            eng.run()
        assert ran == [("merge", 0), ("note", 0)], "each once, in order, before any node restarted"
        cluster.nodes["b"].start_fails = False
        eng = engine(inv, cluster, journal, [])
        eng.preludes = {"merge": prelude("merge"), "note": prelude("note")}
        eng.run()
        assert ran == [("merge", 0), ("note", 0)] and journal.state is RunState.SUCCEEDED, "not again on resume"
        unknown = new_journal(inv, FakeCluster.of(["a", "b"], settings=dict(ORIGINAL)))
        unknown.spec = replace(unknown.spec, prelude={"defrag": {}})
        with pytest.raises(UnsafeToProceed, match="this run carries a defrag before its restart, which cannot run "
                                                  "here"):
            engine(inv, cluster, unknown, []).run()


def test_a_stop_asked_while_a_node_is_down_brings_it_back_first_and_says_so() -> None:
    with state_dir():
        inv, cluster = fake(["a", "b"])
        journal = new_journal(inv, cluster)
        events: list[Event] = []
        eng = engine(inv, cluster, journal, events)
        transport = eng.ctx.transport
        real_run = transport.run

        def run_and_interrupt(node: NodeEntry, command: str, timeout_s: float | None = None,
                              stdin: bytes | None = None) -> CommandResult:
            result = real_run(node, command, timeout_s, stdin)
            if "systemctl stop" in command and node.name == "a":
                eng.ctx.abort.request("SIGTERM")  # the node is down now
            return result

        transport.run = run_and_interrupt  # type: ignore[method-assign]
        with pytest.raises(Aborted) as err:
            eng.run()
    assert str(err.value).startswith("stopped by the operator (SIGTERM) at a safe point"), err.value
    warned = [(e.message, e.batch) for e in events if e.kind == "warning"]
    assert ("stop requested: bringing the batch's nodes back first", 1) in warned, warned
    assert cluster.nodes["a"].up and cluster.nodes["a"].starts == 1, "brought back before the run stopped"
    assert cluster.nodes["b"].starts == 0 and cluster.settings == ORIGINAL


def test_the_eta_is_the_plans_then_the_last_runs_then_this_runs_own_batch_times() -> None:
    with state_dir():
        inv, cluster = fake(["a", "b", "c"])
        journal = new_journal(inv, cluster)
        eng = engine(inv, cluster, journal, [])
        eng.prior_batch_s = None
        assert eng.eta_s() == sum(b.estimate_s for b in journal.plan.batches) == 3.0  # the plan's
        eng.prior_batch_s = 10.0
        assert eng.eta_s() == 30.0  # the last run's, in this mode, per batch left
        journal.batches[0].state = BatchState.DONE
        eng.batch_seconds = [2.0, 4.0]
        assert eng.eta_s() == 6.0  # this run's mean, per batch left (2 of 3)
        events: list[Event] = []
        eng = engine(inv, cluster, new_journal(inv, cluster), events)
        eng.prior_batch_s = None
        eng.run()
        first = next(e for e in events if e.kind == "batch")
        assert first.eta_s == 3.0, first


def test_a_setting_already_in_force_is_not_set_or_recorded_again_and_a_later_one_keeps_the_first_before() -> None:
    """A resume sets the run's settings again: one in force with its undo on record is left alone (the others
    of the same call still set); one set again after it was put back keeps the value from before the run
    (mutation survivors)."""
    from orchestrator.restart.steps import restore_settings, set_all_temporarily

    with state_dir():
        inv, cluster = inventory(["a"]), FakeCluster.of(["a"], settings={("cluster", "k"): "orig"})
        journal = new_journal(inv, cluster)
        ctx = context_of(inv, cluster, journal)
        set_all_temporarily(ctx, [("k", "cluster", "orig", "temp")], 1)
        cluster.writes.clear()
        set_all_temporarily(ctx, [("k", "cluster", "temp", "temp"), ("k", "persistent", None, "p"),
                                  ("other", "cluster", None, "o")], 1)
        assert cluster.writes == [{"other": "o"}, {"k": "p"}] or cluster.writes == [{"k": "p"}, {"other": "o"}]
        assert [(u.key, u.scope, u.before, u.applied) for u in journal.undo] == [
            ("k", "cluster", "orig", "temp"), ("k", "persistent", None, "p"), ("other", "cluster", None, "o")]
        restore_settings(ctx)
        cluster.settings[("cluster", "k")] = "changed-by-someone"  # between batches
        set_all_temporarily(ctx, [("k", "cluster", "changed-by-someone", "temp")], 2)
        assert journal.undo[-1].before == "orig", "the value from before the run, the one it must end on"
