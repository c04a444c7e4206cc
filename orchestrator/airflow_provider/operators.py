"""The operators: a plan check, a force-merge, and a rolling restart (or upgrade) that defers its waits.

Each reads its cluster as `orchestrate` does (an inventory by name or path), with the endpoints and
secrets of an Airflow Connection over the inventory's (connection.py). Every event of a run goes to
the task's log as it happens; what `--json` would print last is the task's return value (XCom); a
failure is raised with the operator's message (never a traceback of ours), and a retried task resumes
its own run from the journal.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

from airflow.providers.standard.triggers.temporal import DateTimeTrigger
from airflow.sdk import BaseOperator, Context, get_current_context
from airflow.sdk.configuration import conf
from airflow.sdk.exceptions import AirflowException, TaskDeferralTimeout

from orchestrator import api
from orchestrator.airflow_provider.hooks import read_connection
from orchestrator.airflow_provider.triggers import RunWaitTrigger
from orchestrator.errors import OrchestratorError, OutsideWindow, StoppedAfter
from orchestrator.restart.deferral import Wait
from orchestrator.restart.events import Event

# A deferral's timeout is its wait's own deadline and this much more: time for a busy triggerer to fire and for
# the task to be scheduled back. Past it, no triggerer is watching (none running?): the task fails, saying so.
DEFER_GRACE_S = 600.0


def as_xcom(value: dict[str, Any]) -> dict[str, Any]:
    """A return value in JSON's own types (lists, not tuples), as the CLI's `--json` prints it."""
    out: dict[str, Any] = json.loads(json.dumps(value))
    return out


def done_batches(summary: dict[str, Any]) -> int:
    return sum(1 for batch in summary.get("batches", ()) if batch.get("state") == "done")


NEXT_TRY = "a new try of this task (clear it, or let it retry)"  # what `orchestrate resume` is to an Airflow user

class ClusterOperator(BaseOperator):
    """What the three operators share: the cluster (``cluster``: an inventory name; ``inventory``: its
    path; or the connection's `inventory` extra) and the connection (``conn_id``)."""

    template_fields: Sequence[str] = ("cluster", "inventory", "conn_id")

    def __init__(self, *, cluster: str | None = None, inventory: str | None = None, conn_id: str | None = None,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.cluster = cluster
        self.inventory = inventory
        self.conn_id = conn_id

    def where(self) -> dict[str, Any]:
        """The keyword arguments of the Python API that name the cluster."""
        try:
            keys, named = read_connection(self.conn_id)
        except OrchestratorError as exc:  # a connection that cannot be read: said by field
            raise self.failed(exc) from None
        config = self.inventory or named
        if config is None and not self.cluster:
            raise AirflowException("give the operator `cluster` (an inventory's name), `inventory` (its path), "
                                   "or a connection whose extra names `inventory`")
        return {"cluster": self.cluster, "config": config, "cluster_keys": keys or None}

    def said(self, event: Event) -> None:
        self.log.info("%s", event.message)

    def failed(self, exc: OrchestratorError) -> AirflowException:
        # What a terminal's operator types, an Airflow user does by clearing the task: its next try resumes
        # the run it started (RollingRestartOperator.execute finds it by the task's key).
        return AirflowException(f"{type(exc).__name__}: {exc.told(NEXT_TRY)}")


class PlanCheckOperator(ClusterOperator):
    """Fails the task when the rolling restart's plan is unsafe (`orchestrate plan`); returns the plan."""

    template_fields: Sequence[str] = (*ClusterOperator.template_fields, "nodes", "exclude")

    def __init__(self, *, by: str = "node", nodes: Sequence[str] = (), exclude: Sequence[str] = (),
                 allow_yellow: bool = False, allow_unavailable: Sequence[str] = (), **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.by, self.nodes, self.exclude = by, list(nodes), list(exclude)
        self.allow_yellow, self.allow_unavailable = allow_yellow, list(allow_unavailable)

    def execute(self, context: Context) -> dict[str, Any]:
        try:
            plan = api.plan(**self.where(), by=self.by, nodes=self.nodes, exclude=self.exclude,
                            allow_yellow=self.allow_yellow, allow_unavailable=self.allow_unavailable)
        except OrchestratorError as exc:
            raise self.failed(exc) from None
        for line in plan.notes:
            self.log.info("plan: %s", line)
        if not plan.safe:
            raise AirflowException("the plan is unsafe: " + " ".join(plan.all_problems()))
        self.log.info("plan: %d batches, about %.0f s", len(plan.batches), plan.estimate_s)
        return as_xcom(plan.to_json())


class ForceMergeOperator(ClusterOperator):
    """Force-merges indices no longer written to (`orchestrate forcemerge`); fails unless every merge
    succeeded; returns the merge report."""

    template_fields: Sequence[str] = (*ClusterOperator.template_fields, "indices")

    def __init__(self, *, indices: str, max_segments: int = 5, concurrency: int = 2,
                 include_write_indices: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.indices, self.max_segments, self.concurrency = indices, max_segments, concurrency
        self.include_write_indices = include_write_indices

    def execute(self, context: Context) -> dict[str, Any]:
        try:
            report = api.forcemerge(**self.where(), indices=self.indices, max_segments=self.max_segments,
                                    concurrency=self.concurrency, include_write_indices=self.include_write_indices,
                                    on_event=self.said)
        except OrchestratorError as exc:
            raise self.failed(exc) from None
        out: dict[str, Any] = report.to_json()
        if report.outcome != "success":
            raise AirflowException(f"force-merge {report.outcome}: {report.failures()}")
        return as_xcom(out)


class RollingRestartOperator(ClusterOperator):
    """A rolling restart (``reboot``: each host rebooted; ``upgrade_to``: a rolling upgrade), node by node
    or zone by zone (``by``), as `orchestrate restart --yes`.

    ``deferrable`` (default: Airflow's `[operators] default_deferrable`, false unless set): once a batch
    waits (its nodes rejoining, recovering, the gate before the next, a canary's pause), the task defers
    to `RunWaitTrigger` and frees its worker slot; it comes back for each step that acts. The trigger
    looks every ``poll_interval_s`` (default: the inventory's `timeouts.poll_interval_s`). Each deferral
    times out at its wait's own deadline and `DEFER_GRACE_S` more: with no triggerer running, the task
    fails saying what the run leaves in force, instead of waiting for ever. A retried task (a worker
    killed mid-run, a failure fixed) resumes its own run from the journal: no node is restarted twice,
    no setting left changed. ``stop_after``: the task succeeds after that many batches, its run stopped
    (a later task resumes it). ``tune=False``: `--no-tune`, the hosts' tuning left alone. ``max_unavailable``:
    `--max-unavailable`, several nodes away at once (the inventory's `max_unavailable` when not given); the
    task holds its worker slot while it admits nodes (each admission a live proof) and defers once, when
    nothing is left to admit, while the window drains."""

    template_fields: Sequence[str] = (*ClusterOperator.template_fields, "nodes", "exclude", "upgrade_to")

    def __init__(self, *, by: str = "node", nodes: Sequence[str] = (), exclude: Sequence[str] = (),
                 canary: bool = False, stop_after: int = 0, allow_yellow: bool = False,
                 allow_unavailable: Sequence[str] = (), reboot: bool = False, upgrade_to: str | None = None,
                 snapshot_check: bool = True, deferrable: bool | None = None, poll_interval_s: float | None = None,
                 tune: bool = True, max_unavailable: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.max_unavailable = max_unavailable
        self.by, self.nodes, self.exclude, self.canary = by, list(nodes), list(exclude), canary
        self.stop_after, self.allow_yellow, self.allow_unavailable = stop_after, allow_yellow, list(allow_unavailable)
        self.reboot, self.upgrade_to, self.snapshot_check, self.tune = reboot, upgrade_to, snapshot_check, tune
        if deferrable is None:  # Airflow's convention: the deployment says whether operators defer by default
            deferrable = conf.getboolean("operators", "default_deferrable", fallback=False)
        self.deferrable, self.poll_interval_s = deferrable, poll_interval_s
        self.cancel = api.Cancel()

    @staticmethod
    def origin(context: Context) -> str:
        """This task's key, recorded in the run's journal: its retries find the run again."""
        ti = context["ti"]
        return f"airflow:{ti.dag_id}/{ti.run_id}/{ti.task_id}/{ti.map_index}"

    def execute(self, context: Context) -> dict[str, Any]:
        where = self.where()
        origin = self.origin(context)
        try:
            found = api.run_of(**where, origin=origin)
            if found is None:
                return self.went(where, self.stop_after, lambda: self.start(where, origin))
            run_id, state = found
            summary = api.summary(**where, run_id=run_id)
            if state == "succeeded":
                self.log.info("run %s of this task already succeeded", run_id)
                return as_xcom(summary)
            self.log.info("resuming this task's run %s (%s)", run_id, state)
            stop_at = done_batches(summary) + self.stop_after if self.stop_after else 0
            return self.went(where, stop_at, lambda: self.resume(where, run_id, stop_at, summary))
        except OrchestratorError as exc:
            raise self.failed(exc) from None

    def window_opened(self, context: Context, event: Any = None) -> dict[str, Any]:
        """Back from the deferral to the maintenance window's opening: the run goes on as a retry's would."""
        return self.execute(context)

    def start(self, where: dict[str, Any], origin: str) -> api.RunResult:
        common = {**where, "by": self.by, "nodes": self.nodes, "exclude": self.exclude, "canary": self.canary,
                  "stop_after": self.stop_after, "allow_yellow": self.allow_yellow,
                  "allow_unavailable": self.allow_unavailable, "on_event": self.said, "cancel": self.cancel,
                  "defer": self.deferrable, "origin": origin, "max_unavailable": self.max_unavailable}
        if self.upgrade_to:
            return api.upgrade(**common, to=self.upgrade_to, snapshot_check=self.snapshot_check)
        return api.restart(**common, reboot=self.reboot, tune=self.tune)

    def resume(self, where: dict[str, Any], run_id: str, stop_at: int, summary: dict[str, Any]) -> api.RunResult:
        """This task's run, resumed; ``stop_at``: the count of batches done at which it stops (0: none), so
        that `stop_after` counts the task's batches across its deferrals, not one stretch's."""
        stop_after = max(stop_at - done_batches(summary), 1) if stop_at else 0
        return api.resume(**where, run_id=run_id, defer=self.deferrable, stop_after=stop_after,
                          on_event=self.said, cancel=self.cancel)

    def went(self, where: dict[str, Any], stop_at: int, action: Callable[[], api.RunResult]) -> dict[str, Any]:
        """The run's outcome: deferred (the task defers), finished (its summary), stopped as asked."""
        try:
            result = action()
        except OutsideWindow as closed:
            if not (self.deferrable and closed.opens):
                raise
            # Every node back and every setting restored: the task frees its worker until the window opens, then
            # resumes its run (found again by its origin).
            self.log.info("outside the maintenance window: deferring until %s", closed.opens.isoformat())
            self.defer(trigger=DateTimeTrigger(moment=closed.opens), method_name="window_opened")
        except StoppedAfter:
            found = api.run_of(**where, origin=self.origin(get_current_context()))
            if found is None:
                raise
            return as_xcom(api.summary(**where, run_id=found[0]))
        if result.result == "deferred":
            wait = Wait.from_json(result.summary.get("waiting"))
            self.log.info("deferring: %s", wait.what)
            self.defer(trigger=RunWaitTrigger(cluster=where["cluster"], inventory=where["config"],
                                              conn_id=self.conn_id, run_id=result.run_id,
                                              poll_interval_s=self.poll_interval_s, stop_at=stop_at),
                       method_name="execute_complete",
                       timeout=timedelta(seconds=max(wait.deadline - time.time(), 0.0) + DEFER_GRACE_S))
        if "report" in result.summary:
            self.log.info("run report: %s", result.summary["report"])
        return as_xcom(result.summary)

    def execute_complete(self, context: Context, event: dict[str, Any]) -> dict[str, Any]:
        """Back from the trigger: the wait is over (or out of time, or the run moved on): resume the run."""
        self.log.info("the trigger handed the run back: %s (%s)", event.get("text"), event.get("verdict"))
        where = self.where()
        run_id, stop_at = str(event["run_id"]), int(event.get("stop_at") or 0)
        try:
            summary = api.summary(**where, run_id=run_id)
            if summary["result"] == "succeeded":  # taken back by hand and finished meanwhile
                return as_xcom(summary)
            return self.went(where, stop_at, lambda: self.resume(where, run_id, stop_at, summary))
        except OrchestratorError as exc:
            raise self.failed(exc) from None

    def resume_execution(self, next_method: str, next_kwargs: dict[str, Any] | None, context: Context) -> Any:
        try:
            return super().resume_execution(next_method, next_kwargs, context)
        except TaskDeferralTimeout:
            raise AirflowException(self.no_trigger(context)) from None

    def no_trigger(self, context: Context) -> str:
        """Why a deferral timed out, what the run leaves in force, and what resumes it."""
        said = "no trigger handed the run back before its wait's deadline (is a triggerer running?)"
        where = self.where()
        found = api.run_of(**where, origin=self.origin(context))
        if found is None:
            return said
        summary = api.summary(**where, run_id=found[0])
        waiting = summary.get("waiting") or {}
        in_force = ", ".join(f"{s['key']} (back to {'unset' if s['restore_to'] is None else s['restore_to']})"
                             for s in summary.get("in_force", ()))
        return (f"{said}: run {found[0]} waited for {waiting.get('what', 'a wait')}. In force until it resumes: "
                f"{in_force or 'no temporary setting'}, and its lock on the cluster (deferred). "
                "A new try of this task (clear it) resumes the run, which looks again and restores them")

    def on_kill(self) -> None:
        self.cancel.cancel("the Airflow task was killed")
