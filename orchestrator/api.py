"""The Python API: what `orchestrate` does, for pipelines and schedulers that call it from Python.

Every function loads and checks the inventory first (a bad file raises `ConfigError` before any
call to a cluster), and raises the documented errors of `orchestrator.errors`: each has an
operator's message and the `exit_code` the CLI would use. Safe from a worker thread (a scheduler's
task): signals are only handled in the main thread; elsewhere, pass a `Cancel` and call its
`cancel()` to stop a run at its next safe point (settings restored, `Aborted` raised).

    from orchestrator import api
    merged = api.forcemerge("logs", indices="logs-2026.11.*")
    if merged.outcome == "success":
        result = api.restart("logs", on_event=print)

See docs/pipelines.md.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrator.restart.context import AbortFlag
from orchestrator.restart.events import Event, discard
from orchestrator.restart.journal import Journal, RunFailed
from orchestrator.restart.plan import Mode, Plan

__all__ = ["Cancel", "Event", "Plan", "RunResult", "forcemerge", "plan", "restart", "resume", "run_of", "status",
           "summary", "tune", "upgrade", "watcher"]

EventCallback = Callable[[Event], None]


class Cancel(AbortFlag):
    """A cancel token: `cancel()` from any thread stops the run at its next safe point."""

    def cancel(self, reason: str = "cancelled by the caller") -> None:
        self.request(reason)


@dataclass(frozen=True)
class RunResult:
    """A finished run (restart or resume): what `--json` gives as its summary line."""

    run_id: str
    cluster: str
    result: str  # succeeded, or deferred when asked (a failed or stopped run raises instead)
    journal: Path
    summary: dict[str, Any]


def _target(cluster: str | None, config: str | Path | None, upgrade: bool = False, reboot: bool = False,
            cluster_keys: Mapping[str, Any] | None = None, tune: bool = True) -> Any:
    from orchestrator.runs.target import open_target

    return open_target(cluster, Path(config) if config is not None else None, upgrade=upgrade, reboot=reboot,
                       cluster_keys=cluster_keys, tune=tune)


def _options(target: Any, allow_yellow: bool, allow_unavailable: Sequence[str], nodes: Sequence[str],
             exclude: Sequence[str], canary: bool = False, pause_between_s: float = 0) -> Any:
    from orchestrator.runs import plans

    control = plans.control_options(list(nodes), list(exclude), canary, pause_between_s)
    return plans.options_for(target.inv.allow_yellow, allow_yellow, list(allow_unavailable), control)


def _mode(by: str) -> Mode:
    if by not in {m.value for m in Mode}:
        from orchestrator.errors import ConfigError

        raise ConfigError("by", [f"{by!r}: give one of {', '.join(m.value for m in Mode)}"])
    return Mode(by)


def plan(cluster: str | None = None, *, config: str | Path | None = None, by: str = "node",
         allow_yellow: bool = False, allow_unavailable: Sequence[str] = (), nodes: Sequence[str] = (),
         exclude: Sequence[str] = (), cluster_keys: Mapping[str, Any] | None = None) -> Plan:
    """The restart plan, changing nothing: batches, estimates, notes, and `problems` (`plan.safe`)."""
    from orchestrator.runs import plans

    target = _target(cluster, config, cluster_keys=cluster_keys)
    return plans.make_plan(target, _mode(by), _options(target, allow_yellow, allow_unavailable, nodes, exclude))


def _finished(journal: Journal) -> RunResult:
    from orchestrator.restart.journal import RunState
    from orchestrator.runs.status import summary as run_summary

    summary = run_summary(journal)
    if journal.state is RunState.DEFERRED:  # not finished: its report comes at its end
        return RunResult(run_id=journal.run_id, cluster=journal.cluster, result=summary["result"],
                         journal=Path(summary["journal"]), summary=summary)
    report = _report(journal)
    if report is not None:
        summary["report"] = str(report)
    return RunResult(run_id=journal.run_id, cluster=journal.cluster, result=summary["result"],
                     journal=Path(summary["journal"]), summary=summary)


def _report(journal: Journal) -> Path | None:
    """The report page beside the journal, as the CLI writes it for every run; a page that cannot be
    written never hides the run's own outcome."""
    from orchestrator.errors import OrchestratorError
    from orchestrator.runs import reports

    try:
        return reports.write_beside_journal(journal)
    except OrchestratorError:
        return None


def _run(action: Callable[[], Journal]) -> RunResult:
    try:
        return _finished(action())
    except RunFailed as exc:
        _report(exc.journal)
        raise exc.cause from None  # the documented error; its journal (and report) in `status`


def restart(cluster: str | None = None, *, config: str | Path | None = None, by: str = "node",
            allow_yellow: bool = False, allow_unavailable: Sequence[str] = (), nodes: Sequence[str] = (),
            exclude: Sequence[str] = (), pause_between_s: float = 0, stop_after: int = 0, reboot: bool = False,
            canary: bool = False, on_event: EventCallback | None = None, cancel: Cancel | None = None,
            cluster_keys: Mapping[str, Any] | None = None, defer: bool = False, origin: str = "",
            tune: bool = True, max_unavailable: str | None = None) -> RunResult:
    """A rolling restart, as `orchestrate restart --yes` (``reboot``: `--reboot`, each host rebooted;
    ``canary``: `--canary`; ``tune=False``: `--no-tune`, the hosts' tuning left alone; ``max_unavailable``:
    `--max-unavailable`, the window, the inventory's `max_unavailable` when not given): refused
    (`PreflightFailed`, nothing changed) when the plan is unsafe. ``on_event`` receives every event, in the
    calling thread.

    For schedulers: ``cluster_keys`` are `cluster:` keys over the inventory's (endpoints, secrets named by
    environment variable); ``defer``: the run leaves its long waits to the caller's trigger and returns
    with result "deferred" (`summary["waiting"]`; see `watcher` and `resume`); ``origin``: the caller's
    task, recorded in the journal (`run_of` finds the run again on a retry)."""
    from dataclasses import replace

    from orchestrator.runs import plans

    target, budget = plans.windowed(_target(cluster, config, reboot=reboot, cluster_keys=cluster_keys, tune=tune),
                                    max_unavailable, _mode(by), pause_between_s)
    options = replace(_options(target, allow_yellow, allow_unavailable, nodes, exclude, canary=canary,
                               pause_between_s=pause_between_s), reboot=reboot, tune=tune, max_unavailable=budget)
    return _start(target, by, options, stop_after, on_event, cancel, defer, origin)


def upgrade(cluster: str | None = None, *, to: str, config: str | Path | None = None, by: str = "node",
            snapshot_check: bool = True, allow_yellow: bool = False, allow_unavailable: Sequence[str] = (),
            nodes: Sequence[str] = (), exclude: Sequence[str] = (), stop_after: int = 0, canary: bool = False,
            on_event: EventCallback | None = None, cancel: Cancel | None = None,
            cluster_keys: Mapping[str, Any] | None = None, defer: bool = False, origin: str = "",
            max_unavailable: str | None = None) -> RunResult:
    """A rolling upgrade to ``to``, as `orchestrate upgrade --to VERSION --yes` (docs/upgrade.md): refused
    (`PreflightFailed`, nothing changed) on an unsupported path, without a recent snapshot (unless
    ``snapshot_check=False``), or when the plan is unsafe. ``max_unavailable``: as in `restart`."""
    from dataclasses import replace

    from orchestrator.runs import plans

    target, budget = plans.windowed(_target(cluster, config, upgrade=True, cluster_keys=cluster_keys),
                                    max_unavailable, _mode(by))
    options = plans.upgrade_options(replace(_options(target, allow_yellow, allow_unavailable, nodes, exclude,
                                                     canary=canary), max_unavailable=budget), to, snapshot_check)
    return _start(target, by, options, stop_after, on_event, cancel, defer, origin)


def _start(target: Any, by: str, options: Any, stop_after: int, on_event: EventCallback | None,
           cancel: Cancel | None, defer: bool = False, origin: str = "") -> RunResult:
    from orchestrator.errors import PreflightFailed
    from orchestrator.restart.deferral import Deferral
    from orchestrator.runs import plans
    from orchestrator.runs import restart as runs

    mode = _mode(by)
    with runs.hosts_checked_early(target.inv) as early:  # SSH preflight while the plan is made
        the_plan = plans.make_plan(target, mode, options, host_transport=early.transport if early else None)
        if not the_plan.safe:
            raise PreflightFailed(runs.other_runs(target) + the_plan.all_problems())
        return _run(lambda: runs.start(target, the_plan, options, on_event or discard, abort=cancel,
                                       stop_after=stop_after, early=early,
                                       deferral=Deferral() if defer else None, origin=origin))


def resume(cluster: str | None = None, *, config: str | Path | None = None, run_id: str | None = None,
           accept_changes: bool = False, allow_unavailable: Sequence[str] = (), stop_after: int = 0,
           on_event: EventCallback | None = None, cancel: Cancel | None = None,
           cluster_keys: Mapping[str, Any] | None = None, defer: bool = False,
           take_over: bool = False) -> RunResult:
    """Continue an interrupted, failed, stopped or deferred run from its journal, as `orchestrate resume`.
    ``defer``: as in `restart`; a deferred run's wait, handed back by the trigger, is waited here.
    ``take_over``: `--take-over`, the run another machine started, from the cluster's copy of its journal."""
    from orchestrator.runs import plans
    from orchestrator.runs import restart as runs

    target = _target(cluster, config, cluster_keys=cluster_keys)
    accepted = plans.patterns(list(allow_unavailable))
    return _run(lambda: runs.resume(target, on_event or discard, run_id, accept_changes=accept_changes,
                                    abort=cancel, accept_unavailable=accepted, stop_after=stop_after,
                                    deferring=defer, take_over=take_over))


def run_of(cluster: str | None = None, *, origin: str, config: str | Path | None = None,
           cluster_keys: Mapping[str, Any] | None = None) -> tuple[str, str] | None:
    """The newest run a scheduler's task (``origin``) started on the cluster, and its state (None: none):
    a retried task resumes its own run instead of starting another."""
    from orchestrator.restart import journal as journals

    target = _target(cluster, config, cluster_keys=cluster_keys)
    journal = journals.started_by(target.name, origin)
    return None if journal is None else (journal.run_id, journal.state.value)


def summary(cluster: str | None = None, *, run_id: str, config: str | Path | None = None,
            cluster_keys: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A run's summary (`--json`'s last line), whatever its state: for a scheduler's task that finds its
    run already finished, or stopped after `stop_after` batches."""
    from orchestrator.restart import journal as journals
    from orchestrator.runs.status import summary as run_summary

    target = _target(cluster, config, cluster_keys=cluster_keys)
    journal = journals.latest(target.name, run_id)
    if journal is None:
        from orchestrator.errors import JournalError

        raise JournalError(f"no run {run_id} for cluster {target.name}")
    return run_summary(journal)


def watcher(cluster: str | None = None, *, run_id: str, config: str | Path | None = None,
            cluster_keys: Mapping[str, Any] | None = None) -> Any:
    """A `runs.watch.Watcher` of a deferred run: its `look()` says whether the run's wait is over (for a
    scheduler's trigger, one look per poll; it keeps the run's lock alive)."""
    from orchestrator.runs.watch import Watcher

    return Watcher(_target(cluster, config, cluster_keys=cluster_keys), run_id)


def status(cluster: str | None = None, *, config: str | Path | None = None) -> dict[str, Any]:
    """Health, the last run, a pause asked, the lock and pending temporary settings (`status --json`)."""
    from orchestrator.runs.status import status as cluster_status

    return cluster_status(_target(cluster, config))


def forcemerge(cluster: str | None = None, *, config: str | Path | None = None, indices: str,
               max_segments: int = 5, concurrency: int = 2, include_write_indices: bool = False,
               on_event: EventCallback | None = None, cluster_keys: Mapping[str, Any] | None = None) -> Any:
    """Force-merge indices no longer written to (`orchestrate forcemerge`); returns the merge report
    (`outcome`: success, partial or failure; `results` per index, `failures()` naming each
    failed merge with its error). Chain `restart` after a success."""
    from orchestrator.forcemerge.cluster import shard_cluster
    from orchestrator.forcemerge.run import plan_merges, run_merges

    if not 1 <= max_segments <= 100 or not 1 <= concurrency <= 16:
        from orchestrator.errors import ConfigError

        raise ConfigError("forcemerge", ["max_segments must be 1-100 and concurrency 1-16"])
    target = _target(cluster, config, cluster_keys=cluster_keys)
    es = shard_cluster(target.cluster, target.name, target.product.name)
    decisions = plan_merges(es, indices, max_segments, include_write_indices)
    return run_merges(es, decisions, max_segments, concurrency, on_event or discard)


def tune(cluster: str | None = None, *, config: str | Path | None = None, apply: bool = False,
         nodes: Sequence[str] = ()) -> list[Any]:
    """Check (or with ``apply`` fix and persist) the tuning profile on each node's host; one report per
    node (`drift`, `knobs`, `applied`, `error`), as `orchestrate tune --json`."""
    from orchestrator.config.inventory import load_inventory
    from orchestrator.hosts.transport import make_transport
    from orchestrator.tuning.apply import for_nodes, run_all

    inv, _ = load_inventory(cluster, Path(config) if config is not None else None)
    targets = for_nodes(inv, tuple(nodes))
    transport = make_transport(inv)
    try:
        return list(run_all(inv, transport, targets, apply=apply))
    finally:
        transport.close()
