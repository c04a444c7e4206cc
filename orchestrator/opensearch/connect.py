"""OpenSearch's client: opensearch-py built from the connection settings, its errors translated, and
the `Rest` the shared adapter (shards/adapter.py) sends its requests through.

opensearch-py does not check which server answers; this does, on the first request, so an inventory
that names the wrong product fails with a clear error before anything is read or changed.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import opensearchpy

from orchestrator.errors import ClusterUnreachable, ConfigError, WrongProduct
from orchestrator.shards.connection import Connection
from orchestrator.shards.rest import (
    DEADLINE_TIMEOUTS,
    HttpError,
    answered,
    client_logs,
    error_page,
    plain_reason,
    short,
    tls_failure,
)


class MeasuredConnection(opensearchpy.Urllib3HttpConnection):
    """opensearch-py's connection, noting each answer's size for the run's audit log (`answered`) before it
    logs the request."""

    def log_request_success(self, method: str, full_url: str, path: str, body: Any, status_code: int,
                            response: str, duration: float) -> None:
        answered(len(response.encode("utf-8", "surrogatepass")) if isinstance(response, str) else len(response))
        super().log_request_success(method, full_url, path, body, status_code, response, duration)


def make_client(conn: Connection) -> opensearchpy.OpenSearch:
    client_logs("opensearch")  # where opensearch-py logs each request, a failed one with its traceback
    if conn.api_key:
        raise ConfigError("inventory", ["cluster.api_key: OpenSearch takes a user and password "
                                        "(cluster.username, cluster.password), not an Elasticsearch API key"])
    kwargs: dict[str, Any] = {
        "timeout": conn.request_timeout_s,
        # As for Elasticsearch: a connection error moves on to the next endpoint, a timeout is not retried.
        "retry_on_timeout": False,
        "max_retries": max(len(conn.endpoints) - 1, 0),
        "verify_certs": conn.verify_certs,
        "ssl_show_warn": conn.verify_certs,
        "pool_maxsize": 4,  # the run's lock is renewed from a thread of its own
        "connection_class": MeasuredConnection,
    }
    if conn.ca_file:
        kwargs["ca_certs"] = conn.ca_file
    if conn.username is not None:
        kwargs["http_auth"] = (conn.username, conn.password or "")
    return opensearchpy.OpenSearch(list(conn.endpoints), **kwargs)


@contextmanager
def translated(what: str, endpoints: tuple[str, ...]) -> Iterator[None]:
    """Turn opensearch-py errors into the orchestrator's, with a message for the operator."""
    where = ", ".join(endpoints)
    try:
        yield
    except opensearchpy.SSLError as exc:
        raise ClusterUnreachable(f"{tls_failure(where, short(exc))} (while: {what})") from exc
    except opensearchpy.ConnectionTimeout as exc:
        raise ClusterUnreachable(f"{where} did not answer in time ({plain_reason(str(exc))}; while: {what})") \
            from exc
    except opensearchpy.ConnectionError as exc:
        raise ClusterUnreachable(f"cannot connect to {where}: {plain_reason(str(exc))} (nothing listens there, or a "
                                 f"firewall; while: {what})") from exc
    except opensearchpy.AuthenticationException as exc:
        raise HttpError(f"{what}: {where} refused the credentials (HTTP 401). "
                        "Check the user/password source in the inventory.", 401, exc.info) from exc
    except opensearchpy.TransportError as exc:
        status = exc.status_code if isinstance(exc.status_code, int) else 0
        # opensearch-py keeps a body that is not JSON in `info`, or, without one, in `error`
        page = None if isinstance(exc.info, dict) else \
            error_page(exc.info, "OpenSearch") or error_page(exc.error, "OpenSearch")
        said = f"{where} answered HTTP {status} with {page}" if page else \
            f"OpenSearch answered HTTP {status}: {_reason(exc)}"
        raise HttpError(f"{what}: {said}", status, exc.info) from exc


def _reason(exc: opensearchpy.TransportError) -> str:
    info = exc.info if isinstance(exc.info, dict) else {}
    err = info.get("error")
    if isinstance(err, dict):
        return str(err.get("reason") or err.get("type") or exc.error)
    return str(err or exc.error)


class OpenSearchRest:
    """The shared adapter's requests, sent with opensearch-py, to a server checked to be OpenSearch."""

    label = "OpenSearch"

    def __init__(self, conn: Connection, client: opensearchpy.OpenSearch | None = None) -> None:
        self.endpoints = conn.endpoints
        self.deadline_s = conn.request_timeout_s * DEADLINE_TIMEOUTS
        self.client = client or make_client(conn)
        self.timeout_s = conn.request_timeout_s
        self.checked = False

    def request(self, what: str, method: str, path: str, params: Mapping[str, Any] | None = None,
                body: Any = None) -> Any:
        if not self.checked:
            self.check_product(what)
        with translated(what, self.endpoints):
            # The timeout given here, always: without it opensearch-py would take a `timeout` query
            # parameter (a server-side wait's) as the request's own.
            return self.client.transport.perform_request(method, path, params=dict(params or {}), body=body,
                                                         timeout=self.timeout_s)

    def close(self) -> None:
        self.client.close()  # as ElasticsearchRest.close

    def check_product(self, what: str) -> None:
        with translated(what, self.endpoints):
            info = self.client.transport.perform_request("GET", "/", timeout=self.timeout_s)
        version = info.get("version") if isinstance(info, dict) else None
        distribution = version.get("distribution") if isinstance(version, dict) else None
        if distribution != "opensearch":
            number = version.get("number", "?") if isinstance(version, dict) else "?"
            raise WrongProduct(f"{what}: {', '.join(self.endpoints)} is not OpenSearch (it says version {number}"
                               f"{', ' + str(distribution) if distribution else ', Elasticsearch'}); for an "
                               "Elasticsearch cluster, set cluster.product: elasticsearch in the inventory")
        self.checked = True
