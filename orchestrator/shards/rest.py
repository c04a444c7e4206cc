"""A cluster's REST API as the shared adapter sees it: one JSON request at a time, errors already
translated for the operator.

Elasticsearch and OpenSearch answer the same paths for everything a rolling restart needs, but each
has its own client (elasticsearch-py refuses OpenSearch servers by design). Each product plug-in
provides a `Rest` over its client (es/connect.py, opensearch/connect.py); the adapter above it
(shards/adapter.py) knows neither client.
"""

from __future__ import annotations

import logging
import re
import threading
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


# The client's timeout bounds each read, not a request: an answer trickling in a byte at a time (a broken
# proxy, a cluster in distress) would hold a run for ever. A request gets this many times the timeout in all.
DEADLINE_TIMEOUTS = 2


class Rest(Protocol):
    endpoints: tuple[str, ...]
    label: str  # the product's name in messages: "Elasticsearch", "OpenSearch"
    deadline_s: float  # the longest a request may take in all (DEADLINE_TIMEOUTS x the client's timeout)

    def request(self, what: str, method: str, path: str, params: Mapping[str, Any] | None = None,
                body: Any = None) -> Any:
        """The parsed JSON answer. Raises HttpError for an error status, ClusterUnreachable when no
        endpoint answers; ``what`` says what was being done, for the message."""
        ...


_answers = threading.local()


def answered(size: int) -> None:
    """Note the size of the answer the client just received in this thread (its own request log line, which
    the run's audit log keeps, says nothing of it)."""
    _answers.size = size


def last_answer_bytes() -> int | None:
    """The size of the answer this thread received last, once (None: none noted since)."""
    size: int | None = getattr(_answers, "size", None)
    _answers.size = None
    return size


class OneLine(logging.Filter):
    """A client's log record without its traceback, the exception's own line added to its message: a node
    the run stopped refuses connections, and that is worth a line, not a page of stack."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info:
            exc = record.exc_info[1]
            if exc is not None:
                record.msg, record.args = f"{record.getMessage()}: {type(exc).__name__}: {short(exc)}", None
            record.exc_info, record.exc_text = None, None
        return True


class WarningsOn(logging.Handler):
    """Hands a client's warnings and errors on to its logger's parents, as propagation would, and nothing
    below: its every request (INFO) is for the run's audit log and `-v`, which listen on the logger itself."""

    def __init__(self, logger: logging.Logger) -> None:
        super().__init__(logging.WARNING)
        self.logger = logger

    def emit(self, record: logging.LogRecord) -> None:
        if self.logger.parent is not None:
            self.logger.parent.handle(record)


def client_logs(*loggers: str) -> None:
    """What a client's ``loggers`` send on to the application's logging (an Airflow task's log, the terminal):
    its warnings, each one line, never its request log or a traceback. Once per logger."""
    for name in loggers:
        logger = logging.getLogger(name)
        if not any(isinstance(f, OneLine) for f in logger.filters):
            logger.addFilter(OneLine())
            logger.addHandler(WarningsOn(logger))
            logger.propagate = False


def short(exc: BaseException) -> str:
    """A client error's text, cut for a message."""
    text = str(exc)
    return text if len(text) < 300 else text[:300] + "..."


def plain_reason(text: str) -> str:
    """The words that matter in a client library's nested error (`ConnectionError(... SSLError([SSL: X]
    ...)) caused by ...`): the TLS or system error itself, where there is one."""
    found = re.search(r"\[SSL: [A-Z_]+\][^()\n]*|\[Errno -?\d+\][^()\n]*", text)
    return found.group().strip().rstrip(")") if found else short(Exception(text))


def tls_failure(where: str, detail: str) -> str:
    """What a failed TLS handshake means, and what to do, from the TLS library's words."""
    detail = plain_reason(detail)
    low = detail.lower()
    if any(w in low for w in ("wrong_version_number", "wrong version number", "record layer failure",
                              "http_request", "packet length too long")):
        return (f"{where} does not answer in TLS: it looks like plain HTTP there. Write the endpoint as "
                "http://, or turn TLS on for the cluster's HTTP layer")
    if "mismatch" in low or "doesn't match" in low or "not valid for" in low:
        return (f"the TLS certificate of {where} is not for that name ({detail}): use the name or address the "
                "certificate names in the endpoint")
    if "certificate verify failed" in low or "unable to get local issuer" in low or "self-signed" in low \
            or "self signed" in low:
        return (f"the TLS certificate of {where} is not trusted ({detail}): give the CA that signed it, as "
                "cluster.ca_file in the inventory (`inventory discover --ca-file`)")
    return f"TLS with {where} failed ({detail})"


def error_page(body: Any, label: str) -> str | None:
    """An answer that is not the cluster's JSON (an HTML page from a proxy or another server): its title
    or first line, for a message; None when it is JSON."""
    if isinstance(body, bytes):
        body = body.decode(errors="replace")
    if not isinstance(body, str) or not body.strip() or "<" not in body:
        return None  # JSON, an error type (`index_not_found_exception`), or nothing
    title = re.search(r"<title>(.*?)</title>", body, re.I | re.S)
    first = title.group(1) if title else next((ln for ln in re.sub(r"<[^>]*>", " ", body).splitlines()
                                               if ln.strip()), "")
    return (f"a page that is not {label}'s JSON ({' '.join(first.split())[:100]!r}): is this endpoint the "
            "cluster's HTTP port, with no proxy in between?")


PLAIN_NAME = re.compile(r"[A-Za-z0-9._*-]*")


def part(*names: str) -> str:
    """Index or node names as one path part, each quoted (a name is never a path of its own); most are
    plain already (a batch's request names hundreds of indices)."""
    return ",".join(n if PLAIN_NAME.fullmatch(n) else quote(n, safe="*") for n in names)


def flag(value: bool) -> str:
    return "true" if value else "false"
