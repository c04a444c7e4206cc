"""The run's journal copied into the cluster, beside its lock: any operator of the cluster sees the run
(`status`) and picks it up (`resume --take-over`) from another machine, when the one that ran it is gone.

Documents of the lock's own index (same privileges as the lock, hidden, one shard copied to every node):
``journal``, the whole journal as its base file holds it, and ``journal-log-K``, each a line of its log of
changes since (journal_file.py), line ``seq`` in slot ``seq % ring``. A save writes its line's document, a
line long whatever the journal's size, before the change it records is made, as the local journal is
written ahead. The base is written again at the first save, after a write that failed, and once ``ring``
lines were written since it: ``ring`` grows with the base (one base byte in RING_BYTES_PER_LINE a save),
so that a large cluster's journal is not copied to every node at a rate that grows with it. The slots are
written over round after round; a reader takes the lines that follow the base's change number, in order,
and stops at the first slot that holds no such line.

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
    """Keeps the cluster's copy of one run's journal, saved after each save of the local one (Journal.save)."""

    def __init__(self, adapter: ClusterAdapter[Any], run_id: str, identity: str | None,
                 still_held: Callable[[], bool] = lambda: True) -> None:
        self.adapter = adapter
        # Whether the run's lock is still this process's: once another machine took the run over, its copy is
        # that machine's to write (RunLock.still_held).
        self.still_held = still_held
        self.run_id = run_id
        self.identity = identity
        self.base_seq: int | None = None  # None: the next save writes the base
        self.ring = MIN_RING
        self.failures = 0  # writes that failed, in all
        self.behind = False  # the last write failed: the copy misses changes until the next that works
        self.last_error = ""
        self._retry_at = 0.0

    def saved(self, seq: int, line: str | None, base: Callable[[], str]) -> None:
        """The local journal saved change ``seq``: its ``line`` of the log, or None when its base was written
        (``base`` gives the whole text)."""
        if not self.still_held():
            self.behind = True
            return
        if self.behind and time.monotonic() < self._retry_at:
            return
        try:
            if line is None or self.base_seq is None or seq - self.base_seq > self.ring:
                text = base()
                ring = ring_for(text)
                self._put(BASE_DOC, {"seq": seq, "ring": ring, "base": text, "digest": digest(text)})
                self.base_seq, self.ring = seq, ring
            else:
                self._put(LINE_DOC.format(slot=seq % self.ring), {"seq": seq, "line": line, "digest": digest(line)})
            self.behind = False
        except Exception as exc:  # never the run's end: said by `status`, and the next save writes it whole
            self.failures += 1
            self.behind, self.base_seq = True, None
            self.last_error = f"{type(exc).__name__}: {str(exc)[:200]}"
            self._retry_at = time.monotonic() + RETRY_AFTER_S

    def _put(self, doc_id: str, fields: dict[str, Any]) -> None:
        # Written whole over whatever the document held (an earlier run's copy, or this run's line of an earlier
        # round): one request a save. Only the process that holds the run's lock writes (``still_held``).
        self.adapter.write_lock_document(LOCK_INDEX, doc_id, {
            "run_id": self.run_id, "identity": self.identity, "host": socket.gethostname(), "saved": time.time(),
            **fields})


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
    for seq in range(raw["seq"] + 1, raw["seq"] + ring + 1):
        doc = adapter.read_lock(LOCK_INDEX, LINE_DOC.format(slot=seq % ring))
        if doc is None or doc.get("run_id") != run_id or doc.get("seq") != seq:
            break  # the lines after the base end here (a slot of an earlier round, or of no save yet)
        line = doc.get("line")
        if not isinstance(line, str) or doc.get("digest") != digest(line):
            raise JournalError(f"{what}: change {seq} of its log is damaged (its text does not match its digest)")
        lines.append(_parsed(line, what))
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
