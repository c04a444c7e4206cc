"""The Riak adapter: `riak` and `riak-admin` run over SSH on the nodes' hosts. The only code that
talks to a Riak cluster.

Cluster-wide questions go to the first node whose Riak answers (nodes being restarted last);
`riak-admin` on a stopped node prints "Node is not running!", and the next node is asked.
The four status commands of a snapshot go in one SSH round trip.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Collection
from typing import Any

from orchestrator.config.model import Inventory, NodeEntry
from orchestrator.errors import ClusterError, ClusterUnreachable, HostError
from orchestrator.hosts.transport import Transport
from orchestrator.restart.plan import Plan
from orchestrator.riak.status import (
    RiakOutputError,
    RiakSnapshot,
    Transfers,
    cluster_problems,
    parse_member_status,
    parse_ring_status,
    parse_transfer_limit,
    parse_transfers,
)

SEPARATOR = "@@orchestrator-section@@"
NOT_RUNNING = "Node is not running"
LOCK_DIR = "/var/lib/orchestrator-locks"  # on the first node's host
ADMIN_TIMEOUT_S = 60


class RiakAdapter:
    product = "riak"

    def __init__(self, inv: Inventory, transport: Transport) -> None:
        self.inv = inv
        self.cfg = inv.riak
        self.transport = transport
        self.calls = 0

    # --- running commands ----------------------------------------------------------------------
    def _admin(self, *args: str) -> str:
        return " ".join([self.cfg.admin_command, *(shlex.quote(a) for a in args)])

    def _on(self, node: NodeEntry, command: str, timeout_s: float = ADMIN_TIMEOUT_S) -> tuple[int, str]:
        self.calls += 1
        result = self.transport.run(node, f"{command} 2>&1", timeout_s)
        return result.rc, result.stdout

    def _on_any(self, command: str, what: str, accept: Any, avoid: set[str] | None = None) -> Any:
        """Run ``command`` on the first node where ``accept(output)`` parses; nodes in ``avoid`` last."""
        avoid = avoid or set()
        order = [n for n in self.inv.nodes if n.name not in avoid] + [n for n in self.inv.nodes if n.name in avoid]
        tried = []
        for node in order:
            try:
                _, out = self._on(node, command)
            except HostError as exc:
                tried.append(str(exc))
                continue
            if NOT_RUNNING in out:
                tried.append(f"{node.name}: Riak is not running there")
                continue
            try:
                return accept(out)
            except RiakOutputError as exc:
                tried.append(f"{node.name}: {exc}")
        # Transient: while a node restarts the others answer; when none does, waits retry.
        raise ClusterUnreachable(f"cannot {what}: no node answered ({'; '.join(tried)})")

    # --- reads -----------------------------------------------------------------------------------
    def snapshot(self, avoid: set[str] | None = None) -> RiakSnapshot:
        commands = [self._admin(c) for c in ("member-status", "ring-status", "transfers", "transfer-limit")]
        script = f"; echo {SEPARATOR}; ".join(f"{c} 2>&1" for c in commands)

        def parse(out: str) -> RiakSnapshot:
            parts = out.split(SEPARATOR + "\n")
            if len(parts) != 4:
                raise RiakOutputError(f"expected 4 sections of riak-admin output, got {len(parts)}")
            return RiakSnapshot(members=parse_member_status(parts[0]), ring=parse_ring_status(parts[1]),
                                transfers=parse_transfers(parts[2]), limits=parse_transfer_limit(parts[3]))

        return self._on_any(script, "read the Riak cluster status", parse, avoid)  # type: ignore[no-any-return]

    def transfers(self, avoid: set[str] | None = None) -> Transfers:
        return self._on_any(self._admin("transfers"), "read Riak transfers", parse_transfers, avoid)  # type: ignore[no-any-return]

    def limits(self) -> dict[str, int | None]:
        return self._on_any(self._admin("transfer-limit"), "read Riak transfer limits",  # type: ignore[no-any-return]
                            parse_transfer_limit)

    def pid(self, node: NodeEntry) -> str | None:
        """The running node's OS pid, or None when `riak ping` does not answer pong."""
        riak = self.cfg.riak_command
        try:
            rc, out = self._on(node, f"{riak} ping >/dev/null 2>&1 && {self.cfg.pid_command}", 30)
        except HostError:
            return None
        pid = out.strip().splitlines()[-1].strip() if out.strip() else ""
        return pid if rc == 0 and pid.isdigit() else None

    def wait_for_service(self, node: NodeEntry, timeout_s: float) -> tuple[bool, str]:
        """`riak-admin wait-for-service SERVICE NODE` on the node's host, bounded by ``timeout_s``."""
        command = f"timeout {max(int(timeout_s), 1)} " + self._admin("wait-for-service", self.cfg.service,
                                                                      node.riak_name)
        rc, out = self._on(node, command, timeout_s + 30)
        up = rc == 0 and f"{self.cfg.service} is up" in out
        return up, out.strip().splitlines()[-1] if out.strip() else f"exit {rc}"

    # --- what the restart engine asks of every product (restart/adapter.py) -----------------------
    def gate_snapshot(self, restarting: Collection[str]) -> RiakSnapshot:
        return self.snapshot(avoid=set(restarting))

    def live_identity(self, plan: Plan, name: str) -> str | None:
        pid = self.pid(self.inv.node(name))
        return f"pid {pid}" if pid else None

    def put_setting(self, scope: str, key: str, value: Any) -> None:
        if key != "transfer_limit":
            raise ClusterError(f"Riak has no temporary setting {key!r}")
        if value is None:
            return  # nothing was known before: nothing to put back
        expected = f"Set transfer limit for '{scope}' to {int(value)}"
        said = self._on_any(self._admin("transfer-limit", scope, str(int(value))),
                            f"set the transfer limit of {scope}", lambda out: out.strip())
        if expected not in said:
            raise ClusterError(f"setting the transfer limit of {scope} to {value} failed: {said[-300:]}")

    def live_settings(self, wanted: list[tuple[str, str]]) -> list[Any]:
        limits = self.limits() if wanted else {}
        return [limits.get(scope) if key == "transfer_limit" else None for scope, key in wanted]

    def health_summary(self) -> dict[str, Any]:
        snap = self.snapshot()
        problems = cluster_problems(snap)
        valid = sum(1 for m in snap.members if m.status == "valid")
        down = sorted(set(snap.ring.unreachable) | set(snap.transfers.down))
        return {"status": "ready" if not problems else "not ready", "number_of_nodes": len(snap.members) - len(down),
                "members": len(snap.members), "valid": valid, "ring_ready": snap.ring.ring_ready,
                "unreachable": down, "transfers": snap.transfers.describe(),
                "text": f"{'ready' if not problems else 'NOT ready'}, {valid}/{len(snap.members)} members valid, "
                        f"ring ready {str(snap.ring.ring_ready).lower()}, {snap.transfers.describe()}"
                        + (f", unreachable: {', '.join(down)}" if down else "")}

    # --- the run lock: a file created exclusively on the first node's host ------------------------
    def _lock_path(self, index: str, doc_id: str) -> str:
        return shlex.quote(f"{LOCK_DIR}/{index}-{doc_id}.json")

    def create_lock(self, index: str, doc_id: str, body: dict[str, Any]) -> bool:
        path, data = self._lock_path(index, doc_id), shlex.quote(json.dumps(body))
        script = (f"mkdir -p {LOCK_DIR} || exit 3; if (set -C; printf '%s' {data} > {path}) 2>/dev/null; "
                  f"then exit 0; elif [ -e {path} ]; then exit 1; else exit 3; fi")
        rc, out = self._on(self.inv.nodes[0], script, 30)
        if rc not in (0, 1):
            raise ClusterError(f"cannot write the run lock {path} on {self.inv.nodes[0].name}: {out.strip()[-200:]}")
        return rc == 0

    def read_lock(self, index: str, doc_id: str) -> dict[str, Any] | None:
        path = self._lock_path(index, doc_id)
        rc, out = self._on(self.inv.nodes[0], f"if [ -e {path} ]; then cat {path}; else exit 1; fi", 30)
        if rc != 0:
            return None
        try:
            return dict(json.loads(out))
        except ValueError:
            return {"run_id": "?", "host": "?", "note": f"unreadable lock file {path}: {out.strip()[:100]}"}

    def delete_lock(self, index: str, doc_id: str) -> None:
        self._on(self.inv.nodes[0], f"rm -f {self._lock_path(index, doc_id)}", 30)
