"""The run lock, kept with the cluster itself so that it also excludes operators on other machines.

Taking it is one atomic create (an Elasticsearch `_create` of a document named after the
cluster; for Riak, an exclusive create of a file on the first node's host): of two runs racing,
exactly one succeeds. `resume` of the same run takes the lock over when the process that held
it is gone.
"""

from __future__ import annotations

import os
import socket
import time
from typing import Any

from orchestrator.errors import RunLocked
from orchestrator.restart.adapter import ClusterAdapter

LOCK_INDEX = "orchestrator-locks"


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


def describe(holder: dict[str, Any]) -> str:
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(float(holder.get("started", 0))))
    return f"run {holder.get('run_id')} on {holder.get('host')} (pid {holder.get('pid')}) since {started}"


class RunLock:
    def __init__(self, adapter: ClusterAdapter, cluster: str, run_id: str) -> None:
        self.adapter = adapter
        self.doc_id = cluster
        self.run_id = run_id
        self.held = False

    def acquire(self, takeover: bool = False) -> None:
        body = {"run_id": self.run_id, "host": socket.gethostname(), "pid": os.getpid(), "started": time.time()}
        if self.adapter.create_lock(LOCK_INDEX, self.doc_id, body):
            self.held = True
            return
        holder = self.adapter.read_lock(LOCK_INDEX, self.doc_id) or {}
        same_run = holder.get("run_id") == self.run_id
        if takeover and same_run and not (holder.get("pid") != os.getpid() and _alive_here(holder)):
            self.adapter.delete_lock(LOCK_INDEX, self.doc_id)
            if self.adapter.create_lock(LOCK_INDEX, self.doc_id, body):
                self.held = True
                return
        if same_run:
            raise RunLocked(f"this run is still active: {describe(holder)}. Wait for it, or stop it first.")
        raise RunLocked(f"another run holds the lock of this cluster: {describe(holder)}. Only one run at a time "
                        f"may change a cluster. If that run is dead, `orchestrate resume` on its machine finishes "
                        f"it, or `orchestrate unlock --cluster {self.doc_id}` removes the lock.")

    def release(self) -> None:
        if self.held:
            holder = self.adapter.read_lock(LOCK_INDEX, self.doc_id)
            if holder and holder.get("run_id") == self.run_id:
                self.adapter.delete_lock(LOCK_INDEX, self.doc_id)
            self.held = False


# --- a pause request: a document beside the lock, so `pause` works from any machine ------------------
def pause_doc(cluster: str) -> str:
    return f"{cluster}.pause"


def request_pause(adapter: ClusterAdapter, cluster: str, reason: str) -> bool:
    """Ask the cluster's run to pause at its next batch boundary; False when a pause is already asked."""
    body = {"reason": reason, "host": socket.gethostname(), "pid": os.getpid(), "started": time.time()}
    return adapter.create_lock(LOCK_INDEX, pause_doc(cluster), body)


def pause_request(adapter: ClusterAdapter, cluster: str) -> dict[str, Any] | None:
    return adapter.read_lock(LOCK_INDEX, pause_doc(cluster))


def clear_pause(adapter: ClusterAdapter, cluster: str) -> None:
    adapter.delete_lock(LOCK_INDEX, pause_doc(cluster))
