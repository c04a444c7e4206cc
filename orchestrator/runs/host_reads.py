"""What a plan reads on the cluster's hosts, over one transport opened for the plan: what each host
carries (hosts/capacity.py: its links, the kind of disk under its data paths), which kernel it runs on,
and each node's last restart in its own log (restart/durations.py). All read-only, in parallel, for at
most `HOSTS_READ` nodes; a host that does not answer is left out, and reading never fails a plan.
"""

from __future__ import annotations

import shlex
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from types import TracebackType
from typing import TypeVar

from orchestrator.config.model import NodeEntry
from orchestrator.errors import OrchestratorError
from orchestrator.hosts.capacity import HostCapacity, capacity_command, parse_capacity
from orchestrator.hosts.transport import Transport
from orchestrator.restart.durations import WANTED, LastRestart, last_restart, shared_cpu_starts
from orchestrator.restart.plan import Plan
from orchestrator.runs.target import Target, transport_of

HOSTS_READ = 24  # nodes whose hosts a plan reads (in parallel); the others are taken as alike
# Which kernel a host runs on, as far as hosts can tell: its boot time (not a container's own: containers of
# one machine share it) and its CPUs. Two machines booted in the same second with as many CPUs are taken
# for one (their nodes' starts then count shorter).
KERNEL_OF_HOST = "echo \"kernel $(grep -m1 '^btime ' /proc/stat) cpus $(nproc)\""
T = TypeVar("T")


def in_background(read: Callable[[], T], name: str = "host-reads") -> Future[T]:
    """``read`` begun in a daemon thread: a plan refused by the cluster never waits for a host that does
    not answer. What it raises is raised by the future's result(), in the caller's thread."""
    done: Future[T] = Future()

    def run() -> None:
        try:
            done.set_result(read())
        except BaseException as exc:
            done.set_exception(exc)

    threading.Thread(target=run, name=name, daemon=True).start()
    return done


class HostReads:
    """The plan's reads on the hosts, over one transport: its own (connections opened once, closed at the
    end), or ``shared``, the run's (the SSH preflight's connections, begun at the same time: see
    runs/restart.py EarlyHostCheck), which the run closes."""

    def __init__(self, target: Target, shared: Callable[[], Transport] | None = None) -> None:
        self.target = target
        self.timeout_s = target.inv.ssh.connect_timeout_s + 5
        self.kernels: dict[str, str] = {}  # inventory name -> its host's kernel, read with its capacity
        self.unanswered: set[str] = set()  # nodes whose host did not answer: not asked again by this plan
        self._shared = shared
        self._transport: Transport | None = None
        self._node_logs: Future[dict[str, str]] | None = None
        self._capacity: Future[dict[str, HostCapacity]] | None = None

    def __enter__(self) -> HostReads:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if self._shared is not None:
            return
        # A plan refused while the hosts still answer (the cluster's error came first): its own
        # connections close when their reads end, not under them.
        if self._capacity is not None:
            self._capacity.add_done_callback(lambda _done: self._close_own())
        else:
            self._close_own()

    def _close_own(self) -> None:
        if self._transport is not None:
            self._transport.close()

    def begin(self) -> Future[dict[str, HostCapacity]]:
        """The reads that need no plan begun now, while the cluster's state is read: the hosts' capacity
        (its result) and where the nodes keep their logs (for `last_restarts`)."""
        self._node_logs = in_background(lambda: self.target.product.node_logs(self.target.cluster))
        self._capacity = in_background(self.capacity)
        return self._capacity

    def _in_parallel(self, nodes: Sequence[NodeEntry], command: Callable[[NodeEntry], str],
                     read: Callable[[NodeEntry, str], T | None]) -> dict[str, T]:
        """Each node's host's answer to its command, read; a host that does not answer is left out (and
        not asked again: a host that is down costs the plan one connection timeout, not one per read)."""
        nodes = [n for n in nodes if n.name not in self.unanswered]
        if not nodes:
            return {}
        try:
            if self._transport is None:
                self._transport = self._shared() if self._shared is not None else transport_of(self.target.inv)
            transport = self._transport
        except OrchestratorError:
            return {}

        def one(node: NodeEntry) -> tuple[str, T | None]:
            try:
                result = transport.run(node, command(node), self.timeout_s)
            except OrchestratorError:
                self.unanswered.add(node.name)
                return node.name, None
            return node.name, read(node, result.stdout) if result.ok else None

        with ThreadPoolExecutor(max_workers=min(len(nodes), 16)) as pool:
            found = dict(pool.map(one, nodes))
        return {name: value for name, value in found.items() if value is not None}

    def capacity(self) -> dict[str, HostCapacity]:
        """Inventory name -> what its host carries (and its kernel, kept for `last_restarts`)."""
        def read(node: NodeEntry, out: str) -> HostCapacity:
            kernel = next((line for line in out.splitlines() if line.startswith("kernel btime ")), None)
            if kernel:
                self.kernels[node.name] = kernel
            return parse_capacity(out)

        return self._in_parallel(self.target.inv.nodes[:HOSTS_READ],
                                 lambda n: f"{capacity_command([str(p) for p in n.data_paths])}; {KERNEL_OF_HOST}",
                                 read)

    def last_restarts(self, plan: Plan) -> dict[str, LastRestart]:
        """Inventory name -> the node's last restart, from its own log on its host; starts that shared a
        kernel's CPUs counted at their share (restart/durations.py)."""
        try:
            files = (self._node_logs.result() if self._node_logs is not None
                     else self.target.product.node_logs(self.target.cluster))
        except OrchestratorError:
            return {}
        paths = {name: files[i] for name, i in plan.node_ids.items() if i in files}
        nodes = [n for n in self.target.inv.nodes if n.name in paths][:HOSTS_READ]
        measured = self._in_parallel(
            nodes, lambda n: f"grep -aE {shlex.quote(WANTED)} {shlex.quote(paths[n.name])} | tail -n 40",
            lambda n, out: last_restart(out))
        return shared_cpu_starts(measured, self.kernels)
