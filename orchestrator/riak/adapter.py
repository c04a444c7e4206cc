"""The Riak adapter: `riak` and `riak-admin` run over SSH on the nodes' hosts. The only code that
talks to a Riak cluster.

Cluster-wide questions go to the first node whose Riak answers (nodes being restarted last);
`riak-admin` on a stopped node prints "Node is not running!", and the next node is asked.
The four status commands of a snapshot go in one SSH round trip (hosts/batch.py).
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable, Collection
from typing import Any, TypeVar

from orchestrator.config.model import Inventory, NodeEntry
from orchestrator.errors import ClusterError, ClusterUnreachable, HostError
from orchestrator.hosts.batch import run_batch
from orchestrator.hosts.transport import Transport
from orchestrator.reading import lines, whole_number
from orchestrator.restart.plan import Plan
from orchestrator.riak.settings import riak_settings
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

# What riak-admin prints when the node it asks is down: 2.x, 2.x's ping, 3.x.
# What a `riak-admin` of a Riak 3.x package prints: its admin commands are `riak admin CMD`.
ADMIN_MISSING = ("relx_nodetool: not found", "riak-admin: command not found", "riak-admin: not found")
NOT_RUNNING = ("Node is not running", "Node did not respond to ping", "not responding to pings")
LOCK_DIR = "/var/lib/orchestrator-locks"  # on the lock node's host (see lock_node)
ADMIN_TIMEOUT_S = 60
T = TypeVar("T")


RIAK_KV_VERSION = re.compile(r'^riak_kv_version : (?:<<")?([0-9][0-9A-Za-z.+~-]{0,60}?)(?:">>)?\s*$', re.MULTILINE)


class RiakAdapter:
    product = "riak"

    def __init__(self, inv: Inventory, transport: Transport) -> None:
        self.inv = inv
        self.cfg = riak_settings(inv)  # checked when the inventory was opened
        self.transport = transport
        self.calls = 0
        self.admin_forms: dict[str, str] = {}  # node -> the admin command that works there

    # --- running commands ----------------------------------------------------------------------
    def admin_form(self, node: NodeEntry) -> str:
        return self.admin_forms.get(node.name, self.cfg.admin_command)

    def _admin(self, node: NodeEntry, *args: str) -> str:
        return " ".join([self.admin_form(node), *(shlex.quote(a) for a in args)])

    def _on(self, node: NodeEntry, command: str, timeout_s: float = ADMIN_TIMEOUT_S) -> tuple[int, str]:
        self.calls += 1
        result = self.transport.run(node, f"{command} 2>&1", timeout_s)
        return result.rc, result.stdout

    def _outputs(self, node: NodeEntry, commands: list[tuple[str, ...]]) -> list[str]:
        """Each admin command's output (stdout and stderr together, as riak-admin prints), in one round trip.

        Riak 3.x and OpenRiak packages run admin commands as `riak admin CMD`; their `riak-admin`, where
        present, fails with "relx_nodetool: not found". That is detected per node, said, and kept."""
        lines = [f"{self._admin(node, *c)} 2>&1" for c in commands]
        self.calls += len(lines)
        results = run_batch(self.transport, node, lines, timeout_s=ADMIN_TIMEOUT_S)
        outputs = [r.stdout for r in results] if results is not None else [self._on(node, c)[1] for c in lines]
        if self.admin_form(node) == "riak-admin" and any(m in out for out in outputs for m in ADMIN_MISSING):
            self.admin_forms[node.name] = f"{self.cfg.riak_command} admin"
            retried = self._outputs(node, commands)
            if any(m in out for out in retried for m in ADMIN_MISSING):
                raise HostError(f"{node.name}: neither `riak-admin` nor `{self.cfg.riak_command} admin` works there "
                                f"({outputs[0].strip()[-150:]}); set riak.admin_command in the inventory")
            return retried
        return outputs

    def _on_any(self, commands: list[tuple[str, ...]], what: str, accept: Callable[[list[str]], T],
                avoid: set[str] | None = None) -> T:
        """Run the admin ``commands`` on the first node where ``accept(outputs)`` parses; nodes in ``avoid`` last."""
        avoid = avoid or set()
        order = [n for n in self.inv.nodes if n.name not in avoid] + [n for n in self.inv.nodes if n.name in avoid]
        tried = []
        for node in order:
            try:
                outputs = self._outputs(node, commands)
            except HostError as exc:
                tried.append(str(exc))
                continue
            if any(said in out for out in outputs for said in NOT_RUNNING):
                tried.append(f"{node.name}: Riak is not running there")
                continue
            try:
                return accept(outputs)
            except RiakOutputError as exc:
                tried.append(f"{node.name} (`{self.admin_form(node)}`): {exc}")
        # Transient: while a node restarts the others answer; when none does, waits retry.
        raise ClusterUnreachable(f"cannot {what}: no node answered ({'; '.join(tried)})")

    # --- reads -----------------------------------------------------------------------------------
    def snapshot(self, avoid: set[str] | None = None) -> RiakSnapshot:
        commands: list[tuple[str, ...]] = [("member-status",), ("ring-status",), ("transfers",), ("transfer-limit",)]

        def parse(out: list[str]) -> RiakSnapshot:
            return RiakSnapshot(members=parse_member_status(out[0]), ring=parse_ring_status(out[1]),
                                transfers=parse_transfers(out[2]), limits=parse_transfer_limit(out[3]))

        return self._on_any(commands, "read the Riak cluster status", parse, avoid)

    def transfers(self, avoid: set[str] | None = None) -> Transfers:
        return self._on_any([("transfers",)], "read Riak transfers", lambda out: parse_transfers(out[0]), avoid)

    def limits(self) -> dict[str, int | None]:
        return self._on_any([("transfer-limit",)], "read Riak transfer limits",
                            lambda out: parse_transfer_limit(out[0]))

    def pid(self, node: NodeEntry) -> str | None:
        """The running node's OS pid, or None when `riak ping` does not answer pong."""
        riak = self.cfg.riak_command
        try:
            rc, out = self._on(node, f"{riak} ping >/dev/null 2>&1 && {self.cfg.pid_command}", 30)
        except HostError:
            return None
        pid = lines(out.strip())[-1].strip() if out.strip() else ""
        return pid if rc == 0 and whole_number(pid, 10) else None

    def running_version(self, node: NodeEntry) -> str | None:
        """The version the running node loaded (`riak_kv_version` of `riak-admin status` on its host; `riak
        version` says the release on disk instead), or None when it does not say one."""
        try:
            [out] = self._outputs(node, [("status",)])  # `riak-admin` or `riak admin`, as the node's form is
        except HostError:
            return None
        found = RIAK_KV_VERSION.search(out)
        return found.group(1) if found else None

    def wait_for_service(self, node: NodeEntry, timeout_s: float) -> tuple[bool, str]:
        """`riak-admin wait-for-service SERVICE NODE` on the node's host, bounded by ``timeout_s``."""
        def ask() -> tuple[int, str]:
            command = f"timeout {max(int(timeout_s), 1)} " + self._admin(node, "wait-for-service", self.cfg.service,
                                                                          self.cfg.riak_name(node))
            return self._on(node, command, timeout_s + 30)

        rc, out = ask()
        if self.admin_form(node) == "riak-admin" and any(m in out for m in ADMIN_MISSING):
            self.admin_forms[node.name] = f"{self.cfg.riak_command} admin"  # Riak 3.x: see _outputs
            rc, out = ask()
        up = rc == 0 and f"{self.cfg.service} is up" in out
        return up, out.strip().splitlines()[-1] if out.strip() else f"exit {rc}"

    # --- what the restart engine asks of every product (restart/adapter.py) -----------------------
    def gate_snapshot(self, plan: Plan, restarting: Collection[str], proof: bool = False,
                      window: Collection[str] | None = None) -> RiakSnapshot:
        return self.snapshot(avoid=set(restarting))

    def live_identity(self, plan: Plan, name: str) -> str | None:
        pid = self.pid(self.inv.node(name))
        return f"pid {pid}" if pid else None

    def await_identity(self, plan: Plan, name: str, timeout_s: float) -> str | None:
        return self.live_identity(plan, name)  # riak-admin has no wait: the engine polls

    def put_settings(self, scope: str, values: dict[str, Any]) -> None:
        for key, value in values.items():  # riak-admin sets one limit per call
            self.put_setting(scope, key, value)

    def put_setting(self, scope: str, key: str, value: Any) -> None:
        if key != "transfer_limit":
            raise ClusterError(f"Riak has no temporary setting {key!r}")
        if value is None:
            return  # nothing was known before: nothing to put back
        expected = f"Set transfer limit for '{scope}' to {int(value)}"
        said = self._on_any([("transfer-limit", scope, str(int(value)))],
                            f"set the transfer limit of {scope}", lambda out: out[0].strip())
        if expected not in said:
            raise ClusterError(f"setting the transfer limit of {scope} to {value} failed: {said[-300:]}")

    def live_settings(self, wanted: list[tuple[str, str]]) -> list[Any]:
        limits = self.limits() if wanted else {}
        return [limits.get(scope) if key == "transfer_limit" else None for scope, key in wanted]

    def search_counters(self) -> None:
        """Riak has no search figures of the kind watched through a run (restart/search_figures.py)."""
        return None

    def search_once(self, index: str, query: dict[str, Any]) -> bool:
        """Riak has no searches of the kind a probe times."""
        return False

    def cluster_identity(self) -> None:
        """Riak's ring has no identity of its own; its lock and journal copy are files on its first node's host."""
        return None

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

    # --- the run lock: a file created exclusively on the lock node's host -----------------------------
    @property
    def lock_node(self) -> NodeEntry:
        """The node whose host keeps the lock: the one of the smallest Riak node name, the cluster's own
        identity, so that every inventory of the cluster (the plan checks each names every member) keeps
        it in the same place, whatever its order of nodes."""
        return min(self.inv.nodes, key=self.cfg.riak_name)

    def _lock_path(self, index: str, doc_id: str) -> str:
        return shlex.quote(f"{LOCK_DIR}/{index}-{doc_id}.json")

    def create_lock(self, index: str, doc_id: str, body: dict[str, Any]) -> bool:
        path, data = self._lock_path(index, doc_id), shlex.quote(json.dumps(body))
        script = (f"mkdir -p {LOCK_DIR} || exit 3; if (set -C; printf '%s' {data} > {path}) 2>/dev/null; "
                  f"then exit 0; elif [ -e {path} ]; then exit 1; else exit 3; fi")
        rc, out = self._on(self.lock_node, script, 30)
        if rc not in (0, 1):
            raise ClusterError(f"cannot write the run lock {path} on {self.lock_node.name}: {out.strip()[-200:]}")
        return rc == 0

    def read_lock(self, index: str, doc_id: str) -> dict[str, Any] | None:
        path = self._lock_path(index, doc_id)
        rc, out = self._on(self.lock_node, f"if [ -e {path} ]; then cat {path}; else exit 1; fi", 30)
        if rc != 0:
            return None
        try:
            return dict(json.loads(out))
        except (ValueError, TypeError, RecursionError):  # not a lock this tool wrote
            return {"run_id": "?", "host": "?", "note": f"unreadable lock file {path}: {out.strip()[:100]}"}

    def delete_lock(self, index: str, doc_id: str) -> None:
        self._on(self.lock_node, f"rm -f {self._lock_path(index, doc_id)}", 30)

    def write_lock_document(self, index: str, doc_id: str, body: dict[str, Any]) -> None:
        path, data = self._lock_path(index, doc_id), shlex.quote(json.dumps(body))
        rc, out = self._on(self.lock_node, f"mkdir -p {LOCK_DIR} && printf '%s' {data} > {path}.new && mv -f "
                                           f"{path}.new {path}", 30)  # replaced in one rename
        if rc != 0:
            raise ClusterError(f"cannot write {path} on {self.lock_node.name}: {out.strip()[-200:]}")

    def renew_lock(self, index: str, doc_id: str, run_id: str, update: dict[str, Any]) -> bool:
        held = self.read_lock(index, doc_id)
        if held is None or held.get("run_id") != run_id:
            return False
        path, data = self._lock_path(index, doc_id), shlex.quote(json.dumps({**held, **update}))
        # Replaced in one rename; only while the file still names this run.
        script = (f"grep -qF {shlex.quote(json.dumps(run_id))} {path} && printf '%s' {data} > {path}.new "
                  f"&& mv -f {path}.new {path}")
        return self._on(self.lock_node, script, 30)[0] == 0
