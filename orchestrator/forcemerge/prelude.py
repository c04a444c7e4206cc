"""A force-merge as the prelude of a restart (`forcemerge --then-restart`): one journaled run.

Merged indices are skipped on resume (they are at the target already); a failed merge stops the
run before any node is touched.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from orchestrator.errors import Aborted, JournalError, UnsafeToProceed
from orchestrator.forcemerge.cluster import shard_cluster
from orchestrator.forcemerge.run import plan_merges, run_merges
from orchestrator.restart.context import RunContext

NAME = "forcemerge"


@dataclass(frozen=True)
class MergeRequest:
    """What the journal records of the force-merge (its `prelude.forcemerge`), so that `resume` merges
    the same."""

    indices: str
    max_segments: int
    concurrency: int
    include_write_indices: bool

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, raw: Any) -> MergeRequest:
        try:
            request = cls(**raw)
        except TypeError as exc:
            raise JournalError(f"the journal's force-merge request is not one this version wrote: {exc}") from None
        kinds = {"indices": str, "max_segments": int, "concurrency": int, "include_write_indices": bool}
        wrong = [k for k, kind in kinds.items() if type(getattr(request, k)) is not kind]
        if wrong:
            raise JournalError(f"the journal's force-merge request has a wrong {', '.join(wrong)}")
        return request


def prelude_of(request: MergeRequest) -> dict[str, dict[str, Any]]:
    """A run's prelude (`runs.restart.start`) that force-merges before batch 1."""
    return {NAME: request.to_json()}


def run_prelude(ctx: RunContext) -> None:
    cluster = shard_cluster(ctx.cluster, ctx.journal.cluster, ctx.journal.product)
    wanted = MergeRequest.from_json(ctx.journal.spec.prelude[NAME])
    decisions = plan_merges(cluster, wanted.indices, wanted.max_segments, wanted.include_write_indices)
    report = run_merges(cluster, decisions, wanted.max_segments, wanted.concurrency, ctx.emit,
                        should_stop=lambda: ctx.abort.requested)
    if report.outcome == "failure":
        raise UnsafeToProceed("force-merge failed; the restart did not start", resume="tries again")
    if ctx.abort.requested:
        raise Aborted("stopped by the operator during the force-merge")
    ctx.journal.prelude_done(NAME, report.to_json())


PRELUDES = {NAME: run_prelude}
