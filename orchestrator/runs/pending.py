"""`orchestrate pending` and `plan/restart --pending`: which nodes need a restart, and why. The cluster says
what each node runs (its product's `running_nodes`), each host what is installed and configured
(pending/host.py, one read-only command per host, in parallel), and pending/verdict.py judges.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from orchestrator import products
from orchestrator.config.matching import matched
from orchestrator.config.model import Inventory, NodeEntry, settings_of
from orchestrator.errors import OrchestratorError
from orchestrator.hosts.transport import Transport
from orchestrator.paths import write_file_for_the_operator
from orchestrator.pending.host import HostAsk, host_command, parse_host
from orchestrator.pending.verdict import REASONS, NodePending, RunningNode, judge, version_problem
from orchestrator.restart.adapter import ClusterAdapter
from orchestrator.restart.journal import RunOptions
from orchestrator.restart.product import Product
from orchestrator.runs.target import Target, transport_of

EXIT_PENDING = 1  # a node needs a restart
EXIT_UNKNOWN = 9  # none is known to, but what some node runs could not be read
READERS = 16  # hosts read at once


@dataclass(frozen=True)
class PendingReport:
    cluster: str
    nodes: tuple[NodePending, ...]
    read_at: float

    @property
    def pending(self) -> list[str]:
        return [n.node for n in self.nodes if n.state == "pending"]

    @property
    def reboots(self) -> list[str]:
        return [n.node for n in self.nodes if n.reboot]

    @property
    def unknown(self) -> list[str]:
        return [n.node for n in self.nodes if n.state == "unknown"]

    @property
    def exit_code(self) -> int:
        return EXIT_PENDING if self.pending else EXIT_UNKNOWN if self.unknown else 0

    def summary(self) -> dict[str, Any]:
        result = "pending" if self.pending else "unknown" if self.unknown else "nothing pending"
        return {"result": result, "cluster": self.cluster, "pending": self.pending, "reboot": self.reboots,
                "unknown": self.unknown, "clean": [n.node for n in self.nodes if n.state == "clean"]}


def read_pending(inv: Inventory, product: Product[Any, Any], adapter: ClusterAdapter[Any],
                 transport: Transport, names: Sequence[str] | None = None) -> PendingReport:
    """Each inventory node's verdict (``names``: only those). Read-only."""
    running = product.running_nodes(adapter)
    wanted = [n for n in inv.nodes if names is None or n.name in names]
    unit = inv.service.unit if inv.service.manager == "systemd" else ""  # commands: no unit to read
    matched = {entry.name: _match(entry, running) for entry in wanted}

    def one(entry: NodeEntry) -> NodePending:
        node = matched[entry.name]
        if node is None:
            return NodePending(entry.name, unknown=("the cluster does not list it (down, or not joined): what it "
                                                    "runs cannot be read",))
        ask = HostAsk(pid=node.pid, unit=unit, package=node.package, files=node.files,
                      settings_file=node.settings_file, version_jars=node.version_jars,
                      version_file=node.version_file)
        try:
            result = transport.run(entry, host_command(ask), inv.ssh.connect_timeout_s + 30)
        except OrchestratorError as exc:
            return NodePending(entry.name, unknown=(f"its host did not answer: {str(exc)[:300]}",))
        if not result.ok:
            return NodePending(entry.name, unknown=(f"its host's read failed (exit {result.rc}): "
                                                    f"{result.stderr.strip()[:300]}",))
        return judge(entry.name, unit, node, parse_host(result.stdout))

    with ThreadPoolExecutor(max_workers=max(1, min(READERS, len(wanted)))) as pool:
        verdicts = tuple(pool.map(one, wanted))
    return PendingReport(inv.cluster.name, verdicts, time.time())


def _match(entry: NodeEntry, running: list[RunningNode]) -> RunningNode | None:
    """The running node of an inventory entry, as the plan matches it (config/matching.py)."""
    found, _ = matched(entry.name, entry.host, [(n.name, n.addresses) for n in running])
    return running[found] if found is not None else None


def pending_of(inv: Inventory, names: Sequence[str] | None = None,
               transport: Callable[[Inventory], Transport] = transport_of) -> PendingReport:
    """`orchestrate pending`: the inventory's cluster read, its hosts' connections closed at the end."""
    product = products.get(inv.cluster.product)
    settings_of(inv, product.settings)
    adapter = product.connect(inv)
    hosts = transport(inv)
    try:
        return read_pending(inv, product, adapter, hosts, names)
    finally:
        hosts.close()
        closing = getattr(adapter, "close", None)
        if callable(closing):
            closing()


def target_pending(target: Target) -> PendingReport:
    """The pending report of a run's target (its adapter; the hosts' own connections, closed at the end)."""
    hosts = transport_of(target.inv)
    try:
        return read_pending(target.inv, target.product, target.cluster, hosts)
    finally:
        hosts.close()


def pending_options(report: PendingReport, options: RunOptions) -> RunOptions | None:
    """`--pending`: the run restarts the pending nodes (of those --nodes and --exclude choose), rebooting the
    hosts that wait for a reboot; None when no node is pending (nothing to plan)."""
    nodes = tuple(n for n in report.pending if options.chooses(n))
    if not nodes:
        return None
    return replace(options, nodes=nodes, exclude=(), reboot_nodes=tuple(n for n in report.reboots if n in nodes))


def pending_problems(report: PendingReport, options: RunOptions) -> list[str]:
    """What refuses a `--pending` run before anything changes: a chosen node whose installed version it must
    not be restarted into."""
    chosen = set(options.nodes)
    return [problem for n in report.nodes if n.node in chosen for r in n.reasons
            if (problem := version_problem(n.node, r)) is not None]


def nothing_pending(report: PendingReport) -> str:
    unknown = (f"; what {', '.join(report.unknown)} run(s) could not be read (`orchestrate pending` says why)"
               if report.unknown else "")
    return f"no node of {report.cluster} needs a restart{unknown}"


def pending_notes(report: PendingReport, chosen: RunOptions | None = None) -> tuple[str, ...]:
    """What the plan of a `--pending` run says of each node: why it restarts, or why it is left alone
    (``chosen``: the run's options, whose nodes alone are restarted)."""
    runs = set(chosen.nodes) if chosen is not None else set(report.pending)
    notes = [f"{n.node}: {'rebooted with its host' if n.reboot else 'restarted'} ({'; '.join(map(str, n.reasons))})"
             for n in report.nodes if n.reasons and n.node in runs]
    notes += [f"{n.node}: pending ({'; '.join(map(str, n.reasons))}), left alone: --nodes or --exclude leaves it out"
              for n in report.nodes if n.reasons and n.node not in runs]
    clean = [n.node for n in report.nodes if n.state == "clean"]
    if clean:
        notes.append(f"left alone, nothing pending: {', '.join(clean)}")
    notes += [f"{n.node}: left alone, what it runs could not be read: {'; '.join(n.unknown)}"
              for n in report.nodes if n.state == "unknown"]
    return tuple(notes)


def write_textfile(report: PendingReport, path: Path) -> None:
    """`orchestrator_node_restart_pending{cluster,node,reason}` for node_exporter's textfile collector: 1 for
    each reason a node has, 0 for each it has not, and reason="unknown" 1 where it could not be read."""
    from prometheus_client import CollectorRegistry, Gauge, generate_latest

    registry = CollectorRegistry()
    gauge = Gauge("orchestrator_node_restart_pending", "1 when the node needs a restart for the reason "
                  "(orchestrate pending); reason=unknown: what it runs could not be read",
                  ["cluster", "node", "reason"], registry=registry)
    for node in report.nodes:
        found = {r.kind for r in node.reasons}
        for reason in REASONS:
            gauge.labels(report.cluster, node.node, reason).set(1 if reason in found else 0)
        gauge.labels(report.cluster, node.node, "unknown").set(1 if node.unknown else 0)
    Gauge("orchestrator_pending_checked_timestamp_seconds", "when orchestrate pending last read the cluster",
          ["cluster"], registry=registry).labels(report.cluster).set(report.read_at)
    write_file_for_the_operator(path, generate_latest(registry).decode(), mode=0o644)
