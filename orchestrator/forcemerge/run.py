"""Running force-merges: bounded concurrency, each merge a task that is polled, progress per index."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from orchestrator.errors import OrchestratorError, PreflightFailed
from orchestrator.forcemerge import cluster
from orchestrator.forcemerge.decide import Decision, Verdict, decide
from orchestrator.restart.events import Event, EventSink
from orchestrator.retry import Clock
from orchestrator.shards import privileges
from orchestrator.shards.adapter import ShardClusterAdapter


@dataclass
class MergeResult:
    index: str
    verdict: str
    reason: str
    segments_before: int
    segments_after: int | None = None
    seconds: float | None = None
    error: str | None = None


@dataclass
class MergeReport:
    results: list[MergeResult] = field(default_factory=list)

    @property
    def outcome(self) -> str:
        merged = [r for r in self.results if r.verdict == Verdict.MERGE]
        failed = [r for r in merged if r.error]
        if failed and len(failed) == len(merged):
            return "failure"
        return "partial" if failed else "success"

    def failures(self) -> str:
        """The merges that failed, each index with its error: what a failure message names."""
        return "; ".join(f"{r.index}: {r.error}" for r in self.results if r.error)

    def to_json(self) -> dict[str, Any]:
        return {"result": self.outcome, "indices": [asdict(r) for r in self.results],
                "merged": sum(1 for r in self.results if r.verdict == Verdict.MERGE and not r.error),
                "skipped": sum(1 for r in self.results if r.verdict == Verdict.SKIP),
                "refused": sum(1 for r in self.results if r.verdict == Verdict.REFUSE),
                "failed": sum(1 for r in self.results if r.error)}


def plan_merges(es: ShardClusterAdapter, pattern: str, max_segments: int, include_write: bool,
                sample_s: float = 2.0) -> list[Decision]:
    # Without `view_index_metadata` the cluster hides aliases instead of refusing: a write index would
    # not be recognised as one. So the privileges are checked before anything is read.
    lacking = es.missing_privileges()
    if lacking:
        raise PreflightFailed([privileges.refusal(lacking)])
    facts = cluster.gather(es, pattern, sample_s)
    return [decide(f, max_segments, include_write) for f in facts]


def run_merges(es: ShardClusterAdapter, decisions: list[Decision], max_segments: int, concurrency: int,
               emit: EventSink, poll_s: float = 1.0, timeout_s: float = 6 * 3600,
               clock: Clock | None = None, should_stop: Callable[[], bool] | None = None) -> MergeReport:
    clock = clock or Clock()
    report = MergeReport()
    queue = [d for d in decisions if d.verdict is Verdict.MERGE]
    for d in decisions:
        if d.verdict is not Verdict.MERGE:
            report.results.append(MergeResult(d.index, d.verdict.value, d.reason, d.segments_before))
            emit(Event("skip" if d.verdict is Verdict.SKIP else "refuse", f"{d.index}: {d.verdict.value}: {d.reason}"))
    running: dict[str, tuple[Decision, float, MergeResult]] = {}
    deadline = clock.monotonic() + timeout_s
    while queue or running:
        while queue and len(running) < concurrency and not (should_stop and should_stop()):
            d = queue.pop(0)
            result = MergeResult(d.index, d.verdict.value, d.reason, d.segments_before)
            report.results.append(result)
            try:
                task = cluster.start_merge(es, d.index, max_segments)
            except OrchestratorError as exc:
                result.error = str(exc)
                emit(Event("merge", f"{d.index}: could not start: {exc}"))
                continue
            running[task] = (d, clock.monotonic(), result)
            emit(Event("merge", f"{d.index}: merging {d.segments_before} -> <= {max_segments} segments per shard",
                       data={"index": d.index, "task": task}))
        if not running:
            break
        clock.sleep(poll_s)
        for task in list(running):
            d, started, result = running[task]
            try:
                done, error = cluster.task_state(es, task)
            except OrchestratorError as exc:
                done, error = False, None
                emit(Event("warning", f"{d.index}: could not read its task, will ask again: {exc}"))
            if clock.monotonic() > deadline:
                done, error = True, f"still merging after {timeout_s:.0f} s; the merge goes on in the cluster"
            if not done:
                continue
            del running[task]
            result.seconds = round(clock.monotonic() - started, 2)
            result.error = error
            if error is None:
                # A refresh first: until one, OpenSearch lists the merged-away segments beside the new one.
                es.refresh([d.index])
                result.segments_after = cluster.segments_per_shard(es, [d.index]).get(d.index)
            emit(Event("merge", f"{d.index}: {'FAILED: ' + error if error else 'done'} in {result.seconds:.1f} s"
                                f"{'' if error else f', {d.segments_before} -> {result.segments_after} segments'}",
                       data=asdict(result)))
        if should_stop and should_stop() and not running:
            break
    return report

