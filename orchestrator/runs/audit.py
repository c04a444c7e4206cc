"""The run's audit log: what the tool actually did, as JSON lines beside the journal.

Every command run on a host (logger `orchestrator.hosts`: host, command, exit code, duration),
every request to Elasticsearch or OpenSearch (the client's own request log: method, URL, status,
duration; with the answer's size in bytes, noted by the client's node: shards/rest.py) and every
event of the run (its decisions with their reasons, phases, waits, undo).
The standard logging module carries the records; this module only writes them, one JSON object
per line, with anything that looks like a secret masked. A resumed run appends to the same file.
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from orchestrator import products
from orchestrator.restart.events import Event, EventSink
from orchestrator.restart.journal import Journal
from orchestrator.shards.rest import last_answer_bytes

REQUEST = re.compile(r"^(?P<method>[A-Z]+) (?P<url>\S+) \[status:(?P<status>\S+) (?:duration|request):"
                     r"(?P<duration>[\d.]+)s\]")
# user:password@ in a URL; an Authorization header to the end of its line; NAME=value or NAME: value
# for names that hold secrets.
SECRETS = re.compile(r"(?P<url>://[^/\s:@]+:)[^@\s/]+@"
                     r"|(?P<auth>\bauthorization\b\s*[=:]\s*)[^\n]*"
                     r"|(?P<name>\b(?:password|passwd|pass|token|api[_-]?key|secret|cookie)\b\s*[=:]\s*)"
                     r"(?:'[^']*'|\"[^\"]*\"|\S+)", re.IGNORECASE)


# What each of SECRETS' matches holds: the @ of a URL's credentials, or a name (a match of "password" holds
# "pass", one of "api_key" holds "api").
SECRET_MARKS = ("@", "authorization", "pass", "token", "api", "secret", "cookie")


def redacted(text: str) -> str:
    # An ASCII text that holds none of the marks, lowered, cannot match (ignoring case is lowering, in ASCII):
    # the pattern's scan of a request's URL took 0.7 ms at 4 KB (a batch's node ids at 3,000 nodes), a
    # request's whole cost. Any other text is scanned, its case as the pattern ignores it.
    if text.isascii():
        lowered = text.lower()
        if not any(mark in lowered for mark in SECRET_MARKS):
            return text
    return SECRETS.sub(lambda m: f"{m['url']}***@" if m["url"] else f"{m['auth'] or m['name']}***", text)


def log_path(journal: Journal) -> Path:
    assert journal.path is not None, "a run's journal has a path"
    return journal.path.with_name(f"{journal.run_id}.log.jsonl")


def record_fields(record: logging.LogRecord, clients: Collection[str] = ()) -> dict[str, Any]:
    """The record as a line of the audit log: a request where it comes from one of the product's
    ``clients`` (the loggers its client logs requests to), a host command where ours says so."""
    audit = getattr(record, "audit", None)
    if isinstance(audit, dict):
        fields = dict(audit)
    elif (found := REQUEST.match(record.getMessage())) and record.name in clients:
        status = found["status"]
        fields = {"kind": "request", "method": found["method"], "url": found["url"],
                  "status": int(status) if status.isdigit() else status, "duration_s": float(found["duration"])}
        size = last_answer_bytes()  # logged in the thread that received the answer, just after
        if size is not None:
            fields["bytes"] = size
    else:
        fields = {"kind": "log", "level": record.levelname.lower(), "logger": record.name,
                  "message": record.getMessage()}
    return {k: redacted(v) if isinstance(v, str) else v for k, v in fields.items()}


class JsonLines(logging.Handler):
    """Appends one JSON object per record to a file only its owner can read (never through a link)."""

    def __init__(self, path: Path, clients: Collection[str] = ()) -> None:
        super().__init__(level=logging.INFO)
        self.clients = tuple(clients)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        self.file = os.fdopen(fd, "a", encoding="utf-8")

    def write(self, line: dict[str, Any]) -> None:
        self.acquire()
        try:
            self.file.write(json.dumps(line, default=str) + "\n")
            self.file.flush()
        finally:
            self.release()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.write({"at": round(record.created, 3), **record_fields(record, self.clients)})
        except Exception:  # a log line must never break a run
            self.handleError(record)

    def close(self) -> None:
        self.file.close()
        super().close()


def invocation(journal: Journal, how: str) -> dict[str, Any]:
    """Who ran what, where: the first line of each start or resume."""
    import getpass
    import socket
    import sys

    from orchestrator import __version__

    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # a uid with no name (a container)
        user = str(os.getuid())
    return {"kind": "invocation", "how": how, "run_id": journal.run_id, "cluster": journal.cluster,
            "orchestrator": __version__, "user": user, "machine": socket.gethostname(),
            "pid": os.getpid(), "argv": redacted(" ".join(sys.argv))}


@contextmanager
def audit_log(journal: Journal, emit: EventSink, how: str) -> Iterator[EventSink]:
    """While a run executes (``how``: start or resume): its commands and requests go to its audit log.
    Yields the event sink to use instead of ``emit``: each event is written to the log, then passed on."""
    clients = products.get(journal.product).client_loggers
    handler = JsonLines(log_path(journal), clients)
    last_answer_bytes()  # an answer received before the run (by this thread) is none of its requests
    handler.write({"at": round(time.time(), 3), **invocation(journal, how)})
    loggers = [logging.getLogger(name) for name in ("orchestrator", *clients)]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.addHandler(handler)
        if lg.getEffectiveLevel() > logging.INFO:
            lg.setLevel(logging.INFO)

    def logged(event: Event) -> None:
        line = {"at": round(event.at, 3), "kind": "event", "event": event.kind, "message": redacted(event.message),
                **{k: v for k, v in (("node", event.node), ("batch", event.batch), ("phase", event.phase))
                   if v is not None}, **({"data": event.data} if event.data else {})}
        handler.write(line)
        emit(event)

    try:
        yield logged
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.removeHandler(handler)
            lg.setLevel(level)
        handler.close()
