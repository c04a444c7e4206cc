"""What a force-merge asks of a shard cluster (forcemerge/ decides): indices and their segments, aliases
and data streams (which indices are still written to), indexing activity, the merge as a task."""

from __future__ import annotations

from typing import Any

from orchestrator.errors import ClusterError
from orchestrator.shards.answers import shaped
from orchestrator.shards.requests import ShardRequests
from orchestrator.shards.rest import HttpError, part


class MergeRequests(ShardRequests):

    # --- force-merge (orchestrator.forcemerge) --------------------------------------------------
    def indices(self, pattern: str) -> dict[str, Any]:
        """Open indices matching ``pattern``, with their settings."""
        with shaped(f"resolve {pattern}"):
            return dict(self._do(f"resolve {pattern}", "GET", f"/{part(*pattern.split(','))}/_settings", {
                "expand_wildcards": "open", "ignore_unavailable": "true", "allow_no_indices": "true"}))

    def segments(self, indices: list[str]) -> list[dict[str, Any]]:
        with shaped("count segments"):
            return list(self._do("count segments", "GET", f"/_cat/segments/{part(*indices)}",
                                 {"format": "json", "h": "index,shard,prirep,ip,segment"}))

    def refresh(self, indices: list[str]) -> None:
        self._do("refresh", "POST", f"/{part(*indices)}/_refresh", {"ignore_unavailable": "true"})

    def aliases(self, indices: list[str]) -> dict[str, Any]:
        with shaped("read aliases"):
            return dict(self._do("read aliases", "GET", f"/{part(*indices)}/_alias", {"ignore_unavailable": "true"}))

    def data_streams(self) -> list[dict[str, Any]]:
        """Every data stream; none where the cluster has no data streams module (the sandbox)."""
        try:
            with shaped("read data streams"):
                return list(self._do("read data streams", "GET", "/_data_stream/*").get("data_streams", []))
        except ClusterError:
            return []

    def indexing_stats(self, indices: list[str]) -> dict[str, Any]:
        with shaped("read indexing stats"):
            return dict(self._do("read indexing stats", "GET", f"/{part(*indices)}/_stats/indexing,docs")
                        .get("indices", {}))

    def start_forcemerge(self, index: str, max_segments: int) -> str:
        """Start a force-merge as a task and return its id: no request stays open for the merge's length."""
        what = f"start force-merge of {index}"
        body = self._do(what, "POST", f"/{part(index)}/_forcemerge",
                        {"max_num_segments": max_segments, "wait_for_completion": "false"})
        with shaped(what):
            return str(body["task"])

    def task(self, task_id: str) -> dict[str, Any] | None:
        """The task's status; None when it is no longer known (it completed and was forgotten)."""
        try:
            with shaped(f"follow task {task_id}"):
                return dict(self._do(f"follow task {task_id}", "GET", f"/_tasks/{part(task_id)}"))
        except HttpError as exc:
            if exc.status == 404:
                return None
            raise
