"""The run lock, kept with the cluster itself so that it also excludes operators on other machines.

Taking it is one atomic create (an Elasticsearch `_create` of a document named after the
cluster; for Riak, an exclusive create of a file on the first node's host): of two runs racing,
exactly one succeeds. The holder renews it every RENEW_S seconds; a lock not renewed for STALE_S
seconds is stale: its run is dead or cut off. `resume` of the same run takes the lock over when
the process that held it is gone (on this machine) or the lock is stale (from any machine);
`orchestrate unlock` removes a stale lock, and refuses a live one without --force.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from typing import Any

from orchestrator.errors import RunLocked
from orchestrator.restart.adapter import ClusterAdapter

LOCK_INDEX = "orchestrator-locks"
# The lock and the pause request are the cluster's own documents, in the cluster's own index, whatever the
# inventory that names the cluster is called: two inventories of one cluster (`prod`, `prod-eu`) share
# them, and no inventory name can be another's document (a `continue` of `logs` deleting `logs.pause`).
RUN_DOC = "run"
PAUSE_DOC = "pause"
RENEW_S = 30.0  # how often a run renews its lock
STALE_S = 300.0  # a lock not renewed for this long belongs to a dead (or cut-off) run


def last_sign_of_life(holder: dict[str, Any]) -> float:
    """When the holder last renewed the lock (or took it)."""
    return float(holder.get("renewed") or holder.get("started") or 0)


def is_stale(holder: dict[str, Any], now: float | None = None) -> bool:
    """Not renewed for STALE_S: its run is dead or cut off. A failed run's lock is never stale: the run
    waits for `resume`, with its temporary settings in force."""
    if holder.get("state") == "failed":
        return False
    return (now if now is not None else time.time()) - last_sign_of_life(holder) > STALE_S


def _alive_here(holder: dict[str, Any]) -> bool:
    if holder.get("host") != socket.gethostname():
        return True  # another machine: assume it lives; an operator must decide
    try:
        os.kill(int(holder.get("pid", 0)), 0)
    except (ProcessLookupError, ValueError):
        return False
    except PermissionError:
        return True
    return True


def describe(holder: dict[str, Any], now: float | None = None) -> str:
    now = now if now is not None else time.time()
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(float(holder.get("started", 0))))
    quiet = now - last_sign_of_life(holder)
    if holder.get("state") == "failed":
        life = "the run FAILED and waits for `orchestrate resume` (its temporary settings are still in force)"
    elif is_stale(holder, now):
        life = f"STALE: not renewed for {quiet:.0f} s (a live run renews every {RENEW_S:.0f} s)"
    else:
        life = f"renewed {quiet:.0f} s ago"
    return f"run {holder.get('run_id')} on {holder.get('host')} (pid {holder.get('pid')}) since {started}, {life}"


def why_keep(holder: dict[str, Any]) -> str | None:
    """Why `unlock` must not remove this lock without --force (None: its run is dead)."""
    if holder.get("state") == "failed":
        return (f"run {holder.get('run_id')} failed and waits for `orchestrate resume` with its temporary settings "
                "in force; removing its lock lets another run start over them")
    dead_here = holder.get("host") == socket.gethostname() and not _alive_here(holder)
    if dead_here or is_stale(holder):
        return None
    return (f"run {holder.get('run_id')} is alive: it renewed its lock {time.time() - last_sign_of_life(holder):.0f} s "
            f"ago (a lock is stale after {STALE_S:.0f} s without renewal)")


class RunLock:
    def __init__(self, adapter: ClusterAdapter, cluster: str, run_id: str) -> None:
        self.adapter = adapter
        self.cluster = cluster  # the inventory's name, for messages
        self.doc_id = RUN_DOC
        self.run_id = run_id
        self.held = False
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None
        self.renewals_failed = 0

    def acquire(self, takeover: bool = False) -> None:
        body = {"run_id": self.run_id, "host": socket.gethostname(), "pid": os.getpid(), "started": time.time()}
        if self.adapter.create_lock(LOCK_INDEX, self.doc_id, body):
            self.held = True
            return
        holder = self.adapter.read_lock(LOCK_INDEX, self.doc_id) or {}
        same_run = holder.get("run_id") == self.run_id
        gone = holder.get("state") == "failed" or is_stale(holder) or not (
            holder.get("pid") != os.getpid() and _alive_here(holder))
        if takeover and same_run and gone:
            self.adapter.delete_lock(LOCK_INDEX, self.doc_id)
            if self.adapter.create_lock(LOCK_INDEX, self.doc_id, body):
                self.held = True
                return
        if same_run:
            raise RunLocked(f"this run is still active: {describe(holder)}. Wait for it, or stop it first.")
        raise RunLocked(f"another run holds the lock of this cluster: {describe(holder)}. Only one run at a time "
                        f"may change a cluster. If that run is dead, `orchestrate resume` on its machine finishes "
                        f"it, or `orchestrate unlock --cluster {self.cluster}` removes the lock once it is stale "
                        f"({STALE_S:.0f} s without renewal).")

    def keep_renewed(self, interval_s: float = RENEW_S) -> None:
        """Renew the lock every ``interval_s`` from a background thread until release. A failed renewal is
        counted and tried again; the lock stays, and goes stale only if renewals keep failing."""
        def renew() -> None:
            while not self._stop.wait(interval_s):
                try:
                    if not self.adapter.renew_lock(LOCK_INDEX, self.doc_id, self.run_id, {"renewed": time.time()}):
                        self.renewals_failed += 1
                except Exception:  # a renewal must never kill the run: counted instead
                    self.renewals_failed += 1

        self._renewer = threading.Thread(target=renew, name="lock-renewal", daemon=True)
        self._renewer.start()

    def mark_failed(self) -> None:
        """Kept by a failed run: said so in the lock, so that nobody takes it for a dead run's."""
        self.stop_renewing()
        try:
            self.adapter.renew_lock(LOCK_INDEX, self.doc_id, self.run_id, {"state": "failed", "renewed": time.time()})
        except Exception:  # the run's own error is the one to report
            self.renewals_failed += 1

    def stop_renewing(self) -> None:
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join(timeout=60)
            self._renewer = None

    def release(self) -> None:
        self.stop_renewing()
        if self.held:
            holder = self.adapter.read_lock(LOCK_INDEX, self.doc_id)
            if holder and holder.get("run_id") == self.run_id:
                self.adapter.delete_lock(LOCK_INDEX, self.doc_id)
            self.held = False


# --- a pause request: a document beside the lock, so `pause` works from any machine ------------------
def request_pause(adapter: ClusterAdapter, reason: str) -> bool:
    """Ask the cluster's run to pause at its next batch boundary; False when a pause is already asked."""
    body = {"reason": reason, "host": socket.gethostname(), "pid": os.getpid(), "started": time.time()}
    return adapter.create_lock(LOCK_INDEX, PAUSE_DOC, body)


def pause_request(adapter: ClusterAdapter) -> dict[str, Any] | None:
    return adapter.read_lock(LOCK_INDEX, PAUSE_DOC)


def clear_pause(adapter: ClusterAdapter) -> None:
    adapter.delete_lock(LOCK_INDEX, PAUSE_DOC)
