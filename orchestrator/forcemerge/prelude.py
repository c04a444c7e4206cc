"""A force-merge as the prelude of a restart (`forcemerge --then-restart`): one journaled run.

Merged indices are skipped on resume (they are at the target already); a failed merge stops the
run before any node is touched.
"""

from __future__ import annotations

from orchestrator.errors import Aborted, UnsafeToProceed
from orchestrator.forcemerge.cluster import shard_cluster
from orchestrator.forcemerge.run import plan_merges, run_merges
from orchestrator.restart.context import RunContext

NAME = "forcemerge"


def spec(indices: str, max_segments: int, concurrency: int, include_write_indices: bool) -> dict[str, object]:
    """What the journal records of the force-merge, so that `resume` merges the same."""
    return {"indices": indices, "max_segments": max_segments, "concurrency": concurrency,
            "include_write_indices": include_write_indices}


def run_prelude(ctx: RunContext) -> None:
    cluster = shard_cluster(ctx.cluster, ctx.journal.cluster, ctx.journal.product)
    wanted = ctx.journal.spec.prelude[NAME]
    decisions = plan_merges(cluster, str(wanted["indices"]), int(wanted["max_segments"]),
                            bool(wanted["include_write_indices"]))
    report = run_merges(cluster, decisions, int(wanted["max_segments"]), int(wanted["concurrency"]), ctx.emit,
                        should_stop=lambda: ctx.abort.requested)
    if report.outcome == "failure":
        raise UnsafeToProceed("force-merge failed; the restart did not start. `orchestrate resume` tries again")
    if ctx.abort.requested:
        raise Aborted("stopped by the operator during the force-merge")
    ctx.journal.prelude_done(NAME, report.to_json())


PRELUDES = {NAME: run_prelude}
