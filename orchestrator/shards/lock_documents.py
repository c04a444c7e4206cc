"""The run lock of a shard cluster: one document in a hidden index, created only if absent, read by id
(real-time), renewed only by the run that holds it (restart/lock.py decides; this stores)."""

from __future__ import annotations

from typing import Any

from orchestrator.shards.answers import Document, not_its_shape, parsed
from orchestrator.shards.requests import ShardRequests, no_handler
from orchestrator.shards.rest import HttpError, part


class LockDocuments(ShardRequests):

    def cluster_identity(self) -> str | None:
        """The cluster's UUID, which the copy of a run's journal names: from `GET /`, or where that is not served
        (a node without the rest-root module), from the cluster state's metadata, filtered down to it."""
        what = "read the cluster's UUID"
        try:
            answer = self._do(what, "GET", "/")
        except HttpError as exc:
            if not no_handler(exc):
                raise
            answer = (self._do(what, "GET", "/_cluster/state/metadata", {"filter_path": "metadata.cluster_uuid"})
                      or {}).get("metadata") or {}
        uuid = answer.get("cluster_uuid") if isinstance(answer, dict) else None
        if not isinstance(uuid, str) or not uuid:
            # An answer without the UUID is the cluster's error, never "no identity": the copy's check would go.
            raise not_its_shape(what, "no cluster_uuid")
        # "_na_": a node that has not joined a cluster yet.
        return uuid[:100] if uuid != "_na_" else None

    def _lock_index(self, index: str) -> None:
        """The lock's index, created once with its settings: a write to a missing index would create it plain."""
        try:
            # Hidden: not in index patterns, wildcard searches or `_cat/indices/*`.
            self._do("take the run lock", "PUT", f"/{part(index)}", body={"settings": {
                "number_of_shards": 1, "auto_expand_replicas": "0-all", "index.hidden": True}})
        except HttpError as exc:
            if "resource_already_exists" not in str(exc.body):
                raise

    def create_lock(self, index: str, doc_id: str, body: dict[str, Any]) -> bool:
        """Create the lock document; False when it already exists (someone else holds it)."""
        self._lock_index(index)
        # No refresh: the lock is only ever read by id, and a read by id is real-time.
        try:
            self._do("take the run lock", "PUT", f"/{part(index)}/_create/{part(doc_id)}", None, body)
        except HttpError as exc:
            if exc.status == 409:
                return False
            raise
        return True

    def read_lock(self, index: str, doc_id: str) -> dict[str, Any] | None:
        what = "read the run lock"
        try:
            return parsed(Document, self._do(what, "GET", f"/{part(index)}/_doc/{part(doc_id)}"), what).source
        except HttpError as exc:
            if exc.status == 404:
                return None
            raise

    def delete_lock(self, index: str, doc_id: str) -> None:
        try:
            self._do("release the run lock", "DELETE", f"/{part(index)}/_doc/{part(doc_id)}")
        except HttpError as exc:
            if exc.status != 404:
                raise

    def write_lock_document(self, index: str, doc_id: str, body: dict[str, Any]) -> None:
        if index not in self._lock_indices_seen:  # the lock's index is there while its run goes on
            self._lock_index(index)
            self._lock_indices_seen.add(index)
        self._do("copy the run's journal", "PUT", f"/{part(index)}/_doc/{part(doc_id)}", None, body)

    def renew_lock(self, index: str, doc_id: str, run_id: str, update: dict[str, Any]) -> bool:
        path = f"/{part(index)}/_doc/{part(doc_id)}"
        what = "renew the run lock"
        try:
            found = parsed(Document, self._do(what, "GET", path), what)
            if found.source.get("run_id") != run_id:
                return False
            # Written only if nobody changed the lock since it was read (a takeover, say).
            self._do(what, "PUT", path, {"if_seq_no": found.seq_no, "if_primary_term": found.primary_term},
                     {**found.source, **update})
        except HttpError as exc:
            if exc.status in (404, 409):
                return False
            raise
        return True
