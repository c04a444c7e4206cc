"""The restart engine: runs the journal's batches through the procedure's steps, one batch at a time.

Before each batch it asks the product's pure gate, over a fresh snapshot, whether the cluster is
safe, and waits while it is not. Every transition is written to the journal, so a run killed at
any point is finished by `resume` without restarting a node twice. On a stop request (Ctrl-C,
SIGTERM, a caller's cancel) it stops at the next safe point (never with a node left down) and
restores every temporary setting. It knows no product: everything particular is in the
`Product` it is given.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Generic

from orchestrator.config.hooks import HookPoint
from orchestrator.errors import Aborted, ClusterError, OrchestratorError, OutsideWindow, StoppedAfter, UnsafeToProceed
from orchestrator.restart import steps
from orchestrator.restart.adapter import AdapterT
from orchestrator.restart.budget import window_asked
from orchestrator.restart.context import RunContext
from orchestrator.restart.deferral import Deferred, deferrable_wait
from orchestrator.restart.events import Event
from orchestrator.restart.hooks import run_hooks
from orchestrator.restart.journal import BatchRecord, BatchState, RunState, measured_batch_seconds
from orchestrator.restart.latency_control import LatencyBudget
from orchestrator.restart.lock import pause_request, request_pause
from orchestrator.restart.phases import Phase, reached
from orchestrator.restart.procedure import Procedure
from orchestrator.restart.product import Product, RunStepFn, SnapshotT
from orchestrator.restart.search_watch import RecoveryThrottle, SearchWatch
from orchestrator.restart.steps import PER_NODE, StepFn
from orchestrator.restart.window_run import NotNow, WindowRun, in_the_window
from orchestrator.restart.windows_gate import outside_window
from orchestrator.retry import Seen
from orchestrator.units import counted

# Steps between these two leave a node down: an abort waits until the node is back.
NODE_DOWN_FROM, NODE_BACK_AT = "stop_service", "wait_for_join"
# Steps the engine adds around the playbook's, journaled like them (so a resume runs what is not done).
LAST_LOOK = "last_look"  # the product's stop_check, just before the stop
BEFORE_BATCH, BEFORE_STOP, AFTER_START, AFTER_BATCH = ("hooks:before_batch", "hooks:before_stop",
                                                       "hooks:after_start", "hooks:after_batch")
PAUSE_POLL_S = 2.0  # how often a paused run looks for `continue`
MAX_PAUSE_S = 7 * 24 * 3600.0  # a pause older than a week ends the run (resume goes on)


class Engine(Generic[SnapshotT, AdapterT]):
    """Runs a product's procedure over its adapter: generic, so that the product's steps, its adapter
    and its decisions are checked to agree (restart/product.py)."""

    def __init__(self, ctx: RunContext[AdapterT], product: Product[SnapshotT, AdapterT],
                 procedure: Procedure[AdapterT], preludes: Mapping[str, RunStepFn] | None = None,
                 stop_after: int = 0) -> None:
        self.ctx = ctx
        self.stop_after = stop_after  # batches this invocation does before it stops (0: all); not recorded
        self.product = product
        self.procedure = procedure
        self.preludes = dict(preludes or {})  # work a run may carry before batch 1, by name (force-merge)
        self.batch_seconds: list[float] = []
        self.began_at: dict[int, float] = {}  # each batch's begin here, on the run's clock
        self.throttle: RecoveryThrottle | None = None  # the search latency budget's, while the watch runs
        self.batch_clock_s: list[float] = []  # each batch's time on the run's clock
        self.at_once = 1  # batches under way together: a window's size (restart/window_run.py)
        self.prior_batch_s = measured_batch_seconds(ctx.journal.cluster, ctx.journal.mode, ctx.journal.run_id)

    # --- the run ---------------------------------------------------------------------------------
    def run(self) -> None:
        journal = self.ctx.journal
        back_from_deferral = journal.state is RunState.DEFERRED
        journal.set_state(RunState.RUNNING)
        self.run_watched(back_from_deferral)

    def watch(self) -> SearchWatch:
        """What searchers see, on a thread of its own, from before the first stop to the last node back; ended
        (and its hand on the recovery rate with it) before the run puts back its settings."""
        self.throttle = self.recovery_throttle()
        return SearchWatch(self.ctx, self.ctx.inv.search.interval_s, self.throttle)

    def search_breach(self) -> str | None:
        """A sustained breach of the search latency budget (None without a budget, or within it): a window
        admits no node beside those away while it lasts."""
        return self.throttle.breach() if self.throttle is not None else None

    def recovery_throttle(self) -> RecoveryThrottle | None:
        """The search latency budget's hand on the recovery rate, where the inventory sets a budget and the
        product has a rate to move."""
        budget, key = LatencyBudget.parse(self.ctx.inv.search.latency_budget), self.product.recovery_rate_key
        return RecoveryThrottle(self.ctx, key, budget, self.ctx.inv.search) if budget and key else None

    def run_watched(self, back_from_deferral: bool) -> None:
        ctx, journal = self.ctx, self.ctx.journal
        try:
            first = next((b for b in journal.batches if b.state != BatchState.DONE), None)
            if first is not None and first.state == BatchState.PENDING:
                self.within_window(first)  # outside a window: stopped before anything is done, hooks included
            if not back_from_deferral:  # the same run going on, not a new start: its hooks ran
                self.hooks(HookPoint.BEFORE_RUN)
            with self.watch() as watch:
                self.run_preludes()
                if not journal.run_setup_done:
                    for _name, run_step in self.procedure.before_run:
                        run_step(ctx)
                    journal.setup_done()
                watch.await_baseline()
                if window_asked(ctx.options.max_unavailable):
                    WindowRun(self).run()
                else:
                    for batch in journal.batches:
                        if batch.state != BatchState.DONE:
                            if batch.state == BatchState.PENDING:
                                self.honour_pause(batch)
                                self.within_window(batch)
                            self.run_batch(batch)
                            self.after_batch(batch)
            steps.restore_settings(ctx)
            self.hooks(HookPoint.AFTER_RUN, never_abort=True)
            upgrade = journal.plan.upgrade
            done = f"upgraded to {upgrade.to}" if upgrade else "rebooted" if ctx.options.reboot else "restarted"
            self.finish(RunState.SUCCEEDED, f"all {counted(len(journal.batches), 'batch')} {done}")
        except Deferred as exc:
            # Nothing restored: the run goes on when its watcher hands the wait back.
            journal.defer(exc.wait)
            ctx.emit(Event("run", f"deferred: {exc.wait.what} is left to the scheduler's trigger "
                                  f"(seen: {exc.wait.seen})", batch=exc.wait.batch,
                           data={"result": RunState.DEFERRED.value, "waiting": exc.wait.to_json()}))
            raise
        except Aborted as exc:
            stopped = self.stop_safely(exc)
            # A stop after the batches asked ends this part of the run as planned: `after_run` (expire
            # the silence), not `on_failure`.
            self.hooks(HookPoint.AFTER_RUN if isinstance(exc, StoppedAfter) else HookPoint.ON_FAILURE, never_abort=True)
            raise stopped from None
        except OrchestratorError as exc:
            # Temporary settings stay in force (allocation restricted), kept by the journal for `resume`,
            # unless the error says the node is lost for longer than planned (errors.py).
            failed = self.restore_after_failure(exc) if exc.restores_settings else exc
            self.finish(RunState.FAILED, failed.what, failed.resume)
            self.hooks(HookPoint.ON_FAILURE, never_abort=True)
            if failed is exc:
                raise
            raise failed from exc
        except BaseException as exc:
            # Not ours (a bug, or the interpreter stopping): the journal must not say "running" forever.
            self.finish(RunState.FAILED, f"internal error: {type(exc).__name__}: {exc}")
            raise

    def run_preludes(self) -> None:
        """Work the run carries before batch 1 (a force-merge): done once, skipped on resume."""
        for name in self.ctx.journal.spec.prelude:
            if name in self.ctx.journal.preludes_done:
                continue
            if name not in self.preludes:
                raise UnsafeToProceed(f"this run carries a {name} before its restart, which cannot run here")
            self.preludes[name](self.ctx)

    def finish(self, state: RunState, message: str, resume: str = "") -> None:
        self.ctx.journal.calls(self.ctx.cluster.calls)  # before the end event: metrics publish on it
        self.ctx.journal.set_state(state, message, resume)
        self.ctx.emit(Event("run", f"run {state.value}: {self.ctx.journal.said()}", data={"result": state.value}))

    def stop_safely(self, exc: Aborted) -> Aborted:
        """After an abort: every temporary setting put back, so nothing is left half-set; or, when another process
        took the run over, nothing at all (the settings are its now)."""
        if self.ctx.abort.hands_off:
            message = (f"{exc}; nothing restored: another process goes on with the run, and its temporary "
                       "settings are its own now")
            self.finish(RunState.ABORTED, message)
            return exc.__class__(message)
        message, resume = self.restore_everything(exc, "continues the remaining batches")
        self.finish(RunState.STOPPED if isinstance(exc, StoppedAfter) else RunState.ABORTED, message, resume)
        return OutsideWindow(message, exc.opens, resume) if isinstance(exc, OutsideWindow) else \
            exc.__class__(message, resume=resume)

    def restore_after_failure(self, exc: OrchestratorError) -> OrchestratorError:
        """After a failure whose error asks it (errors.py): every temporary setting put back; the error,
        its message saying so."""
        message, resume = self.restore_everything(exc, "finishes the run once the cause is fixed")
        return exc.__class__(message, resume=resume)

    def restore_everything(self, exc: OrchestratorError, then: str) -> tuple[str, str]:
        """Every temporary setting put back, and what `resume` needs made again: a batch whose nodes have
        not begun to stop starts over (its setting set again before any stop), and the run's
        `before_run` steps run again. The run's message, saying how it went, and what its next try does
        (``then``, once the settings are back)."""
        try:
            steps.restore_settings(self.ctx)
        except OrchestratorError as restore_error:
            return (f"{exc.what}; restoring settings FAILED ({restore_error.what}): `orchestrate status` shows "
                    "what is pending", "restores it")
        journal = self.ctx.journal
        for batch in journal.batches:
            if batch.state == BatchState.RUNNING and not self.any_node_stopping(batch):
                journal.reopen_batch(batch)
        journal.setup_undone()
        return f"{exc.what}; temporary settings restored", then

    def any_node_stopping(self, batch: BatchRecord) -> bool:
        return any(reached(self.ctx.record(name).phase, Phase.STOPPING) for name in batch.nodes)

    # --- a batch ---------------------------------------------------------------------------------
    def run_batch(self, batch: BatchRecord) -> None:
        if batch.state == BatchState.PENDING:
            self.read_ahead(batch)
            self.wait_until_safe(batch)
        self.begin(batch)
        self.work_through(batch)

    def read_ahead(self, batch: BatchRecord) -> None:
        if any(name == "tune_host" for name, _ in self.procedure.batch):
            steps.read_hosts_ahead(self.ctx, batch)  # during the gate and the stop

    def begin(self, batch: BatchRecord) -> None:
        """The batch under way (journaled, said), or said to be resumed where it stopped."""
        ctx = self.ctx
        self.began_at[batch.number] = ctx.clock.monotonic()
        if batch.state == BatchState.PENDING:
            ctx.journal.begin_batch(batch)
            ctx.emit(Event("batch", f"batch {batch.number}/{len(ctx.journal.batches)}: {batch.label} "
                                    f"({', '.join(batch.nodes)})", batch=batch.number, eta_s=self.eta_s()))
        else:
            ctx.emit(Event("batch", f"batch {batch.number}: resuming {batch.label} after "
                                    f"{', '.join(batch.steps_done) or 'nothing'}", batch=batch.number))

    def work_through(self, batch: BatchRecord) -> None:
        """A begun batch's steps not yet done, stage by stage; then the batch done."""
        ctx = self.ctx
        for stage in self.stages(batch):
            todo = [(name, step) for name, step in stage if name not in batch.steps_done]
            if not todo:
                continue
            self.check_abort(batch)
            if len(todo) == 1:
                todo[0][1](ctx, batch)
            else:
                self.each_node_through(batch, todo)
            for name, _ in todo:
                ctx.journal.step_done(batch, name)
        with ctx.journal.together():
            ctx.journal.end_batch(batch)
            ctx.journal.calls(ctx.cluster.calls)
        took = (batch.finished or 0) - (batch.started or batch.finished or 0)
        self.batch_seconds.append(took)
        # Again on the run's clock, the one the maintenance windows are read on (a batch resumed part-done counts
        # from its resume here).
        self.batch_clock_s.append(ctx.clock.monotonic() - self.began_at.get(batch.number, ctx.clock.monotonic()))
        ctx.emit(Event("batch", f"batch {batch.number} done in {took:.1f} s", batch=batch.number, eta_s=self.eta_s(),
                       data={"state": "done"}))
        self.check_abort(batch)

    @property
    def back_at(self) -> str:
        """The step after which a batch's nodes are back: the rejoin, or the start without one."""
        return NODE_BACK_AT if any(name == NODE_BACK_AT for name, _ in self.procedure.batch) else "start_service"

    def batch_steps(self) -> list[tuple[str, StepFn[AdapterT]]]:
        """The playbook's steps with the engine's own around them: its hooks (a point the playbook gives none is no
        step: each step done is a save of the journal, and a request to the cluster's copy), and the last look
        before the stop."""
        back = self.back_at
        hooked = self.procedure.playbook.hooks.at

        def hooks(name: str, point: HookPoint, step: Callable[[HookPoint], StepFn[AdapterT]]
                  ) -> list[tuple[str, StepFn[AdapterT]]]:
            return [(name, step(point))] if hooked(point) else []

        out = hooks(BEFORE_BATCH, HookPoint.BEFORE_BATCH, self.batch_hooks)
        for name, step in self.procedure.batch:
            if name == NODE_DOWN_FROM:
                out += [(LAST_LOOK, lambda ctx, batch: self.check_before_stop(batch)),
                        *hooks(BEFORE_STOP, HookPoint.BEFORE_STOP, self.node_hooks)]
            out.append((name, step))
            if name == back:
                out += hooks(AFTER_START, HookPoint.AFTER_START, self.node_hooks)
        return [*out, *hooks(AFTER_BATCH, HookPoint.AFTER_BATCH, self.batch_hooks)]

    def stages(self, batch: BatchRecord) -> list[list[tuple[str, StepFn[AdapterT]]]]:
        """The batch's steps in stages, each run before the next begins: one step each, except that
        from the stop to the rejoin a run of per-node steps is one stage when the batch has several
        nodes (see `each_node_through`)."""
        out: list[list[tuple[str, StepFn[AdapterT]]]] = []
        node_down = False
        back = self.back_at
        for name, step in self.batch_steps():
            node_down = node_down or name == NODE_DOWN_FROM
            if node_down and len(batch.nodes) > 1 and step in PER_NODE and out and out[-1][-1][1] in PER_NODE:
                out[-1].append((name, step))
            else:
                out.append([(name, step)])
            node_down = node_down and name != back
        return out

    def each_node_through(self, batch: BatchRecord, todo: list[tuple[str, StepFn[AdapterT]]]) -> None:
        """Each node of the batch through the steps at its own pace, all at once: a node whose stop is
        quick starts while another still stops. Each step looks only at its node's records (which say
        how far a node got, for a resume); the batch's steps are journaled done when every node is."""
        def through(name: str) -> None:
            one = BatchRecord(batch.number, batch.label, [name], batch.state)
            for _, step in todo:
                step(self.ctx, one)

        steps.for_each_node(self.ctx, batch, through)

    # --- hooks -----------------------------------------------------------------------------------
    def hooks(self, point: HookPoint, never_abort: bool = False) -> None:
        run_hooks(self.ctx, point, self.procedure.playbook.hooks.at(point), never_abort=never_abort)

    def batch_hooks(self, point: HookPoint) -> StepFn:
        def run(ctx: RunContext, batch: BatchRecord) -> None:
            run_hooks(ctx, point, self.procedure.playbook.hooks.at(point), batch.number, batch.label,
                      tuple(batch.nodes))
        return run

    def node_hooks(self, point: HookPoint) -> StepFn:
        def run(ctx: RunContext, batch: BatchRecord) -> None:
            for name in batch.nodes:  # in the batch's order, one node after the other
                run_hooks(ctx, point, self.procedure.playbook.hooks.at(point), batch.number, batch.label,
                          tuple(batch.nodes), ctx.node(name))
        return run

    # --- between batches: the operator's control ----------------------------------------------
    def after_batch(self, batch: BatchRecord) -> None:
        ctx = self.ctx
        left = sum(1 for b in ctx.journal.batches if b.state != BatchState.DONE)
        if not left:
            return
        if self.stop_after and len(self.batch_seconds) >= self.stop_after:
            raise StoppedAfter(f"stopped after {counted(len(self.batch_seconds), 'batch')} as asked (--stop-after "
                               f"{self.stop_after}); {counted(left, 'batch')} left")
        if ctx.options.canary and batch.number == 1:
            # The pause's own message says how to go on (`honour_pause`): the reason says why, once.
            reason = f"canary: batch 1 ({batch.label}) is done; check it before the rest"
            request_pause(ctx.cluster, reason)
        if ctx.options.pause_between_s:
            ctx.emit(Event("wait", f"pausing {ctx.options.pause_between_s:.0f} s between batches (--pause-between)"))
            waited_until = ctx.clock.monotonic() + ctx.options.pause_between_s
            while ctx.clock.monotonic() < waited_until and not ctx.abort.requested:
                ctx.clock.sleep(min(1.0, waited_until - ctx.clock.monotonic()))
            self.check_abort(batch)

    def honour_pause(self, batch: BatchRecord) -> None:
        """At a batch boundary, a pause asked by `orchestrate pause` (or by --canary) holds the run, nodes
        all up, until `orchestrate continue` removes it (checked every few seconds; Ctrl-C still stops)."""
        ctx, cluster = self.ctx, self.ctx.journal.cluster
        request = pause_request(ctx.cluster)
        if request is None:
            return
        reason = str(request.get("reason") or "paused")
        ctx.journal.set_paused(reason)
        ctx.emit(Event("run", f"paused before batch {batch.number} ({batch.label}): {reason}. "
                              f"`orchestrate continue --cluster {cluster}` goes on", batch=batch.number))
        deferrable_wait(ctx.deferral, "pause", batch.number, tuple(batch.nodes),
                        lambda seen: True if pause_request(ctx.cluster) is None else None,
                        what=f"`orchestrate continue --cluster {cluster}`", timeout_s=MAX_PAUSE_S,
                        interval_s=max(ctx.inv.timeouts.poll_interval_s, PAUSE_POLL_S), clock=ctx.clock,
                        should_stop=lambda: ctx.abort.requested)
        ctx.journal.set_paused(None)
        ctx.emit(Event("run", f"continued: batch {batch.number} ({batch.label}) next", batch=batch.number))

    def check_abort(self, batch: BatchRecord) -> None:
        if not self.ctx.abort.requested:
            return
        node_down = NODE_DOWN_FROM in batch.steps_done and NODE_BACK_AT not in batch.steps_done
        if node_down and not self.ctx.abort.hands_off:  # another process's now: the node is its to bring back
            self.ctx.emit(Event("warning", "stop requested: bringing the batch's nodes back first", batch=batch.number))
            return
        raise Aborted(f"{self.ctx.abort.stopped()} at a safe point")

    def check_before_stop(self, batch: BatchRecord) -> None:
        """The last look, from the live cluster, just before the batch's nodes stop: data placed since
        the gate (a new index's only copy, say) would become unavailable. Refused, the batch is put
        back as it was (its own settings restored) and starts over on `resume`."""
        ctx = self.ctx
        if not self.product.checks_before_stop or self.any_node_stopping(batch):
            return  # a node is already stopping or down (a resumed run): bring it back, do not refuse now
        windowed = window_asked(ctx.options.max_unavailable)
        window = in_the_window(ctx.journal, batch)  # before the read: a node that left since was away in it
        if windowed:  # the window's proof: the other nodes in it are away too
            try:
                snapshot = ctx.cluster.gate_snapshot(ctx.journal.plan, batch.nodes, proof=True, window=window)
                problems = self.product.window_check(snapshot, ctx.journal.plan, ctx.inv, batch.nodes[0], window,
                                                     ctx.options)
            except ClusterError as exc:  # no proof, either way: the batch waits to be proven again, nothing stopped
                problems = [f"its last look could not be read ({exc})."]
        else:
            snapshot = ctx.cluster.gate_snapshot(ctx.journal.plan, batch.nodes, proof=True)
            problems = self.product.stop_check(snapshot, ctx.journal.plan, batch.nodes, ctx.options)
        if not problems:
            return
        steps.restore_settings(ctx, batch=batch.number)
        ctx.journal.reopen_batch(batch)
        if windowed:  # the window changed since its admission: it waits to be proven again, as before it
            raise NotNow(f"batch {batch.number} ({batch.label}) goes back to wait, nothing stopped: "
                         f"{' '.join(problems)}")
        raise UnsafeToProceed(f"not stopping batch {batch.number} ({batch.label}): {' '.join(problems)} Nothing was "
                              "stopped and the batch's own settings are restored. Fix it (add a replica), or accept "
                              "it with `orchestrate resume --allow-unavailable PATTERN`.")

    def wait_until_safe(self, batch: BatchRecord) -> None:
        """Never start a batch while the cluster is unsafe: wait for `stable_samples` healthy samples in a
        row (one unhealthy sample starts the count again), up to `unhealthy_s`, then say why not."""
        ctx = self.ctx
        needed = ctx.inv.timeouts.stable_samples
        healthy_in_a_row = 0
        said = ""

        def safe(seen: Seen[bool]) -> bool | None:
            nonlocal healthy_in_a_row, said
            snapshot = ctx.cluster.gate_snapshot(ctx.journal.plan, batch.nodes)
            problems = self.product.gate(snapshot, ctx.journal.plan, batch.nodes, ctx.options)
            healthy_in_a_row = 0 if problems else healthy_in_a_row + 1
            seen.text = " ".join(problems) or f"healthy {healthy_in_a_row} of {needed} samples in a row"
            if problems and seen.text != said:  # the live view says what blocks the batch, once per change
                said = seen.text
                ctx.emit(Event("wait", f"batch {batch.number} waits: {said}", batch=batch.number))
            return True if healthy_in_a_row >= needed else None

        try:
            deferrable_wait(ctx.deferral, "gate", batch.number, tuple(batch.nodes), safe,
                            what=f"the cluster to be safe for batch {batch.number} ({batch.label})",
                            timeout_s=ctx.inv.timeouts.gate_give_up_s,
                            interval_s=max(ctx.inv.timeouts.poll_interval_s, 1),
                            clock=ctx.clock, should_stop=lambda: ctx.abort.requested)
        except OrchestratorError as exc:
            if isinstance(exc, Aborted):
                raise
            raise UnsafeToProceed(f"not going on with batch {batch.number} ({batch.label}): {exc}") from exc

    def within_window(self, batch: BatchRecord) -> None:
        """A batch is begun only if its estimated time ends before the maintenance window in force closes."""
        schedule = self.ctx.inv.maintenance.schedule()
        if schedule.limited:
            closed = outside_window(schedule, self.ctx.clock.wall(), self.batch_estimate_s(batch), batch)
            if closed is not None:
                raise closed

    def batch_estimate_s(self, batch: BatchRecord) -> float:
        """One batch's time: this run's measured mean, else the cluster's previous run's, else the plan's."""
        if self.batch_clock_s:
            return sum(self.batch_clock_s) / len(self.batch_clock_s)
        if self.prior_batch_s is not None:
            return self.prior_batch_s
        return next((b.estimate_s for b in self.ctx.journal.plan.batches if b.number == batch.number), 0.0)

    def eta_s(self) -> float:
        """Remaining time: measured batch times once there are some; before, those of the cluster's
        previous run in the same mode; without one, the plan's estimate."""
        remaining = [b for b in self.ctx.journal.batches if b.state != BatchState.DONE]
        at_once = self.at_once  # a window's nodes go several at once
        if self.batch_seconds:
            return round(len(remaining) * sum(self.batch_seconds) / len(self.batch_seconds) / at_once, 1)
        if self.prior_batch_s is not None:
            return round(len(remaining) * self.prior_batch_s / at_once, 1)
        left = {b.number for b in remaining}
        return round(float(sum(b.estimate_s for b in self.ctx.journal.plan.batches if b.number in left)), 1)

