"""Elasticsearch's client: elasticsearch-py built from the connection settings, its errors translated,
and the `Rest` the shared adapter (shards/adapter.py) sends its requests through."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import elasticsearch
from elastic_transport import ConnectionError as TransportConnectionError
from elastic_transport import ConnectionTimeout, SerializationError, TlsError, Urllib3HttpNode
from elastic_transport._node import NodeApiResponse
from elasticsearch.serializer import OrjsonSerializer

from orchestrator.errors import ClusterUnreachable, WrongProduct
from orchestrator.shards.answers import not_its_shape
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


class MeasuredNode(Urllib3HttpNode):
    """elasticsearch-py's HTTP node, noting each answer's size for the run's audit log (`answered`)."""

    def perform_request(self, *args: Any, **kwargs: Any) -> NodeApiResponse:
        response = super().perform_request(*args, **kwargs)
        answered(len(response.body))
        return response


# Where elasticsearch-py logs a failed request (with its traceback) and a node it puts aside.
CLIENT_LOGGERS = ("elastic_transport.transport", "elastic_transport.node_pool")


def make_client(conn: Connection) -> elasticsearch.Elasticsearch:
    client_logs(*CLIENT_LOGGERS)
    kwargs: dict[str, Any] = {
        "node_class": MeasuredNode,
        # orjson: the search watch's read of every node's counters each interval is mostly JSON decoding (at
        # 3,000 nodes, half a megabyte; `bench_search_watch`)
        "serializer": OrjsonSerializer(),
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
    # Connection-level failures name the endpoint first: what was being asked matters less than where.
    except TlsError as exc:
        raise ClusterUnreachable(f"{tls_failure(where, detail(exc))} (while: {what})") from exc
    except ConnectionTimeout as exc:
        raise ClusterUnreachable(f"{where} did not answer in time ({detail(exc)}; while: {what})") from exc
    except TransportConnectionError as exc:
        raise ClusterUnreachable(f"cannot connect to {where}: {detail(exc)} (nothing listens there, or a "
                                 f"firewall; while: {what})") from exc
    except SerializationError as exc:
        if "deserialize" not in str(exc):  # a request body of ours it could not write: the tool's own fault
            raise
        # orjson reads JSON as RFC 8259 has it: no Infinity, no nesting past 1,024 levels
        raise not_its_shape(what, "not JSON, or nested past what any answer holds") from None
    except elasticsearch.UnsupportedProductError as exc:  # an ApiError: caught first
        page = error_page(exc.body, "Elasticsearch")
        raise WrongProduct(f"{what}: {where} is not an Elasticsearch 8.x/9.x cluster ("
                           f"{page or short(exc)}); for an OpenSearch cluster, set cluster.product: opensearch in "
                           "the inventory") from exc
    except elasticsearch.AuthenticationException as exc:
        raise HttpError(f"{what}: {where} refused the credentials (HTTP 401). "
                        "Check the user/password or API key source in the inventory; if they are right, the cluster "
                        "may have no elected master (without one it cannot check native users or API keys).", 401,
                        exc.body) from exc
    except elasticsearch.AuthorizationException as exc:
        if ROLES_NOT_FOUND.search(_reason(exc)):  # the security index unreadable for a moment: a master being
            # elected, or the index's primary moving; the user's roles are there again once it is (a role truly
            # missing is refused by the plan's reads first, and the run's waits give up in their own time)
            raise ClusterUnreachable(f"{what}: the cluster could not read the user's roles for a moment (HTTP 403: "
                                     f"{_reason(exc)})") from exc
        raise HttpError(f"{what}: the user is not allowed to do this (HTTP 403): {_reason(exc)}", 403,
                        exc.body) from exc
    except elasticsearch.ApiError as exc:
        page = error_page(exc.body, "Elasticsearch")
        said = f"{where} answered HTTP {exc.meta.status} with {page}" if page else \
            f"Elasticsearch answered HTTP {exc.meta.status}: {_reason(exc)}"
        raise HttpError(f"{what}: {said}", exc.meta.status, exc.body) from exc


# Elasticsearch's 403 when the roles a user is assigned cannot be read (its security index not available).
ROLES_NOT_FOUND = re.compile(r"assigned roles \[[^\]]*\] were not found")


def detail(exc: Exception) -> str:
    """The transport error's own words (its str() is a bare "TLS error" or "Connection error")."""
    return plain_reason(str(getattr(exc, "message", None) or exc))


def _reason(exc: elasticsearch.ApiError) -> str:
    body = exc.body if isinstance(exc.body, dict) else {}
    err = body.get("error")
    if isinstance(err, dict):
        return str(err.get("reason") or err.get("type") or exc.message)
    return str(err or exc.message)


class ElasticsearchRest:
    """The shared adapter's requests, sent with elasticsearch-py (which checks the server is Elasticsearch)."""

    label = "Elasticsearch"

    def __init__(self, conn: Connection, client: elasticsearch.Elasticsearch | None = None) -> None:
        self.endpoints = conn.endpoints
        self.deadline_s = conn.request_timeout_s * DEADLINE_TIMEOUTS
        self.client = client or make_client(conn)

    def request(self, what: str, method: str, path: str, params: Mapping[str, Any] | None = None,
                body: Any = None) -> Any:
        headers = {"accept": "application/json"}
        if body is not None:
            headers["content-type"] = "application/json"
        with translated(what, self.endpoints):
            answer = self.client.perform_request(method, path, params=dict(params or {}), headers=headers,
                                                 body=body)
        return answer.body

    def close(self) -> None:
        """Close the client's open connections (a caller that lives on, such as the sandbox's load, must not leave
        them to the garbage collector)."""
        self.client.close()
