"""Where and how to reach an Elasticsearch or OpenSearch cluster, from an inventory's `cluster:`
section, secrets resolved. Each product builds its own client from it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from orchestrator.config.model import ClusterSection, Inventory
from orchestrator.errors import ConfigError


@dataclass(frozen=True)
class Connection:
    """Where and how to reach a cluster. Secrets are resolved before this is built, never logged."""

    endpoints: tuple[str, ...]
    ca_file: str | None = None
    verify_certs: bool = True
    username: str | None = None
    password: str | None = None
    api_key: str | None = None
    request_timeout_s: float = 30.0

    def __repr__(self) -> str:  # never show secrets, even in a traceback
        return f"Connection(endpoints={self.endpoints!r}, ca_file={self.ca_file!r})"


def connection(inv: Inventory) -> Connection:
    """The inventory's connection settings, secrets resolved (every problem reported at once)."""
    return connection_of(inv.cluster)


def connection_of(c: ClusterSection) -> Connection:
    """A cluster section's connection settings (also `inventory discover`'s, before any inventory exists)."""
    problems = []
    password = api_key = None
    for label, source in (("cluster.password", c.password), ("cluster.api_key", c.api_key)):
        if source is not None:
            try:
                value = source.resolve()
            except ValueError as exc:
                problems.append(f"{label}: {exc}")
                continue
            if label == "cluster.password":
                password = value
            else:
                api_key = value
    if c.ca_file is not None and not Path(c.ca_file).is_file():
        problems.append(f"cluster.ca_file: {c.ca_file} is not a file (missing, or a directory, device or pipe)")
    if problems:
        raise ConfigError("inventory", problems)
    return Connection(endpoints=tuple(c.endpoints), ca_file=str(c.ca_file) if c.ca_file else None,
                      verify_certs=c.verify_certs, username=c.username, password=password, api_key=api_key,
                      request_timeout_s=c.request_timeout_s)
