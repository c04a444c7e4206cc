"""The run lock, kept with the cluster itself so that it also excludes operators on other machines.

Taking it is one atomic create (an Elasticsearch `_create` of a document named after the
cluster; for Riak, an exclusive create of a file on the first node's host): of two runs racing,
exactly one succeeds. The holder renews it every RENEW_S seconds (a tenth of its stale time, if shorter);
a lock not renewed for its stale time (STALE_S unless the inventory's `timeouts.lock_stale_s` says
otherwise; the holder writes it in the lock) is stale: its run is dead or cut off. `resume` of the same
run takes the lock over when the process that held it is gone (on this machine) or the lock is stale
(from any machine: `resume --take-over`, runs/take_over.py);
`orchestrate unlock` removes a stale lock, and refuses a live one without --force.
"""

from __future__ import annotations

import os
import secrets
import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from orchestrator.errors import RunLocked
from orchestrator.restart.adapter import ClusterAdapter
from orchestrator.units import counted

LOCK_INDEX = "orchestrator-locks"
# The lock and the pause request are the cluster's own documents, in the cluster's own index, whatever the
# inventory that names the cluster is called: two inventories of one cluster (`prod`, `prod-eu`) share
# them, and no inventory name can be another's document (a `continue` of `logs` deleting `logs.pause`).
RUN_DOC = "run"
PAUSE_DOC = "pause"
RENEW_S = 30.0  # how often a run renews its lock
STALE_S = 300.0  # a lock not renewed for this long belongs to a dead (or cut-off) run
# A run whose renewals have failed this long stops at its next safe point, well before its lock could go stale
# and another run take it: two runs must never change one cluster at once.
RENEWAL_TROUBLE_S = STALE_S / 2


# The bounds of a stale time an inventory may set (`timeouts.lock_stale_s`) and a lock document may say.
MIN_STALE_S = 30.0
MAX_STALE_S = 86400.0


# A sign of life further ahead of this machine's clock than this is not believed: a forged or damaged
# time must not keep a lock live for ever.
MAX_CLOCK_SKEW_S = 3600.0


def _time(value: Any) -> float | None:
    """A time from the document: a finite, non-negative number of seconds, or None."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < 1e11:
        return None
    return float(value)


def _text(value: Any, limit: int = 100) -> str:
    return "".join(c if c.isprintable() else "?" for c in str(value))[:limit] if value is not None else "?"


@dataclass(frozen=True)
class LockHolder:
    """Who holds a cluster's run lock, read from the document kept in the cluster (which anyone who can
    write to the cluster can forge or damage: every field is checked, none trusted to be of its type)."""

    run_id: str
    host: str
    pid: int | None
    started: float | None
    renewed: float | None
    failed: bool
    deferred: bool = False  # its run left a wait to a scheduler's trigger, which renews the lock meanwhile
    # How long a silence of this holder means its run is dead: said by the holder (`timeouts.lock_stale_s` of
    # its inventory), believed within bounds, so that every machine judges the lock alike.
    stale_after_s: float = STALE_S

    @classmethod
    def from_document(cls, doc: Mapping[str, Any]) -> LockHolder:
        pid = doc.get("pid")
        return cls(run_id=_text(doc.get("run_id")), host=_text(doc.get("host"), 255),
                   pid=pid if isinstance(pid, int) and not isinstance(pid, bool) and 0 < pid < 2**31 else None,
                   started=_time(doc.get("started")), renewed=_time(doc.get("renewed")),
                   failed=doc.get("state") == "failed", deferred=doc.get("state") == "deferred",
                   stale_after_s=stale_after(doc.get("stale_after_s")))

    def last_sign_of_life(self, now: float) -> float | None:
        """When the holder last renewed the lock (or took it); None when the document shows no believable
        time."""
        times = [t for t in (self.renewed, self.started) if t is not None and t <= now + MAX_CLOCK_SKEW_S]
        return times[0] if times else None

    def quiet_s(self, now: float | None = None) -> float:
        """Seconds since its last sign of life (never negative; infinite with none)."""
        now = now if now is not None else time.time()
        last = self.last_sign_of_life(now)
        return float("inf") if last is None else max(0.0, now - last)

    def is_stale(self, now: float | None = None) -> bool:
        """Not renewed for its stale time: its run is dead or cut off. A failed run's lock is never stale: the run
        waits for `resume`, with its temporary settings in force."""
        return not self.failed and self.quiet_s(now) > self.stale_after_s

    def may_be_taken_over(self) -> bool:
        """Whether a `resume` of its run may take the lock: the run failed or waits in a scheduler's trigger,
        its process is gone from this machine, or it has been silent long enough to be dead (stale)."""
        return self.failed or self.deferred or self.is_stale() or not self.alive_here()

    def alive_here(self) -> bool:
        """Whether its process may live: on another machine assumed so (an operator must decide)."""
        if self.host != socket.gethostname():
            return True
        if self.pid is None:
            return False
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True

    def gone_here(self) -> bool:
        """Its run's process was on this machine and is no more: killed without a word (SIGKILL, OOM killer)."""
        return not self.failed and self.host == socket.gethostname() and not self.alive_here()

    def describe(self, now: float | None = None) -> str:
        now = now if now is not None else time.time()
        started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(self.started)) if self.started is not None \
            else "an unknown time"
        quiet = self.quiet_s(now)
        if self.failed:
            life = "the run FAILED and waits for `orchestrate resume` (its temporary settings are still in force)"
        elif self.gone_here():
            life = ("GONE: its process no longer runs on this machine (killed, or the machine restarted); "
                    "`orchestrate resume` continues the run")
        elif quiet == float("inf"):
            life = "STALE: the lock shows no believable time of renewal (damaged or forged)"
        elif self.deferred and not self.is_stale(now):
            life = (f"DEFERRED: the run waits in a scheduler's trigger, which renewed the lock {quiet:.0f} s ago; "
                    "the run resumes from its journal when the wait is over")
        elif self.is_stale(now):
            life = (f"STALE: not renewed for {quiet:.0f} s (a live run renews every "
                    f"{renew_every(self.stale_after_s):.0f} s)")
        elif quiet > 2 * renew_every(self.stale_after_s):
            life = (f"RENEWALS FAILING: last renewed {quiet:.0f} s ago (a live run renews every "
                    f"{renew_every(self.stale_after_s):.0f} s; it stops at a safe point after "
                    f"{self.stale_after_s / 2:.0f} s, and the lock is stale after {self.stale_after_s:.0f} s)")
        else:
            life = f"renewed {quiet:.0f} s ago"
        pid = self.pid if self.pid is not None else "?"
        return f"run {self.run_id} on {self.host} (pid {pid}) since {started}, {life}"

    def as_json(self) -> dict[str, Any]:
        state = "failed" if self.failed else "deferred" if self.deferred else "running"
        return {"run_id": self.run_id, "host": self.host, "pid": self.pid, "started": self.started,
                "renewed": self.renewed, "state": state, "stale": self.is_stale(), "gone": self.gone_here(),
                "stale_after_s": self.stale_after_s}

    def why_keep(self) -> str | None:
        """Why `unlock` must not remove this lock without --force (None: its run is dead)."""
        if self.failed:
            return (f"run {self.run_id} failed and waits for `orchestrate resume` with its temporary settings "
                    "in force; removing its lock lets another run start over them")
        if self.deferred and not self.is_stale():
            return (f"run {self.run_id} is deferred: a scheduler's trigger watches it and renewed its lock "
                    f"{self.quiet_s():.0f} s ago")
        if self.gone_here() or self.is_stale():
            return None
        return (f"run {self.run_id} is alive: it renewed its lock {self.quiet_s():.0f} s ago (a lock is stale after "
                f"{self.stale_after_s:.0f} s without renewal)")


def stale_after(value: Any) -> float:
    """A holder's own stale time, from its document: believed between MIN_STALE_S and MAX_STALE_S (a forged
    or damaged one must neither keep a lock for ever nor let a live run's lock be taken), STALE_S otherwise."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not MIN_STALE_S <= value <= MAX_STALE_S:
        return STALE_S
    return float(value)


def renew_every(stale_s: float) -> float:
    """How often a holder renews: a tenth of its stale time, at most RENEW_S."""
    return min(RENEW_S, stale_s / 10)


def read_holder(adapter: ClusterAdapter[Any]) -> LockHolder | None:
    doc = adapter.read_lock(LOCK_INDEX, RUN_DOC)
    return None if doc is None else LockHolder.from_document(doc)


# Told of a renewal's trouble: what to say, and whether the run must stop at its next safe point.
Trouble = Callable[[str, bool], None]


class RunLock:
    def __init__(self, adapter: ClusterAdapter[Any], cluster: str, run_id: str, stale_s: float = STALE_S) -> None:
        self.adapter = adapter
        self.stale_s = stale_s
        self.cluster = cluster  # the inventory's name, for messages
        self.doc_id = RUN_DOC
        self.run_id = run_id
        self.held = False
        # Which taking of the lock is this process's: a resume of the same run from another machine (a take-over)
        # writes its own, and this one, if it wakes up, then knows the lock is no longer its own.
        self.token = secrets.token_hex(8)
        self.lost = False  # the lock was taken over: this process changes nothing more, and releases nothing
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None

    def acquire(self, takeover: bool = False) -> None:
        body = {"run_id": self.run_id, "host": socket.gethostname(), "pid": os.getpid(), "started": time.time(),
                "stale_after_s": self.stale_s, "holder": self.token}
        if self.adapter.create_lock(LOCK_INDEX, self.doc_id, body):
            self.held = True
            return
        holder = LockHolder.from_document(self.adapter.read_lock(LOCK_INDEX, self.doc_id) or {})
        same_run = holder.run_id == self.run_id
        # A deferred run's holder is its trigger, not a process: the run's resume takes the lock back.
        if takeover and same_run and ((holder.pid == os.getpid() and holder.host == socket.gethostname())
                                      or holder.may_be_taken_over()):
            self.adapter.delete_lock(LOCK_INDEX, self.doc_id)
            if self.adapter.create_lock(LOCK_INDEX, self.doc_id, body):
                self.held = True
                return
        if same_run:
            raise RunLocked(f"this run is still active: {holder.describe()}. Wait for it, or stop it first.")
        raise RunLocked(f"another run holds the lock of this cluster: {holder.describe()}. Only one run at a time "
                        f"may change a cluster. If that run is dead, `orchestrate resume` on its machine finishes "
                        f"it, or `orchestrate unlock --cluster {self.cluster}` removes the lock once it is stale "
                        f"({holder.stale_after_s:.0f} s without renewal).")

    def keep_renewed(self, interval_s: float | None = None, trouble: Trouble | None = None,
                     clock: Callable[[], float] = time.monotonic) -> None:
        """Renew the lock every ``interval_s`` from a background thread until release. A failed renewal is
        tried again; the lock stays, and goes stale only if renewals keep failing. Each failure is
        told to ``trouble`` (what went wrong, and whether renewals have failed for RENEWAL_TROUBLE_S: the run
        must then stop at a safe point), and so is the first renewal that works again."""
        last_renewed = clock()
        interval = renew_every(self.stale_s) if interval_s is None else interval_s
        give_up_s = self.stale_s / 2

        def renew() -> None:
            nonlocal last_renewed
            failing = 0
            while not self._stop.wait(interval):
                try:
                    held = self.adapter.read_lock(LOCK_INDEX, self.doc_id)
                    if held is not None and held.get("run_id") == self.run_id and held.get("holder") != self.token:
                        self.lost = True
                        if trouble is not None:
                            trouble(f"the run's lock was taken over ({LockHolder.from_document(held).describe()}): "
                                    "this process stops at its next safe point", True)
                        return
                    renewed = self.adapter.renew_lock(LOCK_INDEX, self.doc_id, self.run_id, {"renewed": time.time()})
                    why = "" if renewed else "the lock document is no longer this run's"
                except Exception as exc:  # a renewal must never kill the run: told instead
                    renewed, why = False, f"{type(exc).__name__}: {str(exc)[:200]}"
                if renewed:
                    if failing and trouble is not None:
                        trouble(f"the run's lock is renewed again, after {counted(failing, 'failed renewal')}", False)
                    failing, last_renewed = 0, clock()
                    continue
                failing += 1
                quiet = clock() - last_renewed
                if trouble is not None:
                    trouble(f"the run's lock could not be renewed ({why}); not renewed for {quiet:.0f} s: the run "
                            f"stops at a safe point after {give_up_s:.0f} s, before another run could take "
                            f"the lock as stale ({self.stale_s:.0f} s)", quiet >= give_up_s)

        self._renewer = threading.Thread(target=renew, name="lock-renewal", daemon=True)
        self._renewer.start()

    def still_held(self) -> bool:
        """Whether the lock is still this process's (not taken over from another machine), as last seen."""
        return self.held and not self.lost

    def _taken_over(self) -> bool:
        """The lock is this run's, but another process's taking of it (a take-over): nothing of it is ours."""
        held = self.adapter.read_lock(LOCK_INDEX, self.doc_id)
        self.lost = self.lost or (held is not None and held.get("run_id") == self.run_id
                                  and held.get("holder") != self.token)
        return self.lost

    def mark_failed(self) -> None:
        """Kept by a failed run: said so in the lock, so that nobody takes it for a dead run's."""
        self.stop_renewing()
        try:
            if self._taken_over():
                return
            self.adapter.renew_lock(LOCK_INDEX, self.doc_id, self.run_id, {"state": "failed", "renewed": time.time()})
        except Exception:  # the run's own error is the one to report; the lock stays, marked or not
            pass

    def mark_deferred(self) -> None:
        """Kept by a deferred run, said so: its trigger renews it (`renew_deferred`) until the run resumes."""
        self.stop_renewing()
        try:
            if self._taken_over():
                return
            renew_deferred(self.adapter, self.run_id, marking=True)
        except Exception:  # a failed mark leaves the lock live for STALE_S, while the trigger takes over
            pass

    def stop_renewing(self) -> None:
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join(timeout=60)
            self._renewer = None

    def release(self) -> None:
        self.stop_renewing()
        if self.held:
            holder = read_holder(self.adapter)
            if holder is not None and holder.run_id == self.run_id and not self._taken_over():
                self.adapter.delete_lock(LOCK_INDEX, self.doc_id)
            self.held = False


# --- a pause request: a document beside the lock, so `pause` works from any machine ------------------
def renew_deferred(adapter: ClusterAdapter[Any], run_id: str, marking: bool = False) -> bool:
    """A sign of life of a deferred run, from whoever watches it (``marking``: the run itself, deferring).
    False when the lock is no longer the deferred run's: taken back by its resume, or removed."""
    holder = read_holder(adapter)
    if holder is None or holder.run_id != run_id or not (holder.deferred or marking):
        return False
    return adapter.renew_lock(LOCK_INDEX, RUN_DOC, run_id, {"state": "deferred", "renewed": time.time()})


def request_pause(adapter: ClusterAdapter[Any], reason: str) -> bool:
    """Ask the cluster's run to pause at its next batch boundary; False when a pause is already asked."""
    body = {"reason": reason, "host": socket.gethostname(), "pid": os.getpid(), "started": time.time()}
    return adapter.create_lock(LOCK_INDEX, PAUSE_DOC, body)


def pause_request(adapter: ClusterAdapter[Any]) -> dict[str, Any] | None:
    return adapter.read_lock(LOCK_INDEX, PAUSE_DOC)


def clear_pause(adapter: ClusterAdapter[Any]) -> None:
    adapter.delete_lock(LOCK_INDEX, PAUSE_DOC)
