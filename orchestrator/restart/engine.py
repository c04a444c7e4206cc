"""The restart engine: runs the journal's batches through the playbook's steps, one batch at a time.

Before each batch it reads a fresh snapshot and refuses to go on while the cluster is unsafe.
After each step it writes the journal, so a run killed at any point is finished by `resume`
without restarting a node twice. On Ctrl-C it stops at the next safe point (never with a node
left down) and restores every temporary setting.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from orchestrator.errors import Aborted, ConfigError, OrchestratorError, UnsafeToProceed
from orchestrator.restart import steps
from orchestrator.restart.context import RunContext
from orchestrator.restart.events import Event
from orchestrator.restart.journal import BatchRecord, RunState, measured_batch_seconds
from orchestrator.retry import Seen, wait_until

# Steps between these two leave a node down: an abort waits until the node is back.
NODE_DOWN_FROM, NODE_BACK_AT = "stop_service", "wait_for_join"


RunStepFn = Callable[[RunContext], None]


def product_steps(product: str) -> tuple[dict[str, steps.StepFn], dict[str, RunStepFn]]:
    """The batch steps and run steps a product's playbooks may name (the generic ones included)."""
    if product == "riak":
        from orchestrator.riak import steps as riak_steps

        return {**steps.GENERIC, **riak_steps.STEPS}, dict(riak_steps.RUN_STEPS)
    from orchestrator.es import steps as es_steps

    return {**steps.GENERIC, **es_steps.STEPS}, dict(es_steps.RUN_STEPS)


class Engine:
    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx
        self.steps: dict[str, steps.StepFn] = {}
        known, self.run_steps = product_steps(ctx.playbook.product)
        for step in ctx.playbook.steps():
            if step.builtin:
                if step.builtin not in known:
                    raise ConfigError(f"playbook {ctx.playbook.name}", [
                        f"step {step.builtin} is not a {ctx.playbook.product} step; known: {', '.join(known)}"])
                self.steps[step.name] = known[step.builtin]
            elif step.command:
                self.steps[step.name] = steps.command_step(step.command)
        self.order = [s.name for s in ctx.playbook.steps()]
        self.batch_seconds: list[float] = []
        self.prior_batch_s = measured_batch_seconds(ctx.journal.cluster, ctx.journal.mode, ctx.journal.run_id)

    # --- the run ---------------------------------------------------------------------------------
    def run(self) -> None:
        ctx, journal = self.ctx, self.ctx.journal
        journal.state = RunState.RUNNING
        journal.save()
        try:
            self.run_prelude()
            if not journal.run_setup_done:
                for step in ctx.playbook.before_run:
                    if step not in self.run_steps:
                        raise ConfigError(f"playbook {ctx.playbook.name}", [
                            f"before_run: {step} is not a {ctx.playbook.product} step"])
                    self.run_steps[step](ctx)
                journal.run_setup_done = True
                journal.save()
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
        finally:
            journal.es_calls = ctx.cluster.calls
            journal.save()

    def run_prelude(self) -> None:
        """A force-merge before the restart (`forcemerge --then-restart`): merged indices are skipped on resume."""
        spec = self.ctx.journal.prelude.get("forcemerge")
        if not spec or spec.get("done"):
            return
        from orchestrator.forcemerge.run import plan_merges, run_merges

        decisions = plan_merges(self.ctx.es, spec["indices"], spec["max_segments"], spec["include_write_indices"])
        report = run_merges(self.ctx.es, decisions, spec["max_segments"], spec["concurrency"], self.ctx.emit,
                            should_stop=lambda: self.ctx.abort.requested)
        spec["report"] = report.to_json()
        if report.outcome == "failure":
            raise UnsafeToProceed("force-merge failed; the restart did not start. `orchestrate resume` tries again")
        if self.ctx.abort.requested:
            raise Aborted("stopped by the operator during the force-merge")
        spec["done"] = True
        self.ctx.journal.save()

    def finish(self, state: RunState, message: str) -> None:
        journal = self.ctx.journal
        journal.state = state
        journal.message = message
        journal.finished = time.time()
        journal.save()
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
            batch.state = "running"
            batch.started = time.time()
            ctx.journal.save()
            ctx.emit(Event("batch", f"batch {batch.number}/{len(ctx.journal.batches)}: {batch.label} "
                                    f"({', '.join(batch.nodes)})", batch=batch.number, eta_s=self.eta_s()))
        else:
            ctx.emit(Event("batch", f"batch {batch.number}: resuming {batch.label} after "
                                    f"{', '.join(batch.steps_done) or 'nothing'}", batch=batch.number))
        for name in self.order:
            if name in batch.steps_done:
                continue
            self.check_abort(batch)
            self.steps[name](ctx, batch)
            batch.steps_done.append(name)
            ctx.journal.save()
        batch.state = "done"
        batch.finished = time.time()
        ctx.journal.save()
        self.batch_seconds.append(batch.finished - (batch.started or batch.finished))
        ctx.emit(Event("batch", f"batch {batch.number} done in {batch.finished - (batch.started or 0):.1f} s",
                       batch=batch.number, eta_s=self.eta_s()))
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
            problems = ctx.cluster.batch_problems(ctx.journal.plan, batch.nodes, batch.label, ctx.inv.allow_yellow)
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
        estimates = {b["number"]: b["estimate_s"] for b in self.ctx.journal.plan["batches"]}
        return round(float(sum(estimates.get(b.number, 0) for b in remaining)), 1)
