"""A cluster's REST API as the shared adapter sees it: one JSON request at a time, errors already
translated for the operator.

Elasticsearch and OpenSearch answer the same paths for everything a rolling restart needs, but each
has its own client (elasticsearch-py refuses OpenSearch servers by design). Each product plug-in
provides a `Rest` over its client (es/connect.py, opensearch/connect.py); the adapter above it
(shards/adapter.py) knows neither client.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol
from urllib.parse import quote

from orchestrator.errors import ClusterError


class HttpError(ClusterError):
    """The cluster answered with an HTTP error status. ``body`` is its parsed answer (a 408 of a
    server-side wait that timed out carries the health as usual)."""

    def __init__(self, message: str, status: int, body: Any = None) -> None:
        super().__init__(message)
        self.status = status
        self.body = body


class WrongProduct(ClusterError):
    """The server is another product than the client's (Elasticsearch vs OpenSearch): the inventory's
    `cluster.product` is wrong, and the message says which to set."""


class Rest(Protocol):
    endpoints: tuple[str, ...]
    label: str  # the product's name in messages: "Elasticsearch", "OpenSearch"

    def request(self, what: str, method: str, path: str, params: Mapping[str, Any] | None = None,
                body: Any = None) -> Any:
        """The parsed JSON answer. Raises HttpError for an error status, ClusterUnreachable when no
        endpoint answers; ``what`` says what was being done, for the message."""
        ...


def short(exc: Exception) -> str:
    """A client error's text, cut for a message."""
    text = str(exc)
    return text if len(text) < 300 else text[:300] + "..."


def part(*names: str) -> str:
    """Index or node names as one path part, each quoted (a name is never a path of its own)."""
    return ",".join(quote(n, safe="*") for n in names)


def flag(value: bool) -> str:
    return "true" if value else "false"
