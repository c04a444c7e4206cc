"""The Riak steps of a run: raise the handoff limit, wait for the KV service, wait for handoffs.

A restarted node comes back with the transfer limit of its riak.conf, so `wait_for_service`
sets the run's limit on it again before handoffs are awaited.
"""

from __future__ import annotations

from orchestrator.errors import UnsafeToProceed
from orchestrator.restart.context import RunContext
from orchestrator.restart.events import Event
from orchestrator.restart.journal import BatchRecord, UndoState
from orchestrator.restart.phases import Phase
from orchestrator.restart.steps import StepFn, for_each_node, set_temporarily
from orchestrator.retry import Seen, wait_until
from orchestrator.riak.adapter import RiakAdapter
from orchestrator.riak.handoffs import HandoffWatch
from orchestrator.riak.plan import TRANSFER_LIMIT

SERVICE_PROBE_S = 10  # one `wait-for-service` call blocks at most this long; the step retries up to join_s


def raise_handoff_limit(ctx: RunContext[RiakAdapter]) -> None:
    changes = [c for c in ctx.journal.plan.settings if c.when == "for the run"]
    if not changes:
        return
    live = ctx.cluster.limits()
    for change in changes:
        set_temporarily(ctx, change.key, change.scope, live.get(change.scope), change.during, None)


def note_handoffs_due(ctx: RunContext[RiakAdapter], batch: BatchRecord) -> None:
    """While the batch's node is down, every partition waiting to be handed off is waiting for it (one
    node per batch, and the gate saw no transfer before the batch): record that count. Read later,
    after the node is back, the handoffs may already be over: a quick handoff is never seen active."""
    transfers = ctx.cluster.transfers(avoid=set(batch.nodes))
    due = sum(transfers.waiting.values()) + sum(1 for t in transfers.active if t.target in batch.nodes)
    for name in batch.nodes:
        ctx.journal.recovered(name, {"handoffs_due": due})
        ctx.emit(Event("step", f"{name}: {due} partition(s) wait to be handed back to it", node=name,
                       batch=batch.number))


def wait_for_service(ctx: RunContext[RiakAdapter], batch: BatchRecord) -> None:
    def one(name: str) -> None:
        node, admin, cfg = ctx.node(name), ctx.cluster, ctx.cluster.cfg
        service, riak_name = cfg.service, cfg.riak_name(node)
        started = ctx.clock.monotonic()

        def up(seen: Seen[bool]) -> bool | None:
            ok, said = admin.wait_for_service(node, SERVICE_PROBE_S)
            seen.text = said
            return True if ok else None

        wait_until(up, what=f"{service} to be up on {riak_name}", timeout_s=ctx.inv.timeouts.join_s,
                   interval_s=ctx.inv.timeouts.poll_interval_s, clock=ctx.clock,
                   hint=f"Check `riak-admin services` and the Riak logs on {node.host}", resume="waits again")
        ctx.timed(name, "service", ctx.clock.monotonic() - started)
        if admin.admin_form(node) != cfg.admin_command:
            ctx.emit(Event("step", f"{name}: admin commands run as `{admin.admin_form(node)}` there (a Riak 3.x "
                                   f"package: `{cfg.admin_command}` is not usable)", node=name,
                           batch=batch.number))
        for record in ctx.journal.pending_undo():
            if record.key == TRANSFER_LIMIT and record.scope == riak_name and record.state is UndoState.APPLIED:
                admin.put_setting(record.scope, record.key, record.applied)
                ctx.emit(Event("step", f"{name}: transfer limit set to {record.applied} again after the restart",
                               node=name, batch=batch.number))
        ctx.emit(Event("step", f"{name}: {service} is up", node=name, batch=batch.number))

    for_each_node(ctx, batch, one)


def wait_for_handoffs(ctx: RunContext[RiakAdapter], batch: BatchRecord) -> None:
    for name in batch.nodes:
        if ctx.record(name).phase == Phase.JOINED:
            ctx.set_phase(name, Phase.RECOVERING, f"{name}: waiting for handoffs to finish")
    watch = HandoffWatch(ctx.cluster.cfg.handoff_stall_s)
    started = ctx.clock.monotonic()

    def drained(seen: Seen[bool]) -> bool | None:
        transfers = ctx.cluster.transfers()
        stalled = watch.observe(transfers, ctx.clock.monotonic())
        if stalled:
            raise UnsafeToProceed(
                f"handoff stalled after restarting {', '.join(batch.nodes)}: {stalled}. The run stops here with "
                "every node up", resume="waits for the handoffs again once they move")
        seen.text = transfers.describe()
        return True if transfers.none else None

    wait_until(drained, what="handoffs to finish", timeout_s=ctx.inv.timeouts.recovery_s,
               interval_s=ctx.inv.timeouts.poll_interval_s, clock=ctx.clock, should_stop=lambda: ctx.abort.requested,
               hint="Transfers are still running (`riak-admin transfers`)", resume="waits again")
    elapsed = ctx.clock.monotonic() - started
    for name in batch.nodes:
        seen, objects = watch.handed_to(ctx.cluster.cfg.riak_name(ctx.node(name)))
        partitions = max(seen, ctx.record(name).recovery.get("handoffs_due", 0))
        with ctx.phase_change(name, Phase.DONE, f"{name}: done; handoffs finished in {elapsed:.1f} s "
                                                f"({partitions} partition(s) handed back)"):
            ctx.timed(name, "recovery", elapsed)
            ctx.journal.recovered(name, {"handoff_partitions": partitions, "handoff_objects": objects})


RUN_STEPS = {"raise_handoff_limit": raise_handoff_limit}
STEPS: dict[str, StepFn[RiakAdapter]] = {
    "note_handoffs_due": note_handoffs_due,
    "wait_for_service": wait_for_service,
    "wait_for_handoffs": wait_for_handoffs,
}
