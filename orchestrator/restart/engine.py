"""The restart engine: runs the journal's batches through the procedure's steps, one batch at a time.

Before each batch it asks the product's pure gate, over a fresh snapshot, whether the cluster is
safe, and waits while it is not. Every transition is written to the journal, so a run killed at
any point is finished by `resume` without restarting a node twice. On a stop request (Ctrl-C,
SIGTERM, a caller's cancel) it stops at the next safe point (never with a node left down) and
restores every temporary setting. It knows no product: everything particular is in the
`Product` it is given.
"""

from __future__ import annotations

from collections.abc import Mapping

from orchestrator.errors import Aborted, OrchestratorError, UnsafeToProceed
from orchestrator.restart import steps
from orchestrator.restart.context import RunContext
from orchestrator.restart.events import Event
from orchestrator.restart.journal import BatchRecord, RunState, measured_batch_seconds
from orchestrator.restart.procedure import Procedure
from orchestrator.restart.product import Product, RunStepFn
from orchestrator.retry import Seen, wait_until

# Steps between these two leave a node down: an abort waits until the node is back.
NODE_DOWN_FROM, NODE_BACK_AT = "stop_service", "wait_for_join"


class Engine:
    def __init__(self, ctx: RunContext, product: Product, procedure: Procedure,
                 preludes: Mapping[str, RunStepFn] | None = None) -> None:
        self.ctx = ctx
        self.product = product
        self.procedure = procedure
        self.preludes = dict(preludes or {})  # work a run may carry before batch 1, by name (force-merge)
        self.batch_seconds: list[float] = []
        self.prior_batch_s = measured_batch_seconds(ctx.journal.cluster, ctx.journal.mode, ctx.journal.run_id)

    # --- the run ---------------------------------------------------------------------------------
    def run(self) -> None:
        ctx, journal = self.ctx, self.ctx.journal
        journal.set_state(RunState.RUNNING)
        try:
            self.run_preludes()
            if not journal.run_setup_done:
                for _name, run_step in self.procedure.before_run:
                    run_step(ctx)
                journal.setup_done()
            for batch in journal.batches:
                if batch.state != "done":
                    self.run_batch(batch)
            steps.restore_settings(ctx)
            self.finish(RunState.SUCCEEDED, f"all {len(journal.batches)} batches restarted")
        except Aborted as exc:
            raise self.stop_safely(exc) from None
        except OrchestratorError as exc:
            # Temporary settings stay in force (allocation restricted): with a node in trouble, restoring
            # them would start copying its shards elsewhere. The journal keeps them for `resume`.
            self.finish(RunState.FAILED, str(exc))
            raise
        except BaseException as exc:
            # Not ours (a bug, or the interpreter stopping): the journal must not say "running" forever.
            self.finish(RunState.FAILED, f"internal error: {type(exc).__name__}: {exc}")
            raise
        finally:
            journal.calls(ctx.cluster.calls)

    def run_preludes(self) -> None:
        """Work the run carries before batch 1 (a force-merge): done once, skipped on resume."""
        for name in self.ctx.journal.spec.prelude:
            if name in self.ctx.journal.preludes_done:
                continue
            if name not in self.preludes:
                raise UnsafeToProceed(f"this run carries a {name} before its restart, which cannot run here")
            self.preludes[name](self.ctx)

    def finish(self, state: RunState, message: str) -> None:
        self.ctx.journal.set_state(state, message)
        self.ctx.emit(Event("run", f"run {state.value}: {message}", data={"result": state.value}))

    def stop_safely(self, exc: Aborted) -> Aborted:
        """After an abort: put every temporary setting back, so nothing is left half-set."""
        try:
            steps.restore_settings(self.ctx)
        except OrchestratorError as restore_error:
            message = (f"{exc}; restoring settings FAILED ({restore_error}): `orchestrate status` shows what is "
                       "pending, `orchestrate resume` restores it")
        else:
            message = f"{exc}; temporary settings restored. `orchestrate resume` continues the remaining batches"
        self.finish(RunState.ABORTED, message)
        return Aborted(message)

    # --- a batch ---------------------------------------------------------------------------------
    def run_batch(self, batch: BatchRecord) -> None:
        ctx = self.ctx
        if batch.state == "pending":
            self.wait_until_safe(batch)
            ctx.journal.begin_batch(batch)
            ctx.emit(Event("batch", f"batch {batch.number}/{len(ctx.journal.batches)}: {batch.label} "
                                    f"({', '.join(batch.nodes)})", batch=batch.number, eta_s=self.eta_s()))
        else:
            ctx.emit(Event("batch", f"batch {batch.number}: resuming {batch.label} after "
                                    f"{', '.join(batch.steps_done) or 'nothing'}", batch=batch.number))
        for name, step in self.procedure.batch:
            if name in batch.steps_done:
                continue
            self.check_abort(batch)
            step(ctx, batch)
            ctx.journal.step_done(batch, name)
        ctx.journal.end_batch(batch)
        took = (batch.finished or 0) - (batch.started or batch.finished or 0)
        self.batch_seconds.append(took)
        ctx.emit(Event("batch", f"batch {batch.number} done in {took:.1f} s", batch=batch.number, eta_s=self.eta_s()))
        self.check_abort(batch)

    def check_abort(self, batch: BatchRecord) -> None:
        if not self.ctx.abort.requested:
            return
        node_down = NODE_DOWN_FROM in batch.steps_done and NODE_BACK_AT not in batch.steps_done
        if node_down:
            self.ctx.emit(Event("warning", "stop requested: bringing the batch's nodes back first", batch=batch.number))
            return
        raise Aborted(f"stopped by the operator ({self.ctx.abort.reason}) at a safe point")

    def wait_until_safe(self, batch: BatchRecord) -> None:
        """Never start a batch while the cluster is unsafe: wait (up to the recovery timeout), then say why."""
        ctx = self.ctx

        def safe(seen: Seen[bool]) -> bool | None:
            snapshot = ctx.cluster.gate_snapshot(batch.nodes)
            problems = self.product.gate(snapshot, ctx.journal.plan, batch.nodes, ctx.options)
            seen.text = " ".join(problems)
            return True if not problems else None

        try:
            wait_until(safe, what=f"the cluster to be safe for batch {batch.number} ({batch.label})",
                       timeout_s=ctx.inv.timeouts.recovery_s, interval_s=max(ctx.inv.timeouts.poll_interval_s, 1),
                       clock=ctx.clock, should_stop=lambda: ctx.abort.requested)
        except OrchestratorError as exc:
            if isinstance(exc, Aborted):
                raise
            raise UnsafeToProceed(f"not going on with batch {batch.number} ({batch.label}): {exc}") from exc

    def eta_s(self) -> float:
        """Remaining time: measured batch times once there are some; before, those of the cluster's
        previous run in the same mode; without one, the plan's estimate."""
        remaining = [b for b in self.ctx.journal.batches if b.state != "done"]
        if self.batch_seconds:
            return round(len(remaining) * sum(self.batch_seconds) / len(self.batch_seconds), 1)
        if self.prior_batch_s is not None:
            return round(len(remaining) * self.prior_batch_s, 1)
        estimates = {b.number: b.estimate_s for b in self.ctx.journal.plan.batches}
        return round(float(sum(estimates.get(b.number, 0) for b in remaining)), 1)

