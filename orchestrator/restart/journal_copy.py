"""The run's journal copied into the cluster, beside its lock: any operator of the cluster sees the run
(`status`) and picks it up (`resume --take-over`) from another machine, when the one that ran it is gone.

Two documents of the lock's own index (same privileges as the lock, hidden, one shard copied to every
node): ``journal``, the whole journal as its base file holds it, and ``journal-log``, the lines of its log
of changes since (journal_file.py). A save writes the log document, a line longer, before the change it
records is made, as the local journal is written ahead; every LINES_BEFORE_BASE lines, at the first save
and after a write that failed, the base is written again and the log emptied.

A write that fails (the cluster unreachable) does not stop the run: the copy is behind until the next save
that works, which writes the base whole. The run's changes of the cluster fail then too; what the copy
can miss is what was done on hosts meanwhile, which `resume` finds from the nodes' live state (a node
restarted is never restarted again).

What is read back is checked as a local journal is, and more, since anyone who may write the lock's index
may write these: each document names the run (that of the lock, when there is one), the cluster it was
written in (Elasticsearch's cluster UUID: a copy moved from another cluster is refused) and a SHA-256 of
its text (a damaged copy is refused; this is not a signature). The run's procedure is never taken from
the copy: `resume --take-over` requires the playbook of this machine to be the one recorded.
Secrets are never in a journal (only references to them), so never in the copy.
"""

from __future__ import annotations

import hashlib
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from orchestrator.config.loader import strict_json
from orchestrator.errors import JournalError
from orchestrator.restart.adapter import ClusterAdapter
from orchestrator.restart.journal_file import with_lines
from orchestrator.restart.lock import LOCK_INDEX

BASE_DOC = "journal"
LOG_DOC = "journal-log"
LINES_BEFORE_BASE = 100  # lines in the log document before the base is written again (each save rewrites it)
# After a write that failed, the saves of this long are not tried (they would each wait for the cluster's
# timeout while it is unreachable); the first one after it writes the copy whole again.
RETRY_AFTER_S = 15.0
READ_TRIES = 3  # a copy read while its run writes it may see a new base with an old log: read again


def digest(texts: Sequence[str]) -> str:
    return hashlib.sha256("\n".join(texts).encode()).hexdigest()


class JournalCopy:
    """Keeps the cluster's copy of one run's journal, saved after each save of the local one (Journal.save)."""

    def __init__(self, adapter: ClusterAdapter[Any], run_id: str, identity: str | None) -> None:
        self.adapter = adapter
        self.run_id = run_id
        self.identity = identity
        self.base_seq: int | None = None  # None: the next save writes the base
        self.lines: list[str] = []
        self.failures = 0  # writes that failed, in all
        self.behind = False  # the last write failed: the copy misses changes until the next that works
        self.last_error = ""
        self._retry_at = 0.0

    def saved(self, seq: int, line: str | None, base: Callable[[], str]) -> None:
        """The local journal saved change ``seq``: its ``line`` of the log, or None when its base was written
        (``base`` gives the whole text)."""
        if self.behind and time.monotonic() < self._retry_at:
            return
        try:
            if line is None or self.base_seq is None or len(self.lines) >= LINES_BEFORE_BASE:
                text = base()
                self._put(BASE_DOC, {"seq": seq, "base": text, "digest": digest([text])})
                self.base_seq, self.lines = seq, []
            else:
                self.lines = [*self.lines, line]
            self._put(LOG_DOC, {"base_seq": self.base_seq, "lines": self.lines, "digest": digest(self.lines)})
            self.behind = False
        except Exception as exc:  # never the run's end: said by `status`, and the next save writes it whole
            self.failures += 1
            self.behind, self.base_seq, self.lines = True, None, []
            self.last_error = f"{type(exc).__name__}: {str(exc)[:200]}"
            self._retry_at = time.monotonic() + RETRY_AFTER_S

    def _put(self, doc_id: str, fields: dict[str, Any]) -> None:
        body = {"run_id": self.run_id, "identity": self.identity, "host": socket.gethostname(),
                "saved": time.time(), **fields}
        # Written over this run's own document only (the renewal checks the run); another run's is replaced.
        if self.adapter.renew_lock(LOCK_INDEX, doc_id, self.run_id, body):
            return
        self.adapter.delete_lock(LOCK_INDEX, doc_id)
        if not self.adapter.create_lock(LOCK_INDEX, doc_id, body):
            raise JournalError(f"the cluster's copy of run {self.run_id}: its document {doc_id} was written by "
                               "someone else meanwhile")


@dataclass(frozen=True)
class CopiedRun:
    """A run's journal as the cluster's copy holds it: its fields (a journal file's, read back), who saved it
    last and when."""

    run_id: str
    raw: dict[str, Any]
    seq: int
    host: str
    saved: float | None


def read_copy(adapter: ClusterAdapter[Any], identity: str | None) -> CopiedRun | None:
    """The run whose journal the cluster holds a copy of (None: no copy); JournalError for a copy that is
    damaged, of another cluster, or inconsistent."""
    for attempt in range(READ_TRIES):
        try:
            return _read_once(adapter, identity)
        except _Torn:
            if attempt == READ_TRIES - 1:
                raise JournalError("the cluster's copy of the run changed at each of 3 reads: its run is "
                                   "writing it. Read it again.") from None
            time.sleep(0.2)
    return None


class _Torn(Exception):
    """A base and a log read from two different saves."""


def _read_once(adapter: ClusterAdapter[Any], identity: str | None) -> CopiedRun | None:
    base_doc = adapter.read_lock(LOCK_INDEX, BASE_DOC)
    if base_doc is None:
        return None
    log_doc = adapter.read_lock(LOCK_INDEX, LOG_DOC) or {}
    run_id = _text(base_doc.get("run_id"))
    what = f"the cluster's copy of run {run_id}"
    if identity is not None and base_doc.get("identity") != identity:
        raise JournalError(f"{what} was written in another cluster (UUID {_text(base_doc.get('identity'))}, this "
                           f"one is {identity}): moved or planted; it is not read")
    base = base_doc.get("base")
    if not isinstance(base, str) or base_doc.get("digest") != digest([base]):
        raise JournalError(f"{what} is damaged (its text does not match its digest): not written by this tool, "
                           "or changed since")
    try:
        raw = strict_json(base.encode())
    except (ValueError, RecursionError):
        raise JournalError(f"{what} is damaged (not JSON written by this tool)") from None
    if not isinstance(raw, dict) or raw.get("run_id") != run_id:
        raise JournalError(f"{what} holds another run ({_text(raw.get('run_id') if isinstance(raw, dict) else None)})")
    lines: list[Any] = []
    if log_doc.get("run_id") == run_id:
        texts = log_doc.get("lines")
        if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts) \
                or log_doc.get("digest") != digest(texts):
            raise JournalError(f"{what}: its log of changes is damaged (its text does not match its digest)")
        try:
            lines = [strict_json(t.encode()) for t in texts]
        except (ValueError, RecursionError):
            raise JournalError(f"{what}: its log of changes is damaged (not JSON written by this tool)") from None
        base_seq = log_doc.get("base_seq")
        if isinstance(base_seq, int) and isinstance(raw.get("seq"), int) and base_seq > raw["seq"]:
            raise _Torn()  # a log of a newer base than the one read
    raw = with_lines(raw, lines, what)
    seq = raw.get("seq")
    saved = log_doc.get("saved") if log_doc.get("run_id") == run_id else base_doc.get("saved")
    return CopiedRun(run_id=run_id, raw=raw, seq=seq if isinstance(seq, int) and not isinstance(seq, bool) else 0,
                     host=_text(base_doc.get("host")),
                     saved=float(saved) if isinstance(saved, int | float) and not isinstance(saved, bool) else None)


def _text(value: Any) -> str:
    return "".join(c if c.isprintable() else "?" for c in str(value))[:100]
