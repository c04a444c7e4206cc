"""The steps of a batch that every product shares. Each looks before it acts, so a resumed run can
re-enter any step.

A step gets the run context and the batch; it records what it changes in the journal (undo
first) and reports through events. Per-node work of a zone batch runs in parallel.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from orchestrator.config.model import NodeEntry
from orchestrator.config.playbook import CommandStep
from orchestrator.errors import HostError, OrchestratorError
from orchestrator.hosts.environment import BASE_ENVIRONMENT
from orchestrator.hosts.service import render
from orchestrator.hosts.transport import LocalTransport
from orchestrator.restart.adapter import AdapterT, ClusterAdapter
from orchestrator.restart.context import RunContext
from orchestrator.restart.deferral import Deferred, deferrable_wait, defers, merged
from orchestrator.restart.events import Event, EventSink
from orchestrator.restart.journal import REBOOTED, BatchRecord, BatchState, Journal, UndoRecord, UndoState
from orchestrator.restart.phases import Phase, reached
from orchestrator.retry import Seen

# A batch step of a product whose adapter is AdapterT; bare `StepFn`: a step any product can run.
StepFn = Callable[[RunContext[AdapterT], BatchRecord], None]
PER_NODE: set[Callable[..., None]] = set()  # the steps marked by `per_node`
StepT = TypeVar("StepT", bound=Callable[..., None])


def per_node(step: StepT) -> StepT:
    """Marks a step whose work is each node's own (done through `for_each_node`, looking only at that
    node's records): between its stop and its rejoin, each node of a batch goes through a run of such
    steps at its own pace, so that one node's slow stop does not hold back the others' start."""
    PER_NODE.add(step)
    return step


def for_each_node(ctx: RunContext, batch: BatchRecord, fn: Callable[[str], None]) -> None:
    """Run ``fn`` for every node of the batch, in parallel; after all finish, raise the first error with
    what became of the others, so an operator of a zone batch sees the whole batch's state."""
    if len(batch.nodes) == 1:
        fn(batch.nodes[0])
        return
    with ThreadPoolExecutor(max_workers=len(batch.nodes)) as pool:
        futures = {name: pool.submit(fn, name) for name in batch.nodes}
    failed = {name: f.exception() for name, f in futures.items() if f.exception() is not None}
    if not failed:
        return
    deferred = [e.wait for e in failed.values() if isinstance(e, Deferred)]
    if len(deferred) == len(failed):  # the nodes that are not through wait: one wait for them all
        raise Deferred(merged(deferred))
    failed = {name: e for name, e in failed.items() if not isinstance(e, Deferred)}  # a real error first
    first = next(iter(failed.values()))
    others = [f"{name} {'failed too' if name in failed else 'ok'} (phase {ctx.record(name).phase})"
              for name in batch.nodes if name != next(iter(failed))]
    if isinstance(first, OrchestratorError) and type(first).__init__ is OrchestratorError.__init__:
        raise type(first)(f"{first}; the other nodes of batch {batch.number}: {', '.join(others)}") from first
    raise first  # type: ignore[misc]


# --- temporary settings ----------------------------------------------------------------------------
def set_temporarily(ctx: RunContext, key: str, scope: str, live: Any, value: Any, batch: int | None) -> None:
    """Write a temporary setting: the undo record (with the value from before the run) goes first.

    ``live`` is the value in force now; on a resumed run the journal's original wins over it.
    """
    set_all_temporarily(ctx, [(key, scope, live, value)], batch)


def set_all_temporarily(ctx: RunContext, changes: list[tuple[str, str, Any, Any]], batch: int | None) -> None:
    """``set_temporarily`` for several (key, scope, live, value) at once: every undo record is written
    first, then one request per scope."""
    known = ctx.journal.undo_by_key()
    kept: list[UndoRecord] = []  # pending from before (a resumed run's, or one the run moves again)
    new: list[tuple[str, str, Any, Any]] = []
    by_scope: dict[str, dict[str, Any]] = {}
    for key, scope, live, value in changes:
        first, pending = known.get((key, scope), (None, None))
        before = first.before if first is not None else live
        if live == value and pending is not None:
            continue  # already in force, and its undo is on record
        if pending is not None:
            kept.append(pending)
        else:
            new.append((key, scope, before, value))
        by_scope.setdefault(scope, {})[key] = value
    written = kept + ctx.journal.record_undos(new, batch) if new else kept
    for scope, values in by_scope.items():
        ctx.cluster.put_settings(scope, values)
    if written:
        ctx.journal.undo_states(written, UndoState.APPLIED)
    for record in said_once(written):
        value = by_scope[record.scope][record.key]  # what was written now (a kept record's may differ)
        ctx.emit(Event("undo", f"set {record.scope} {record.key}={value} "
                               f"(was {record.before if record.before is not None else 'unset'})", batch=batch,
                       data={"key": record.key, "scope": record.scope, "before": record.before, "value": value}))
    for (scope, setting), records in by_setting_of_many(written).items():
        value = by_scope[scope][records[0].key]
        ctx.emit(Event("undo", f"set {scope} {setting}={value} for the run on each of {len(records)}, each one's "
                               "own value journaled", batch=batch,
                       data={"key": setting, "scope": scope, "count": len(records), "value": value}))


def restore_settings(ctx: RunContext, keys: set[str] | None = None, batch: int | None = None) -> None:
    """Put back every temporary setting still pending (all, only ``keys``, or only those set for
    ``batch``), one request per scope."""
    put_back(ctx.journal, ctx.cluster, ctx.emit, keys, batch)


def put_back(journal: Journal, cluster: ClusterAdapter[Any], emit: EventSink, keys: set[str] | None = None,
             batch: int | None = None) -> None:
    """restore_settings without a run's context (`orchestrate abandon` has none)."""
    chosen = [r for r in journal.pending_undo()
              if (keys is None or r.key in keys) and (batch is None or r.batch == batch)]
    by_scope: dict[str, dict[str, Any]] = {}
    for record in chosen:  # oldest first: were a key recorded twice, its oldest "before" is the original
        by_scope.setdefault(record.scope, {})[record.key] = record.before
    for scope, values in by_scope.items():
        cluster.put_settings(scope, values)
    if chosen:
        journal.undo_states(chosen, UndoState.RESTORED)
    for record in said_once(list(reversed(chosen))):
        shown = record.before if record.before is not None else "unset"
        emit(Event("undo", f"restored {record.scope} {record.key}={shown}",
                   data={"key": record.key, "scope": record.scope, "value": record.before}))
    for (scope, setting), records in by_setting_of_many(chosen).items():
        emit(Event("undo", f"restored {scope} {setting} of {len(records)} to each one's own",
                   data={"key": setting, "scope": scope, "count": len(records)}))


# A run may change one setting of thousands of things at once (each index's delay, for a window): their records
# are said in one event per setting, not an event each. A few are said one by one, as any other.
SAID_ONE_BY_ONE = 8


def kind_of(record: UndoRecord) -> tuple[str, str]:
    """(scope, setting): a key "THING/SETTING" (an index's setting, say) names the setting after its thing."""
    return record.scope, record.key.rpartition("/")[2]


def said_once(records: list[UndoRecord]) -> list[UndoRecord]:
    """The records said one by one: those of a setting changed on no more than SAID_ONE_BY_ONE things."""
    many = set(by_setting_of_many(records))
    return [r for r in records if kind_of(r) not in many]


def by_setting_of_many(records: list[UndoRecord]) -> dict[tuple[str, str], list[UndoRecord]]:
    """The records of a setting changed on more than SAID_ONE_BY_ONE things, by (scope, setting)."""
    out: dict[tuple[str, str], list[UndoRecord]] = {}
    for r in records:
        out.setdefault(kind_of(r), []).append(r)
    return {kind: found for kind, found in out.items() if len(found) > SAID_ONE_BY_ONE}


# --- the node's process ----------------------------------------------------------------------------
JOIN_WAIT_S = 5.0  # the longest server-side wait of one look for a rejoin


def live_identity(ctx: RunContext, name: str, wait_s: float = 0) -> str | None:
    """The node's current process identity, or None when it is not serving; with ``wait_s``, waiting
    for it to join first where the product can (see ClusterAdapter.await_identity)."""
    if wait_s > 0:
        return ctx.cluster.await_identity(ctx.journal.plan, name, wait_s)
    return ctx.cluster.live_identity(ctx.journal.plan, name)


@per_node
def stop_service(ctx: RunContext, batch: BatchRecord) -> None:
    def stop(name: str) -> None:
        rec = ctx.record(name)
        node = ctx.node(name)
        if reached(rec.phase, Phase.STOPPED):
            return  # stopped before an interruption; the journal says so
        current = live_identity(ctx, name)
        if rec.process_before is None:
            ctx.journal.process_before(name, current)
        if rec.process_before is not None and current is not None and current != rec.process_before:
            ctx.emit(Event("step", f"{name}: already restarted (new process), not stopping again", node=name))
            ctx.set_phase(name, Phase.STOPPED)
            return
        ctx.set_phase(name, Phase.STOPPING, f"{name}: stopping the service")
        started = ctx.clock.monotonic()
        # `systemctl stop` of a stopped unit succeeds: one SSH round trip; your command may not.
        if (ctx.service.idempotent or ctx.service.is_active(node)) and not ctx.service.stop(node):
            ctx.emit(Event("warning", f"{name}: the service did not stop within its unit's TimeoutStopSec and was "
                                      "killed (SIGKILL): not a clean stop; its recovery may copy more", node=name))
        took = ctx.clock.monotonic() - started
        with ctx.phase_change(name, Phase.STOPPED, f"{name}: stopped in {took:.1f} s"):
            ctx.timed(name, "stop", took)

    for_each_node(ctx, batch, stop)


@per_node
def tune_host(ctx: RunContext, batch: BatchRecord) -> None:
    def tune(name: str) -> None:
        if reached(ctx.record(name).phase, Phase.TUNED):
            return
        if ctx.tuner is None:
            ctx.emit(Event("step", f"{name}: no tuning profile, host left as it is", node=name))
        else:
            started = ctx.clock.monotonic()
            # The look-ahead read this host before its node stopped, and nothing but that stop came since.
            tuned = ctx.tuner(ctx.node(name), read_ahead_ok=True)
            ctx.timed(name, "tune", ctx.clock.monotonic() - started)
            ctx.journal.host_changed(name, tuned.changes)  # what the host was and became, kept with the run
            knobs = [c.knob for c in tuned.changes]
            drift = tuned.drift
            said = f"fixed {', '.join(knobs)}" if knobs else \
                f"drift left as it is (tuning.mode: check): {'; '.join(drift)}" if drift else \
                "already tuned, nothing changed"
            if tuned.read_ahead_s is not None:
                said += f" (as read {tuned.read_ahead_s:.0f} s before, while its node still ran)"
            ctx.emit(Event("step", f"{name}: host tuning: {said}", node=name,
                           data={"changes": [c.to_json() for c in tuned.changes]}))
        ctx.set_phase(name, Phase.TUNED)

    for_each_node(ctx, batch, tune)
    following = next((b for b in ctx.journal.batches
                      if b.number > batch.number and b.state == BatchState.PENDING), None)
    if following is not None:
        read_hosts_ahead(ctx, following)  # while this batch boots and recovers


def read_hosts_ahead(ctx: RunContext, batch: BatchRecord) -> None:
    """Have the tuner read the batch's hosts in the background, so that their turn costs no round trip
    while their nodes are down when nothing drifted."""
    if ctx.tuner is not None:
        ctx.tuner.look_ahead([ctx.node(name) for name in batch.nodes])


@per_node
def start_service(ctx: RunContext, batch: BatchRecord) -> None:
    def start(name: str) -> None:
        node = ctx.node(name)
        if reached(ctx.record(name).phase, Phase.JOINED):
            return
        # After a reboot the host's boot may have started it (said, not started again); otherwise
        # `systemctl start` of a running unit succeeds, and the check would cost an SSH round trip.
        rebooted = REBOOTED in ctx.record(name).started_at
        running = ctx.service.is_active(node) if rebooted or not ctx.service.idempotent else False
        said = "the service is already running (started by the host's boot)" if running else "starting the service"
        ctx.set_phase(name, Phase.STARTING, f"{name}: {said}")
        ctx.journal.mark(name, "start_issued")  # after the phase: the report's start bar ends here
        started = ctx.clock.monotonic()
        if not running:
            ctx.service.start(node)
        ctx.timed(name, "start", ctx.clock.monotonic() - started)

    for_each_node(ctx, batch, start)


@per_node
def wait_for_join(ctx: RunContext, batch: BatchRecord) -> None:
    def join(name: str) -> None:
        rec = ctx.record(name)
        if reached(rec.phase, Phase.JOINED):
            return
        started = ctx.clock.monotonic()
        started_again = False
        said = ""

        def joined(seen: Seen[str]) -> str | None:
            identity = look(seen)
            nonlocal said
            if identity is None and seen.text != said:  # the live view's "waiting on", once per change
                said = seen.text
                ctx.emit(Event("wait", f"{name}: waiting to rejoin: {said}", node=name))
            return identity

        def look(seen: Seen[str]) -> str | None:
            nonlocal started_again
            left = ctx.inv.timeouts.join_s - (ctx.clock.monotonic() - started)
            # A deferring run looks without a server-side wait (the wait is its trigger's to do), unless
            # this is the wait its trigger handed back; so does a window's, while a node of another batch is
            # away too: the cluster's count of nodes then says nothing of this one (a wait for it would hold to
            # its end), and one look a poll is what tells.
            server_wait_s = 0.0 if defers(ctx.deferral, "join", rec.batch) or away_besides(ctx, rec.batch) \
                else JOIN_WAIT_S
            identity = live_identity(ctx, name, wait_s=min(server_wait_s, max(left, 0)))
            if identity is None:
                seen.text = f"{name} is not in the cluster yet"
                if not ctx.service.is_active(ctx.node(name)):
                    failed = ctx.service.failure(ctx.node(name))
                    if failed is not None and START_FAILED in rec.started_at and not started_again:
                        # A resumed run after the operator's fix: the start step is done, so start it here.
                        ctx.emit(Event("step", f"{name}: its service had failed: starting it again", node=name))
                        ctx.service.start(ctx.node(name))
                        started_again = True
                        return None
                    if failed is not None:  # it will not join: say why now, not at the join timeout
                        ctx.journal.mark(name, START_FAILED)
                        raise HostError(f"{name}: the service stopped before the node joined: {failed}")
                    seen.text += " and its service is not running"
                return None
            if identity == rec.process_before:
                seen.text = f"{name} is still the old process ({identity})"
                return None
            return identity

        identity = deferrable_wait(ctx.deferral, "join", rec.batch, (name,), joined,
                                   what=f"{name} to rejoin the cluster as a new process",
                                   timeout_s=ctx.inv.timeouts.join_s, interval_s=ctx.inv.timeouts.poll_interval_s,
                                   clock=ctx.clock,
                                   hint=f"Check the service and its log on {ctx.node(name).host}",
                                   resume="continues once the node is back (temporary settings stay meanwhile)")
        # Join time counts from the moment the start command returned (wall clock: survives a resume).
        issued = rec.started_at.get("start_issued")
        join_s = time.time() - issued - rec.phases.get("start", 0) if issued else ctx.clock.monotonic() - started
        with ctx.phase_change(name, Phase.JOINED, f"{name}: rejoined as a new process"):
            ctx.journal.restarted(name, identity)
            ctx.timed(name, "join", max(join_s, 0))

    for_each_node(ctx, batch, join)


START_FAILED = "start_failed"  # the node's unit failed after its start: a resume starts it again


def away_besides(ctx: RunContext, batch: int) -> bool:
    """Whether a node of another batch than ``batch`` is down now (a window's: stopping, or not yet rejoined)."""
    return any(r.batch != batch and reached(r.phase, Phase.STOPPING) and not reached(r.phase, Phase.JOINED)
               for r in ctx.journal.nodes.values())



def local_environment(step: CommandStep, node: NodeEntry) -> dict[str, str]:
    """What a `where: local` step sees: a small base, the variables it declares, and the node."""
    names = (*BASE_ENVIRONMENT, *step.env)
    return {**{k: os.environ[k] for k in names if k in os.environ},
            "ORCHESTRATOR_NODE": node.name, "ORCHESTRATOR_HOST": node.host}


def command_step(step: CommandStep) -> StepFn:
    def run(ctx: RunContext, batch: BatchRecord) -> None:
        def one(name: str) -> None:
            node = ctx.node(name)
            transport = ctx.transport if step.where == "host" else LocalTransport(
                env=local_environment(step, node))
            result = transport.run(node, render(step.run, node), step.timeout_s)
            if not result.ok:
                text = (result.stderr or result.stdout).strip()[-300:]
                if step.ignore_failure:
                    ctx.emit(Event("warning", f"{name}: step {step.name} failed (exit {result.rc}), ignored: {text}",
                                   node=name))
                    return
                raise HostError(f"{name}: step {step.name} failed (exit {result.rc}): {text}")
            ctx.emit(Event("step", f"{name}: step {step.name} done", node=name))

        for_each_node(ctx, batch, one)

    return per_node(run)


# The steps every product shares; each product adds its own (shards/steps.py, opensearch/routing.py, riak/steps.py).
GENERIC: dict[str, StepFn] = {
    "stop_service": stop_service,
    "tune_host": tune_host,
    "start_service": start_service,
    "wait_for_join": wait_for_join,
}
