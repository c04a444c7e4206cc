"""The restart engine over a fake cluster: the state machine, in milliseconds.

The real engine, journal, steps, undo records and lock run against orchestrator.testing's fake
cluster and hosts; the clock is fake, so waits cost nothing.
"""

from __future__ import annotations

import os
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestrator.config.model import Inventory
from orchestrator.config.playbook import Playbook
from orchestrator.errors import HostError, OrchestratorError, WaitTimeout
from orchestrator.hosts.service import ServiceControl
from orchestrator.restart import journal as journals
from orchestrator.restart.context import RunContext
from orchestrator.restart.engine import Engine
from orchestrator.restart.events import Event
from orchestrator.restart.journal import BatchRecord, Journal, NodeRecord, RunOptions, RunSpec, RunState, UndoState
from orchestrator.restart.plan import Mode
from orchestrator.restart.procedure import resolve
from orchestrator.testing.fake import HELD, LIMIT, PRODUCT, Crash, FakeClock, FakeCluster, FakeTransport

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


def inventory(names: list[str], zones: list[str] | None = None, join_s: float = 30) -> Inventory:
    return Inventory.model_validate({
        "cluster": {"name": "fake", "product": "fake"}, "ssh": {"transport": "local"},
        "nodes": [{"name": n, "host": f"h-{n}", **({"zone": zones[i]} if zones else {})} for i, n in enumerate(names)],
        "timeouts": {"join_s": join_s, "recovery_s": 60, "poll_interval_s": 1}})


def new_journal(inv: Inventory, cluster: FakeCluster, mode: Mode = Mode.NODE) -> Journal:
    plan = PRODUCT.plan(inv, cluster.snapshot(), mode, RunOptions(), ())
    spec = RunSpec(mode=mode, options=RunOptions(), playbook=PLAYBOOK.model_dump(mode="json"), inventory_path="-",
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


def run(inv: Inventory, cluster: FakeCluster, journal: Journal) -> list[Event]:
    events: list[Event] = []
    engine(inv, cluster, journal, events).run()
    return events


def assert_finished_cleanly(cluster: FakeCluster, journal: Journal) -> None:
    assert journal.state is RunState.SUCCEEDED, journal.message
    assert {n.name: n.starts for n in cluster.nodes.values()} == dict.fromkeys(cluster.nodes, 1), \
        "every node restarted exactly once"
    assert cluster.settings == ORIGINAL, "every temporary setting back as it was"
    assert all(u.state is UndoState.RESTORED for u in journal.undo)
    assert all(n.restarted and n.phase == "joined" for n in journal.nodes.values())


def test_a_run_restarts_each_node_once_and_restores_every_setting() -> None:
    with state_dir():
        inv, cluster = inventory(["a", "b", "c"]), FakeCluster.of(["a", "b", "c"], settings=dict(ORIGINAL))
        journal = new_journal(inv, cluster)
        events = run(inv, cluster, journal)
        assert_finished_cleanly(cluster, journal)
        assert Journal.load(journal.path).state is RunState.SUCCEEDED  # type: ignore[arg-type]
        assert [e.message for e in events if e.kind == "run"][-1].startswith("run succeeded")


def operations_of_a_whole_run(names: list[str]) -> int:
    with state_dir():
        inv, cluster = inventory(names), FakeCluster.of(names, settings=dict(ORIGINAL))
        run(inv, cluster, new_journal(inv, cluster))
        return cluster.operations


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nodes=st.integers(min_value=1, max_value=4), where=st.floats(min_value=0, max_value=1, exclude_max=True),
       twice=st.booleans())
def test_killed_anywhere_then_resumed_no_node_restarts_twice_and_every_undo_ends_restored(
        nodes: int, where: float, twice: bool) -> None:
    """Killed at any operation of any step of any batch (setting writes, stop and start commands),
    then resumed from the journal on disk, perhaps killed again: every node is restarted exactly
    once and every undo record ends restored."""
    names = [f"n{i}" for i in range(1, nodes + 1)]
    total = operations_of_a_whole_run(names)
    with state_dir():
        inv, cluster = inventory(names), FakeCluster.of(names, settings=dict(ORIGINAL))
        journal = new_journal(inv, cluster)
        cluster.crash_at = 1 + int(where * total)
        with pytest.raises(Crash):
            run(inv, cluster, journal)
        if twice:
            cluster.crash_at = cluster.operations + 1 + int(where * (total - cluster.operations) / 2)
            with pytest.raises(Crash):
                run(inv, cluster, Journal.load(journal.path))  # type: ignore[arg-type]
        resumed = Journal.load(journal.path)  # type: ignore[arg-type]  # what a new process reads
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
        assert "the other nodes of batch 1: a ok (phase starting)" in said
        assert journal.state is RunState.FAILED


def test_an_unexpected_error_still_leaves_the_journal_saying_failed() -> None:
    with state_dir():
        inv, cluster = inventory(["a"]), FakeCluster.of(["a"], settings=dict(ORIGINAL))
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
    """An operator error the engine should catch: a journal of one product resumed against another."""
    with state_dir():
        inv, cluster = inventory(["a"]), FakeCluster.of(["a"])
        journal = new_journal(inv, cluster)
        assert journal.product == "fake"
        with pytest.raises(OrchestratorError):
            resolve(Playbook.model_validate({**journal.spec.playbook, "product": "riak"}), PRODUCT)
