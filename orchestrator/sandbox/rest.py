"""The sandbox's own requests to its cluster, through the product's client (Elasticsearch or OpenSearch)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from orchestrator.shards.connection import Connection
from orchestrator.shards.rest import Rest


@dataclass(frozen=True)
class SandboxAccess:
    """How the sandbox's own tools reach a secured sandbox: its CA and the `elastic` superuser.
    Empty for an insecure one (plain HTTP, no users)."""

    ca_file: str | None = None
    username: str | None = None
    password: str | None = None

    def __repr__(self) -> str:  # never show the password
        return f"SandboxAccess(ca_file={self.ca_file!r}, username={self.username!r})"


INSECURE = SandboxAccess()


def access_of(info: Mapping[str, Any]) -> SandboxAccess:
    """The superuser's access, from what `sandbox status --json` says (its password read from its file)."""
    if not info.get("ca_file"):
        return SandboxAccess()
    return SandboxAccess(info["ca_file"], info["username"], Path(info["password_file"]).read_text().strip())


class ClosableRest(Rest, Protocol):
    def close(self) -> None: ...


def rest_for(product: str, endpoints: Sequence[str], timeout_s: float = 10,
             access: SandboxAccess = INSECURE) -> ClosableRest:
    conn = Connection(endpoints=tuple(endpoints), request_timeout_s=timeout_s, ca_file=access.ca_file,
                      username=access.username, password=access.password)
    if product == "opensearch":
        from orchestrator.opensearch.connect import OpenSearchRest

        return OpenSearchRest(conn)
    from orchestrator.es.connect import ElasticsearchRest

    return ElasticsearchRest(conn)
