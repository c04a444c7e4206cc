"""The requests of an adapter of the shard model, whichever client its `Rest` uses: each goes through
`_do` (counted for the run's figures; a credential refused after it was accepted is read as a cluster
without an elected master), and the two reads every part of the adapter uses (health, settings). The
adapter (shards/adapter.py) is this with its parts: the run lock, facts read once, force-merge."""

from __future__ import annotations

import threading
from typing import Any

from orchestrator.errors import ClusterUnreachable
from orchestrator.retry import within
from orchestrator.shards.answers import Health, Settings, not_its_shape, parsed
from orchestrator.shards.rest import HttpError, Rest, flag


def no_handler(exc: HttpError) -> bool:
    """The cluster has no such API (a module or plugin it lacks): "no handler found" (400/404), or 405
    where another handler owns the path for other methods."""
    return exc.status == 405 or (exc.status in (400, 404) and "no handler found" in str(exc))


def credentials_unverifiable(what: str) -> str:
    """Why credentials accepted earlier are refused now: without an elected master (two of three
    master-eligible nodes away, say) the security index cannot be read, so users of the native realm
    and API keys are refused (HTTP 401) until a master is elected again. Waits treat this as the
    cluster being briefly unreachable, not as wrong credentials."""
    return (f"{what}: the cluster refused (HTTP 401) the credentials it accepted earlier in this run; most "
            "likely it has no elected master, so it cannot read its security index (or the credentials were "
            "revoked or expired meanwhile)")


class ShardRequests:
    """A cluster of the shard model (Elasticsearch, OpenSearch), as requests."""

    def __init__(self, rest: Rest, awareness_attribute: str = "zone") -> None:
        self.rest = rest
        self.awareness_attribute = awareness_attribute  # the node attribute read as a node's zone
        self.calls = 0  # requests made, for the run's figures
        self._counting = threading.Lock()
        self._credentials_accepted = False
        self._lock_indices_seen: set[str] = set()  # the lock's index, made sure of once (lock_documents.py)

    @property
    def label(self) -> str:
        return self.rest.label

    def _do(self, what: str, method: str, path: str, params: dict[str, Any] | None = None,
            body: Any = None) -> Any:
        with self._counting:  # requests are made from several threads (snapshots, zone batches, the lock)
            self.calls += 1
        deadline = getattr(self.rest, "deadline_s", None)  # a `Rest` of a test may have none

        def ask() -> Any:
            return self.rest.request(what, method, path, params, body)

        try:
            answer = within(deadline, ask, f"{what}: {self.label} did not answer within {deadline:.0f} s in all") \
                if deadline else ask()
        except HttpError as exc:
            if exc.status == 401 and self._credentials_accepted:
                raise ClusterUnreachable(credentials_unverifiable(what)) from exc
            raise
        except RecursionError:  # the client's JSON parser, on an answer nested past what any answer holds
            raise not_its_shape(what, "nested past what any answer holds") from None
        self._credentials_accepted = True
        return answer

    # --- reads -------------------------------------------------------------------------------
    def health(self, wait_for_status: str | None = None, timeout_s: float | None = None,
               wait_for_nodes: str | None = None, until_still: bool = False) -> dict[str, Any]:
        """Cluster health; with ``wait_for_status`` or ``wait_for_nodes`` a server-side wait, and with
        ``until_still`` that wait also lasts until no shard is initializing or relocating."""
        kwargs: dict[str, Any] = {}
        if wait_for_status:
            kwargs["wait_for_status"] = wait_for_status
        if wait_for_nodes:
            kwargs["wait_for_nodes"] = wait_for_nodes
        if timeout_s is not None:
            kwargs["timeout"] = f"{max(int(timeout_s), 1)}s"
        if wait_for_status or wait_for_nodes:
            # A server-side wait answers 408 with a body when it times out: not an error for us.
            kwargs["wait_for_no_initializing_shards"] = until_still
            if until_still:
                kwargs["wait_for_no_relocating_shards"] = True
            kwargs = {k: flag(v) if isinstance(v, bool) else v for k, v in kwargs.items()}
            try:
                return health_of(self._do("cluster health", "GET", "/_cluster/health", kwargs))
            except HttpError as exc:
                if exc.status == 408 and isinstance(exc.body, dict):
                    return health_of(exc.body)
                raise
        return health_of(self._do("cluster health", "GET", "/_cluster/health", kwargs))

    def cluster_settings(self, include_defaults: bool = False) -> tuple[dict[str, Any], ...]:
        """(persistent, transient), and the defaults in force (node settings included) when asked."""
        what = "read cluster settings"
        raw = parsed(Settings, self._do(what, "GET", "/_cluster/settings",
                                        {"flat_settings": "true", "include_defaults": flag(include_defaults)}), what)
        found = dict(raw.persistent), dict(raw.transient)
        return (*found, dict(raw.defaults)) if include_defaults else found


def health_of(raw: Any) -> dict[str, Any]:
    return parsed(Health, raw, "cluster health").model_dump()
