"""The engine's waits between batches, over the fake cluster: what the gate is asked and says, a pause,
a deferred run's waits, and the time left. Each assertion here was missing when a mutant of
restart/engine.py changed it and every other test passed (`make mutate`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import pytest

from orchestrator.errors import Aborted
from orchestrator.restart.deferral import Deferral, Deferred
from orchestrator.restart.engine import PAUSE_POLL_S
from orchestrator.restart.events import Event
from orchestrator.restart.journal import BatchState, RunOptions
from orchestrator.restart.lock import request_pause
from orchestrator.restart.plan import Plan
from orchestrator.testing.fake import PRODUCT, FakeCluster, FakeSnapshot
from tests.unit.test_engine import (
    ORIGINAL,
    assert_finished_cleanly,
    continue_after,
    engine,
    fake,
    inventory,
    new_journal,
    scripted_gate,
    state_dir,
)


class ScriptedGate:
    """The fake product, whose gate answers from a script (then as the fake would) and records what it
    was asked: the snapshot, plan, nodes and options."""

    def __init__(self, answers: list[list[str]]) -> None:
        self.answers = answers
        self.asked: list[tuple[Any, Plan, tuple[str, ...], RunOptions]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(PRODUCT, name)

    def gate(self, snapshot: FakeSnapshot, plan: Plan, nodes: Sequence[str], options: RunOptions) -> list[str]:
        self.asked.append((snapshot, plan, tuple(nodes), options))
        if len(self.asked) <= len(self.answers):
            return self.answers[len(self.asked) - 1]
        return PRODUCT.gate(snapshot, plan, nodes, options)


def snapshots_asked(cluster: FakeCluster) -> list[tuple[Plan, tuple[str, ...]]]:
    """Each gate snapshot the run reads from ``cluster``: for which plan and nodes."""
    asked: list[tuple[Plan, tuple[str, ...]]] = []
    real = cluster.gate_snapshot

    def gate_snapshot(plan: Plan, restarting: Sequence[str], proof: bool = False) -> FakeSnapshot:
        asked.append((plan, tuple(restarting)))
        return real(plan, restarting, proof)

    cluster.gate_snapshot = gate_snapshot  # type: ignore[method-assign]
    return asked


def test_the_gate_is_asked_of_each_batchs_nodes_with_the_runs_plan_and_options_and_says_each_change_once() -> None:
    with state_dir():
        inv, cluster = fake(["a", "b"], stable_samples=2)
        options = RunOptions(allow_yellow=True)
        journal = new_journal(inv, cluster, options=options)
        events: list[Event] = []
        eng = engine(inv, cluster, journal, events)
        snapshots = snapshots_asked(cluster)
        gate = ScriptedGate([["x is away", "y is short"], ["x is away", "y is short"], ["z moves"], []])
        eng.product = gate  # type: ignore[assignment]
        eng.run()
        assert_finished_cleanly(cluster, journal)
        waits = [(e.message, e.batch) for e in events if e.kind == "wait"]
        assert waits == [("batch 1 waits: x is away y is short", 1), ("batch 1 waits: z moves", 1)], \
            "what blocks, once per change, named with its batch"
        assert {(p is journal.plan, nodes) for p, nodes in snapshots} == {(True, ("a",)), (True, ("b",))}
        options = journal.spec.options
        assert {(p is journal.plan, nodes, o) for _, p, nodes, o in gate.asked} == {(True, ("a",), options),
                                                                                    (True, ("b",), options)}
        assert len([n for _, _, n, _ in gate.asked if n == ("a",)]) == 5, "3 unhealthy, then 2 in a row"


def test_a_batch_waits_for_stable_samples_from_the_first_one_and_looks_once_a_poll_interval() -> None:
    with state_dir():
        inv, cluster = fake(["a"], stable_samples=3)
        taken = scripted_gate(cluster, [True] * 3)
        eng = engine(inv, cluster, new_journal(inv, cluster), [])
        eng.run()
        assert len(taken) == 4, "3 healthy samples for the gate, then the last look before the stop"
    with state_dir():
        inv, cluster = fake(["a"], unhealthy_s=20)
        taken = scripted_gate(cluster, [False] * 1000)
        eng = engine(inv, cluster, new_journal(inv, cluster), [])
        with pytest.raises(Exception, match="not going on with batch 1"):
            eng.run()
        assert 20 <= len(taken) <= 21, "one look a second (poll_interval_s: 1) for 20 s"


def test_ctrl_c_while_a_batch_waits_for_the_gate_stops_the_run_at_once() -> None:
    with state_dir():
        inv, cluster = fake(["a", "b"], unhealthy_s=600)
        eng = engine(inv, cluster, new_journal(inv, cluster), [])
        real = cluster.gate_snapshot
        looks = 0

        def unhealthy_then_ctrl_c(plan: Plan, restarting: Sequence[str], proof: bool = False) -> FakeSnapshot:
            nonlocal looks
            looks += 1
            if looks == 3:
                eng.ctx.abort.request("SIGINT")
            return replace(real(plan, restarting), down=frozenset({"somebody"}))

        cluster.gate_snapshot = unhealthy_then_ctrl_c  # type: ignore[method-assign]
        with pytest.raises(Aborted):
            eng.run()
        assert looks == 3 and eng.ctx.clock.monotonic() < 10  # type: ignore[attr-defined]
        assert cluster.settings == ORIGINAL and cluster.nodes["a"].starts == 0


def test_a_pause_says_its_reason_or_paused_with_its_batch_and_looks_every_few_seconds() -> None:
    for reason, said in (("night", "night"), ("", "paused")):
        with state_dir():
            inv, cluster = fake(["a", "b"])
            journal = new_journal(inv, cluster)
            request_pause(cluster, reason)
            looks = continue_after(cluster, polls=3)
            events: list[Event] = []
            eng = engine(inv, cluster, journal, events)
            eng.run()
            assert_finished_cleanly(cluster, journal)
            runs = [(e.message, e.batch) for e in events if e.kind == "run"]
            assert runs[:2] == [(f"paused before batch 1 (a): {said}. `orchestrate continue --cluster fake` goes on",
                                 1), ("continued: batch 1 (a) next", 1)]
            assert len(looks) == 3
            assert eng.ctx.clock.monotonic() >= PAUSE_POLL_S, "looked again after a poll"  # type: ignore[attr-defined]


def test_a_deferring_run_leaves_a_gate_or_a_pause_to_its_watcher_saying_what_it_waits_for() -> None:
    with state_dir():
        inv, cluster = fake(["a", "b"])
        scripted_gate(cluster, [False])
        eng = engine(inv, cluster, new_journal(inv, cluster), [])
        eng.ctx.deferral = Deferral()
        with pytest.raises(Deferred) as gated:
            eng.run()
        wait = gated.value.wait
        assert (wait.kind, wait.batch, wait.nodes, wait.what) == ("gate", 1, ("a",),
                                                                 "the cluster to be safe for batch 1 (a)")
    with state_dir():
        inv, cluster = fake(["a", "b"])
        eng = engine(inv, cluster, new_journal(inv, cluster), [])
        eng.ctx.deferral = Deferral()
        request_pause(cluster, "night")
        with pytest.raises(Deferred) as paused:
            eng.run()
        wait = paused.value.wait
        assert (wait.kind, wait.batch, wait.nodes, wait.what) == ("pause", 1, ("a",),
                                                                 "`orchestrate continue --cluster fake`")


def test_the_time_left_follows_the_batches_left_and_what_they_measured() -> None:
    """What `status` and the live view say is left: the plan's estimates of the batches left before anything is
    measured, then the last like run's batch time, then this run's own; less as batches end, less again with
    several nodes in flight."""
    with state_dir():
        inv, cluster = fake(["a", "b", "c"])
        journal = new_journal(inv, cluster)
        plan = journal.plan
        journal.spec = replace(journal.spec, plan=replace(plan, batches=tuple(
            replace(b, estimate_s=10.0 * b.number) for b in plan.batches)))
        eng = engine(inv, cluster, journal, [])
        eng.prior_batch_s = None
        assert eng.eta_s() == pytest.approx(60, abs=0.1), "the plan's estimates, 10 + 20 + 30"
        eng.prior_batch_s = 7.0
        assert eng.eta_s() == pytest.approx(21, abs=0.1), "three batches at the last like run's 7 s"
        journal.batches[0].state = BatchState.DONE
        assert eng.eta_s() == pytest.approx(14, abs=0.1), "two left"
        eng.batch_seconds = [4.0, 6.0]
        assert eng.eta_s() == pytest.approx(10, abs=0.1), "this run's own mean of 5 s, over the last like run's"
        eng.at_once = 2
        assert eng.eta_s() == pytest.approx(5, abs=0.1), "two nodes in flight at once"
        eng.batch_seconds = []
        assert eng.eta_s() == pytest.approx(7, abs=0.1), "the last like run's 7 s, two nodes in flight at once"
        journal.batches[1].state = journal.batches[2].state = BatchState.DONE
        assert eng.eta_s() == 0


def test_a_runs_batch_and_end_events_carry_their_batch_time_left_and_result() -> None:
    import re

    with state_dir():
        inv, cluster = fake(["a", "b"])
        events: list[Event] = []
        eng = engine(inv, cluster, new_journal(inv, cluster), events)
        eng.run()
        said = [(e.kind, re.sub(r"in \d+\.\d s", "in N s", e.message), e.batch, e.eta_s is not None, e.data)
                for e in events if e.kind in ("batch", "run", "wait")]
        assert said == [("batch", "batch 1/2: a (a)", 1, True, {}),
                        ("batch", "batch 1 done in N s", 1, True, {"state": "done"}),
                        ("batch", "batch 2/2: b (b)", 2, True, {}),
                        ("batch", "batch 2 done in N s", 2, True, {"state": "done"}),
                        ("run", "run succeeded: all 2 batches restarted", None, False, {"result": "succeeded"})]
        assert all(0 < s < 60 for s in eng.batch_seconds), eng.batch_seconds
        # The next run's first time left is this one's mean batch time, in the same mode only.
        later = new_journal(inv, cluster)
        later.run_id = "99991231T235959-ffffff"  # newer than the first, made within the same second
        after = engine(inv, cluster, later, [])
        assert after.prior_batch_s == pytest.approx(sum(eng.batch_seconds) / 2, abs=0.05)
        from orchestrator.restart.plan import Mode
        zoned = new_journal(inv, cluster, Mode.ZONE)
        zoned.run_id = later.run_id
        assert engine(inv, cluster, zoned, []).prior_batch_s is None


def test_a_run_ends_saying_what_it_did_rebooted_or_upgraded() -> None:
    from orchestrator.restart.plan import Upgrade

    with state_dir():
        inv, cluster = fake(["a"])
        events: list[Event] = []
        engine(inv, cluster, new_journal(inv, cluster, options=RunOptions(reboot=True)), events).run()
        assert events[-1].message == "run succeeded: all 1 batch rebooted"
        journal = new_journal(inv, cluster)
        journal.spec = replace(journal.spec, plan=replace(journal.plan, upgrade=Upgrade(to="9.9.9")))
        events.clear()
        engine(inv, cluster, journal, events).run()
        assert events[-1].message == "run succeeded: all 1 batch upgraded to 9.9.9"


def test_a_resumed_batch_says_what_it_had_done() -> None:
    from orchestrator.restart.journal import BatchState

    for done, said in (([], "nothing"), (["before_batch", "hold_setting"], "before_batch, hold_setting")):
        with state_dir():
            inv, cluster = fake(["a"])
            journal = new_journal(inv, cluster)
            journal.batches[0].state = BatchState.RUNNING
            journal.batches[0].steps_done = list(done)
            events: list[Event] = []
            engine(inv, cluster, journal, events).run()
            assert next((e.kind, e.message, e.batch) for e in events if e.kind == "batch") == (
                "batch", f"batch 1: resuming a after {said}", 1)


def test_a_deferred_run_says_what_it_left_to_the_scheduler_and_what_it_saw() -> None:
    with state_dir():
        inv, cluster = fake(["a", "b"])
        scripted_gate(cluster, [False])
        events: list[Event] = []
        eng = engine(inv, cluster, new_journal(inv, cluster), events)
        eng.ctx.deferral = Deferral()
        with pytest.raises(Deferred) as gated:
            eng.run()
        assert (events[-1].kind, events[-1].message, events[-1].batch, events[-1].data) == (
            "run", "deferred: the cluster to be safe for batch 1 (a) is left to the scheduler's trigger (seen: node(s) "
                   "not in the cluster: somebody)", 1, {"result": "deferred", "waiting": gated.value.wait.to_json()})
    with state_dir():
        inv, cluster = fake(["a", "b"])
        events = []
        eng = engine(inv, cluster, new_journal(inv, cluster), events)
        eng.ctx.deferral = Deferral()
        request_pause(cluster, "night")
        with pytest.raises(Deferred):
            eng.run()
        assert events[-1].message.endswith("is left to the scheduler's trigger (seen: nothing yet)")


def test_a_pause_between_batches_is_said_and_slept_a_second_at_most_at_a_time() -> None:
    with state_dir():
        inv, cluster = fake(["a", "b"])
        events: list[Event] = []
        eng = engine(inv, cluster, new_journal(inv, cluster, options=RunOptions(pause_between_s=2.5)), events)
        slept: list[tuple[int, float]] = []
        real_sleep = eng.ctx.clock.sleep

        def sleep(seconds: float) -> None:
            slept.append((len(events), seconds))
            real_sleep(seconds)

        eng.ctx.clock.sleep = sleep  # type: ignore[method-assign]
        eng.run()
        said = next(i for i, e in enumerate(events) if e.kind == "wait")
        assert (events[said].message, events[said].batch) == ("pausing 2 s between batches (--pause-between)", None)
        pause = [s for at, s in slept if at == said + 1]
        assert pause == [1.0, 1.0, 0.5], "a second at a time (Ctrl-C is seen), never past the pause"


def test_an_invocation_stops_after_the_batches_it_was_asked_to_do() -> None:
    from orchestrator.errors import StoppedAfter
    from orchestrator.restart.engine import Engine

    with state_dir():
        inv, cluster = fake(["a", "b"])
        eng = engine(inv, cluster, new_journal(inv, cluster), [])
        with pytest.raises(StoppedAfter, match="stopped after 1 batch as asked"):
            Engine(eng.ctx, eng.product, eng.procedure, stop_after=1).run()
        assert cluster.nodes["a"].starts == 1 and cluster.nodes["b"].starts == 0


def test_only_the_per_node_steps_from_the_stop_to_the_rejoin_are_one_stage_of_a_batch_of_several_nodes() -> None:
    from orchestrator.config.playbook import Playbook
    from orchestrator.restart.journal import BatchRecord
    from orchestrator.restart.procedure import resolve

    def command(name: str) -> dict[str, Any]:
        return {"command": {"name": name, "run": "true", "where": "local"}}

    playbook = Playbook.model_validate({
        "name": "staged", "product": "fake", "before_run": ["raise_limit"],
        "batch": ["hold_setting", command("pre-1"), command("pre-2"), "stop_service", "tune_host", "start_service",
                  "wait_for_join", command("post-1"), command("post-2"), "release_setting"],
        "hooks": {point: [{"name": f"note-{point}", "run": "true"}]
                  for point in ("before_batch", "before_stop", "after_start", "after_batch")}})
    with state_dir():
        inv, cluster = fake(["a", "b"])
        eng = engine(inv, cluster, new_journal(inv, cluster), [])
        eng.procedure = resolve(playbook, PRODUCT)
        two = BatchRecord(1, "z1", ["a", "b"])
        assert [[name for name, _ in stage] for stage in eng.stages(two)] == [
            ["hooks:before_batch"], ["hold_setting"], ["pre-1"], ["pre-2"], ["last_look"], ["hooks:before_stop"],
            ["stop_service", "tune_host", "start_service", "wait_for_join"], ["hooks:after_start"], ["post-1"],
            ["post-2"], ["release_setting"], ["hooks:after_batch"]]
        one = BatchRecord(1, "a", ["a"])
        assert all(len(stage) == 1 for stage in eng.stages(one)), "a batch of one node: a step a stage"
        # A point the playbook gives no hook is no step (each step done is a save of the journal).
        eng.procedure = resolve(playbook.model_copy(update={"hooks": type(playbook.hooks)()}), PRODUCT)
        assert [[name for name, _ in stage] for stage in eng.stages(two)] == [
            ["hold_setting"], ["pre-1"], ["pre-2"], ["last_look"], ["stop_service", "tune_host", "start_service",
                                                                    "wait_for_join"], ["post-1"], ["post-2"],
            ["release_setting"]]
        # A command between the stop and the start is each node's own too: a node is through it at its pace.
        eng.procedure = resolve(Playbook.model_validate({
            "name": "swap", "product": "fake", "before_run": ["raise_limit"],
            "batch": ["hold_setting", "stop_service", command("swap-jdk"), "start_service", "wait_for_join",
                      "release_setting"]}), PRODUCT)
        assert ["stop_service", "swap-jdk", "start_service", "wait_for_join"] in [
            [name for name, _ in stage] for stage in eng.stages(two)]


def test_the_last_look_asks_about_the_batchs_nodes_and_a_node_already_stopping_is_brought_back_not_refused() -> None:
    from orchestrator.errors import UnsafeToProceed
    from orchestrator.restart.journal import BatchState
    from orchestrator.restart.phases import Phase

    class Refusing(ScriptedGate):
        def __init__(self) -> None:
            super().__init__([])
            self.stop_asked: list[tuple[Plan, tuple[str, ...]]] = []

        def stop_check(self, snapshot: FakeSnapshot, plan: Plan, nodes: Sequence[str],
                       options: RunOptions) -> list[str]:
            self.stop_asked.append((plan, tuple(nodes)))
            return ["x has its only copy here.", "y too."]

    with state_dir():
        inv, cluster = fake(["a", "b"])
        journal = new_journal(inv, cluster)
        eng = engine(inv, cluster, journal, [])
        eng.product = refusing = Refusing()  # type: ignore[assignment]
        asked = snapshots_asked(cluster)
        with pytest.raises(UnsafeToProceed) as refused:
            eng.run()
        assert str(refused.value).startswith(
            "not stopping batch 1 (a): x has its only copy here. y too. Nothing was stopped and the batch's own "
            "settings are restored. Fix it (add a replica), or accept it with `orchestrate resume "
            "--allow-unavailable PATTERN`.")
        assert refusing.stop_asked == [(journal.plan, ("a",))] and asked[-1] == (journal.plan, ("a",))
        assert cluster.nodes["a"].starts == 0
        # A run that died with the node stopping: resume brings it back whatever the last look would say.
        journal.batches[0].state = BatchState.RUNNING
        journal.batches[0].steps_done = ["hooks:before_batch", "hold_setting"]
        journal.nodes["a"].phase = Phase.STOPPING
        eng = engine(inv, cluster, journal, [])
        eng.product = Refusing()  # type: ignore[assignment]
        with pytest.raises(UnsafeToProceed, match="not stopping batch 2"):
            eng.run()
        assert cluster.nodes["a"].starts == 1, "a was brought back"


def test_a_prelude_left_undone_runs_on_resume_after_one_that_was_done() -> None:
    with state_dir():
        inv, cluster = fake(["a"])
        journal = new_journal(inv, cluster)
        journal.spec = replace(journal.spec, prelude={"merge": {}, "note": {}})
        journal.prelude_done("merge", {"done": "merge"})
        ran: list[str] = []
        eng = engine(inv, cluster, journal, [])
        eng.preludes = {"merge": lambda ctx: ran.append("merge"), "note": lambda ctx: ran.append("note")}
        eng.run()
        assert ran == ["note"]


def test_a_stop_says_the_settings_are_back_and_resume_goes_on_or_that_putting_them_back_failed() -> None:
    from orchestrator.errors import ClusterError
    from tests.unit.test_engine import after_hold

    def stopped_in_batch_1(cluster: FakeCluster) -> str:
        inv = inventory(["a", "b"])
        eng = engine(inv, cluster, new_journal(inv, cluster), [])
        after_hold(eng, lambda ctx, batch: ctx.abort.request("SIGINT"))
        with pytest.raises(Aborted) as stopped:
            eng.run()
        return str(stopped.value)

    with state_dir():
        said = stopped_in_batch_1(FakeCluster.of(["a", "b"], settings=dict(ORIGINAL)))
        assert said.endswith("; temporary settings restored; `orchestrate resume` continues the remaining batches")
    with state_dir():
        cluster = FakeCluster.of(["a", "b"], settings=dict(ORIGINAL))
        real = cluster.put_settings

        def no_restore(scope: str, values: dict[str, Any]) -> None:
            if cluster.nodes["a"].up and any(v in ("normal", None) for v in values.values()):
                raise ClusterError("403 read-only")
            real(scope, values)

        cluster.put_settings = no_restore  # type: ignore[method-assign]
        said = stopped_in_batch_1(cluster)
        assert "; restoring settings FAILED (" in said and "403 read-only" in said
        assert said.endswith("): `orchestrate status` shows what is pending; `orchestrate resume` restores it"), said


def test_ctrl_c_at_the_end_of_a_batch_or_in_the_pause_after_it_stops_the_run_cleanly() -> None:
    for options, when in ((RunOptions(), "batch 1 done"), (RunOptions(pause_between_s=30), "pausing")):
        with state_dir():
            inv, cluster = fake(["a", "b"])
            events: list[Event] = []
            eng = engine(inv, cluster, new_journal(inv, cluster, options=options), events)

            def ctrl_c_on(event: Event, eng: Any = eng, when: str = when, events: list[Event] = events) -> None:
                events.append(event)
                if event.message.startswith(when):
                    eng.ctx.abort.request("SIGINT")

            eng.ctx.emit = ctrl_c_on
            with pytest.raises(Aborted, match="temporary settings restored"):
                eng.run()
            assert cluster.nodes["a"].starts == 1 and cluster.nodes["b"].starts == 0
            assert cluster.settings == ORIGINAL


def test_hosts_are_read_ahead_only_for_a_playbook_that_tunes_them() -> None:
    from orchestrator.config.playbook import Playbook
    from orchestrator.restart.procedure import resolve

    class Tuner:
        def __init__(self) -> None:
            self.read_ahead: list[str] = []

        def look_ahead(self, nodes: Sequence[Any]) -> None:
            self.read_ahead += [n.name for n in nodes]

    no_tuning = Playbook.model_validate({"name": "plain", "product": "fake", "before_run": ["raise_limit"],
                                         "batch": ["hold_setting", "stop_service", "start_service", "wait_for_join",
                                                   "release_setting"]})
    with state_dir():
        inv, cluster = fake(["a"])
        eng = engine(inv, cluster, new_journal(inv, cluster), [])
        eng.procedure = resolve(no_tuning, PRODUCT)
        eng.ctx.tuner = tuner = Tuner()  # type: ignore[assignment]
        eng.run()
        assert tuner.read_ahead == []


def test_a_run_back_from_its_watcher_runs_its_before_run_hooks_no_second_time(tmp_path: Any) -> None:
    from orchestrator.config.playbook import Playbook
    from orchestrator.restart.journal import RunState
    from orchestrator.restart.procedure import resolve
    from tests.unit.test_engine import PLAYBOOK

    log = tmp_path / "hooks.log"
    hooked = Playbook.model_validate({**PLAYBOOK.model_dump(mode="json"), "hooks": {
        "before_run": [{"name": "silence", "run": f"echo silenced >> {log}", "where": "local"}]}})
    with state_dir():
        inv, cluster = fake(["a", "b"])
        journal = new_journal(inv, cluster)
        deferral = Deferral()
        for _ in range(10):  # each rejoin is left to the watcher, then handed back
            eng = engine(inv, cluster, journal, [])
            eng.procedure = resolve(hooked, PRODUCT)
            eng.ctx.deferral = deferral
            try:
                eng.run()
                break
            except Deferred as deferred:
                assert journal.state is RunState.DEFERRED
                deferral = Deferral(back_for=deferred.wait)
        assert_finished_cleanly(cluster, journal)
        assert deferral.back_for is not None, "the run was deferred at least once"
        assert log.read_text().splitlines() == ["silenced"], "once, when the run began"


def test_a_zone_batch_names_each_of_its_nodes_when_it_starts() -> None:
    from orchestrator.restart.plan import Mode

    with state_dir():
        inv, cluster = fake(["a", "b"], zones=["z1", "z1"])
        events: list[Event] = []
        engine(inv, cluster, new_journal(inv, cluster, Mode.ZONE), events).run()
        first = next(e.message for e in events if e.kind == "batch")
        assert first.startswith("batch 1/1: ") and first.endswith(" (a, b)"), first
