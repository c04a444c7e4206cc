"""Building an elasticsearch-py client from connection settings, and translating its errors."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import elasticsearch
from elastic_transport import ConnectionError as TransportConnectionError
from elastic_transport import ConnectionTimeout, TlsError

from orchestrator.config.model import ClusterSection, Inventory
from orchestrator.errors import ClusterError, ClusterUnreachable, ConfigError


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
    awareness_attribute: str = "zone"  # the node attribute read as a node's zone

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
        problems.append(f"cluster.ca_file: {c.ca_file} not found")
    if problems:
        raise ConfigError("inventory", problems)
    return Connection(endpoints=tuple(c.endpoints), ca_file=str(c.ca_file) if c.ca_file else None,
                      verify_certs=c.verify_certs, username=c.username, password=password, api_key=api_key,
                      request_timeout_s=c.request_timeout_s, awareness_attribute=c.awareness_attribute)


def make_client(conn: Connection) -> elasticsearch.Elasticsearch:
    kwargs: dict[str, Any] = {
        "request_timeout": conn.request_timeout_s,
        # A connection error moves on to the next endpoint: during a restart one of them is down.
        # Timeouts are not retried: a slow cluster should not see the same write twice.
        "retry_on_timeout": False,
        "max_retries": max(len(conn.endpoints) - 1, 0),
    }
    if conn.ca_file:
        kwargs["ca_certs"] = conn.ca_file
    if not conn.verify_certs:
        kwargs["verify_certs"] = False
    if conn.api_key:
        kwargs["api_key"] = conn.api_key
    elif conn.username is not None:
        kwargs["basic_auth"] = (conn.username, conn.password or "")
    return elasticsearch.Elasticsearch(list(conn.endpoints), **kwargs)


@contextmanager
def translated(what: str, endpoints: tuple[str, ...]) -> Iterator[None]:
    """Turn elasticsearch-py errors into the orchestrator's, with a message for the operator."""
    where = ", ".join(endpoints)
    try:
        yield
    except TlsError as exc:
        raise ClusterUnreachable(
            f"{what}: the TLS certificate of {where} is not trusted ({_short(exc)}). "
            "Set cluster.ca_file to the CA that signed it.") from exc
    except ConnectionTimeout as exc:
        raise ClusterUnreachable(f"{what}: {where} did not answer in time ({_short(exc)})") from exc
    except TransportConnectionError as exc:
        raise ClusterUnreachable(f"{what}: cannot connect to {where} ({_short(exc)})") from exc
    except elasticsearch.AuthenticationException as exc:
        raise ClusterError(f"{what}: {where} refused the credentials (HTTP 401). "
                           "Check the user/password or API key source in the inventory.") from exc
    except elasticsearch.AuthorizationException as exc:
        raise ClusterError(f"{what}: the user is not allowed to do this (HTTP 403): {_reason(exc)}") from exc
    except elasticsearch.ApiError as exc:
        raise ClusterError(f"{what}: Elasticsearch answered HTTP {exc.meta.status}: {_reason(exc)}") from exc
    except elasticsearch.UnsupportedProductError as exc:
        raise ClusterError(f"{what}: {where} is not an Elasticsearch 8.x/9.x cluster ({exc})") from exc


def _short(exc: Exception) -> str:
    text = str(exc)
    return text if len(text) < 300 else text[:300] + "..."


def _reason(exc: elasticsearch.ApiError) -> str:
    body = exc.body if isinstance(exc.body, dict) else {}
    err = body.get("error")
    if isinstance(err, dict):
        return str(err.get("reason") or err.get("type") or exc.message)
    return str(err or exc.message)


def call(what: str, conn: Connection, fn: Callable[[], Any]) -> Any:
    with translated(what, conn.endpoints):
        return fn()
