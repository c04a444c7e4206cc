"""The run's journal copied into the cluster, beside its lock: any operator of the cluster sees the run
(`status`) and picks it up (`resume --take-over`) from another machine, when the one that ran it is gone.

Documents of the lock's own index (same privileges as the lock, hidden, one shard copied to every node):
``journal``, the whole journal as its base file holds it, and ``journal-log-K``, each the lines of its log of
changes (journal_file.py) that one write carried, from line ``seq``, in slot ``seq % ring``. A save's lines
are written before the change they record is made, as the local journal is written ahead, and a line long
each whatever the journal's size. Saves of several threads (a window's nodes) made while a write is under way
go together in the next: each waits for its own line, never holding the journal meanwhile (`queue` under the
journal's lock, `flush` outside it). The base is written again at the first save, after a write that failed,
and once ``ring`` lines were written since it: ``ring`` grows with the base (one base byte in
RING_BYTES_PER_LINE a save), so that a large cluster's journal is not copied to every node at a rate that grows
with it. The slots are written over round after round; a reader takes the lines that follow the base's change
number, in order, and stops at the first slot that holds no such line.

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
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from orchestrator.config.loader import strict_json
from orchestrator.errors import JournalError
from orchestrator.restart.adapter import ClusterAdapter
from orchestrator.restart.journal_file import with_lines
from orchestrator.restart.lock import LOCK_INDEX

BASE_DOC = "journal"
LINE_DOC = "journal-log-{slot}"
MIN_RING = 100  # lines between two writes of the base, at least
MAX_RING = 2000  # and at most: what a take-over reads, one document each
RING_BYTES_PER_LINE = 2000  # a base of 2 MB (a 3,000-node cluster's) is written again every 1,000 lines
# After a write that failed, the saves of this long are not tried (they would each wait for the cluster's
# timeout while it is unreachable); the first one after it writes the copy whole again.
RETRY_AFTER_S = 15.0


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def ring_for(base: str) -> int:
    return max(MIN_RING, min(MAX_RING, len(base) // RING_BYTES_PER_LINE))


class JournalCopy:
    """Keeps the cluster's copy of one run's journal: each save of the local one (Journal.save) is queued under
    the journal's lock and flushed once the journal is let go, its lines written with those queued meanwhile."""

    def __init__(self, adapter: ClusterAdapter[Any], run_id: str, identity: str | None,
                 still_held: Callable[[], bool] = lambda: True) -> None:
        self.adapter = adapter
        # Whether the run's lock is still this process's: once another machine took the run over, its copy is
        # that machine's to write (RunLock.still_held).
        self.still_held = still_held
        self.run_id = run_id
        self.identity = identity
        self.base_seq: int | None = None  # the base of the lines queued; None: the next save queues the base
        self.ring = MIN_RING
        self.failures = 0  # writes that failed, in all
        self.behind = False  # the last write failed: the copy misses changes until the next that works
        self.last_error = ""
        self._retry_at = 0.0
        self._turn = threading.Condition()  # one write at a time; the saves queued meanwhile wait for the next
        self._writer: int | None = None  # the thread writing, if one is (a save it makes goes with the next write)
        self._base: tuple[int, str] | None = None  # a base queued and not yet written: its change and text
        self._lines: list[str] = []  # the lines queued and not yet written, in order, the first at _first
        self._first = 0
        self._queued = 0  # the last change queued (or passed over: behind, or no longer this process's)
        self._done = 0  # the last change whose write ended (written, or failed)

    def saved(self, seq: int, line: str | None, base: Callable[[], str]) -> None:
        """The local journal saved change ``seq`` (its ``line`` of the log, or None when its base was written;
        ``base`` gives the whole text): queued and written at once."""
        self.queue(seq, line, base)
        self.flush(seq)

    def queue(self, seq: int, line: str | None, base: Callable[[], str]) -> None:
        """Change ``seq`` saved, under the journal's lock (so ``base`` reads it whole): its line, or the base
        whole when one is due, is written by the next flush."""
        held = self.still_held()
        with self._turn:
            self._queued = seq
            if not held:
                self.behind, self.base_seq = True, None
                return
            if self.behind and time.monotonic() < self._retry_at:
                return
            if line is None or self.base_seq is None or seq - self.base_seq > self.ring:
                text = base()
                self._base, self._lines = (seq, text), []  # the lines before it are in it
                self.base_seq, self.ring = seq, ring_for(text)
            else:
                if not self._lines:
                    self._first = seq
                self._lines.append(line)

    def flush(self, seq: int) -> None:
        """Returns once change ``seq`` is in the cluster's copy (or its write failed: never the run's end, said
        by `status`, and the next save writes the copy whole). Writes what is queued unless a write is under way,
        else waits for it and then writes what was queued meanwhile, its own line among them."""
        while True:
            with self._turn:
                if self._writer == threading.get_ident():
                    return  # saved while writing: it cannot wait for itself
                while self._writer is not None and self._done < seq:
                    self._turn.wait()
                if self._done >= seq:
                    return
                base, first, lines, ring, upto = self._base, self._first, self._lines, self.ring, self._queued
                self._base, self._lines = None, []
                self._writer = threading.get_ident()
            error: Exception | None = None
            try:
                if base is not None:
                    text = base[1]
                    self._put(BASE_DOC, {"seq": base[0], "ring": ring, "base": text, "digest": digest(text)})
                if lines:
                    self._put(LINE_DOC.format(slot=first % ring), lines_doc(first, lines))
            except Exception as exc:  # never the run's end: said by `status`, and written whole next time
                error = exc
            with self._turn:
                self._writer = None
                self._done = max(self._done, upto)
                if error is None:
                    self.behind = self.behind and base is None and not lines  # nothing written: as it was
                else:
                    self.failures += 1
                    self.behind, self.base_seq = True, None
                    # A gap: what was queued meanwhile is dropped (its savers then find nothing to write), and the
                    # next save writes the copy whole.
                    self._base, self._lines = None, []
                    self.last_error = f"{type(error).__name__}: {str(error)[:200]}"
                    self._retry_at = time.monotonic() + RETRY_AFTER_S
                self._turn.notify_all()

    def _put(self, doc_id: str, fields: dict[str, Any]) -> None:
        # Written whole over whatever the document held (an earlier run's copy, or this run's lines of an earlier
        # round). Only the process that holds the run's lock writes (``still_held``).
        self.adapter.write_lock_document(LOCK_INDEX, doc_id, {
            "run_id": self.run_id, "identity": self.identity, "host": socket.gethostname(), "saved": time.time(),
            **fields})


def lines_doc(first: int, lines: list[str]) -> dict[str, Any]:
    """The fields of a log document: one line as ``line`` (as a single save writes it), several as ``lines``."""
    if len(lines) == 1:
        return {"seq": first, "line": lines[0], "digest": digest(lines[0])}
    return {"seq": first, "lines": lines, "digest": digest("\n".join(lines))}


@dataclass(frozen=True)
class CopiedRun:
    """A run's journal as the cluster's copy holds it: its fields (a journal file's, read back), who saved it
    last and when."""

    run_id: str
    raw: dict[str, Any]
    seq: int
    host: str
    saved: float | None

    @property
    def created(self) -> float:
        """When its run began (0 when the copy does not say): of two runs, the later began later. Run ids sort
        by the second only."""
        created = self.raw.get("created")
        return float(created) if isinstance(created, int | float) and not isinstance(created, bool) else 0.0

    def began_after(self, journal: Any) -> bool:
        """Whether its run is another than ``journal``'s (a Journal) and began after it."""
        return bool(self.run_id != journal.run_id and self.created > journal.created)


def read_copy(adapter: ClusterAdapter[Any], identity: str | None) -> CopiedRun | None:
    """The run whose journal the cluster holds a copy of (None: no copy); JournalError for a copy that is
    damaged or of another cluster. Read while its run writes it, the copy is as of a save a moment ago."""
    base_doc = adapter.read_lock(LOCK_INDEX, BASE_DOC)
    if base_doc is None:
        return None
    run_id = _text(base_doc.get("run_id"))
    what = f"the cluster's copy of run {run_id}"
    if identity is not None and base_doc.get("identity") != identity:
        raise JournalError(f"{what} was written in another cluster (UUID {_text(base_doc.get('identity'))}, this "
                           f"one is {identity}): moved or planted; it is not read")
    base, ring = base_doc.get("base"), base_doc.get("ring")
    if not isinstance(base, str) or base_doc.get("digest") != digest(base) \
            or not isinstance(ring, int) or isinstance(ring, bool) or not MIN_RING <= ring <= MAX_RING:
        raise JournalError(f"{what} is damaged (its text does not match its digest): not written by this tool, "
                           "or changed since")
    raw = _parsed(base, what)
    if not isinstance(raw, dict) or raw.get("run_id") != run_id or not isinstance(raw.get("seq"), int):
        raise JournalError(f"{what} is damaged (it holds another run, or no change number)")
    host, saved = base_doc.get("host"), base_doc.get("saved")
    lines: list[Any] = []
    seq = raw["seq"] + 1
    while seq <= raw["seq"] + ring:
        doc = adapter.read_lock(LOCK_INDEX, LINE_DOC.format(slot=seq % ring))
        if doc is None or doc.get("run_id") != run_id or doc.get("seq") != seq:
            break  # the lines after the base end here (a slot of an earlier round, or of no save yet)
        texts = [doc.get("line")] if "lines" not in doc else doc.get("lines")
        if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts) \
                or doc.get("digest") != digest("\n".join(texts)):
            raise JournalError(f"{what}: change {seq} of its log is damaged (its text does not match its digest)")
        lines += [_parsed(text, what) for text in texts]
        seq += len(texts)
        host, saved = doc.get("host"), doc.get("saved")
    raw = with_lines(raw, lines, what)
    return CopiedRun(run_id=run_id, raw=raw, seq=raw["seq"], host=_text(host),
                     saved=float(saved) if isinstance(saved, int | float) and not isinstance(saved, bool) else None)


def _parsed(text: str, what: str) -> Any:
    try:
        return strict_json(text.encode())
    except (ValueError, RecursionError):
        raise JournalError(f"{what} is damaged (not JSON written by this tool)") from None


def _text(value: Any) -> str:
    return "".join(c if c.isprintable() else "?" for c in str(value))[:100]
