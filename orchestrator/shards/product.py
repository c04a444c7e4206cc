"""What Elasticsearch and OpenSearch share as product plug-ins of the restart engine (see
restart/product.py): the pure plan, gate and stop check over the shared snapshot, the steps, the
columns, saved snapshots. Each product adds its name, playbooks and client (es/, opensearch/)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Generic, TypeVar

from orchestrator.config.loader import read_bytes_of, strict_json
from orchestrator.config.model import Inventory, ProductSettings
from orchestrator.config.playbook import Playbook
from orchestrator.errors import ConfigError
from orchestrator.hosts.capacity import HostCapacity
from orchestrator.hosts.transport import Transport
from orchestrator.pending.verdict import RunningNode
from orchestrator.restart.budget import Budget, window_asked
from orchestrator.restart.journal import RunOptions
from orchestrator.restart.plan import Mode, Plan
from orchestrator.restart.product import Column, RunStepFn
from orchestrator.restart.steps import StepFn
from orchestrator.shards import safety, steps
from orchestrator.shards.adapter import ShardClusterAdapter
from orchestrator.shards.limits import RATE
from orchestrator.shards.plan import build_plan, match_nodes
from orchestrator.shards.running import running_nodes
from orchestrator.shards.snapshot import ClusterSnapshot
from orchestrator.shards.versions import ELASTICSEARCH_PATHS, UpgradePaths
from orchestrator.shards.window import planned_for_a_window, window_check, window_notes, windowed
from orchestrator.units import human_bytes

MAX_SNAPSHOT_BYTES = 2_000_000_000  # well above a saved state of 5,000 nodes and 1,000,000 copies (bench_plan)


# The adapter of a product on the shard model: Elasticsearch's is the shared one, OpenSearch's adds its
# weighted routing.
ShardAdapterT = TypeVar("ShardAdapterT", bound=ShardClusterAdapter)


class ShardProduct(Generic[ShardAdapterT]):
    """Implements `Product[ClusterSnapshot, ShardAdapterT]` for each product on the shard model."""

    name: str  # the product's, its package's and its settings file's
    batch_steps: Mapping[str, StepFn[ShardAdapterT]] = steps.STEPS
    run_steps: Mapping[str, RunStepFn[ShardAdapterT]] = steps.RUN_STEPS
    settings: type[ProductSettings] = ProductSettings  # none of their own: the cluster section says all
    discovers = True
    checks_before_stop = True
    recovery_rate_key: str | None = RATE
    exact_sudo_rules = True  # the adapter speaks HTTP; on the hosts only the generic steps run
    upgrade_paths: UpgradePaths = ELASTICSEARCH_PATHS
    order_rules: tuple[tuple[str, str], ...] = (
        ("restrict_allocation", "restore_allocation"), ("restrict_allocation", "stop_service"),
        ("flush", "stop_service"), ("flush", "wait_for_retention_leases"),
        ("wait_for_retention_leases", "stop_service"), ("wait_for_join", "restore_allocation"),
        ("restore_allocation", "wait_for_recovery"), ("install_version", "upgrade_plugins"),
        ("upgrade_plugins", "start_service"), ("wait_for_join", "check_version"), ("remember_copies", "stop_service"),
        ("wait_for_join", "wait_for_own_recovery"))
    plan_columns = (Column("shard copies", lambda f: str(int(f.get("shard_copies", 0)))),
                    Column("size", lambda f: human_bytes(int(f.get("bytes", 0)))))
    report_columns = (Column("from peers", lambda f: human_bytes(int(f["bytes_from_peers"]))
                             if "bytes_from_peers" in f else "-"),
                      Column("reused", lambda f: human_bytes(int(f["bytes_reused"])) if "bytes_reused" in f else "-"))

    def plan(self, inv: Inventory, snapshot: ClusterSnapshot, mode: Mode, options: RunOptions,
             tuning: tuple[str, ...]) -> Plan:
        plan = build_plan(inv, snapshot, mode, tuning=tuning, allow_yellow=options.allow_yellow,
                          allow_unavailable=options.allow_unavailable, upgrade_to=options.upgrade_to,
                          snapshot_check=options.snapshot_check, paths=self.upgrade_paths)
        if window_asked(options.max_unavailable):
            plan = planned_for_a_window(plan, snapshot, inv, bool(options.reboot or options.reboot_nodes),
                                        keep_order=bool(options.upgrade_to))
        return plan

    def window_notes(self, snapshot: ClusterSnapshot, plan: Plan, inv: Inventory,
                     options: RunOptions) -> tuple[str, ...]:
        return tuple(window_notes(snapshot, plan, inv, Budget.parse(options.max_unavailable)))

    def window_check(self, snapshot: ClusterSnapshot, plan: Plan, inv: Inventory, candidate: str,
                     window: Sequence[str], options: RunOptions) -> list[str]:
        return window_check(snapshot, plan, inv, candidate, window, options)

    def window_partners(self, snapshot: ClusterSnapshot, plan: Plan, candidate: str) -> frozenset[str]:
        node_id = plan.node_ids.get(candidate)
        names = {i: name for name, i in plan.node_ids.items()}
        mine = {(c.index, c.shard) for c in snapshot.shards if c.node_id == node_id}
        return frozenset(names[c.node_id] for c in snapshot.shards
                         if (c.index, c.shard) in mine and c.node_id in names and c.node_id != node_id)

    def windowed(self, playbook: Playbook) -> Playbook:
        return windowed(playbook)

    def node_logs(self, adapter: ShardAdapterT) -> dict[str, str]:
        return adapter.node_log_files()

    def running_nodes(self, adapter: ShardAdapterT) -> list[RunningNode]:
        return running_nodes(adapter.running_nodes(), self.name)

    def with_host_capacity(self, inv: Inventory, snapshot: ClusterSnapshot,
                           capacity: Mapping[str, HostCapacity]) -> ClusterSnapshot:
        ids, _ = match_nodes(inv, snapshot)
        read = {ids[name]: c for name, c in capacity.items() if name in ids and c.bytes_s}
        return replace(snapshot, nodes=tuple(
            replace(n, host_bytes_s=read[n.id].bytes_s, host_said=read[n.id].text) if n.id in read else n
            for n in snapshot.nodes))

    def host_transport(self, inv: Inventory) -> Transport | None:
        return None

    def with_upgrade_facts(self, adapter: ShardAdapterT, snapshot: ClusterSnapshot) -> ClusterSnapshot:
        return replace(snapshot, upgrade=adapter.upgrade_facts())

    def gate(self, snapshot: ClusterSnapshot, plan: Plan, nodes: Sequence[str], options: RunOptions) -> list[str]:
        return safety.gate(snapshot, plan, tuple(nodes), options)

    def stop_check(self, snapshot: ClusterSnapshot, plan: Plan, nodes: Sequence[str], options: RunOptions) -> list[str]:
        return safety.stop_check(snapshot, plan, tuple(nodes), options)

    def load_snapshot(self, path: Path) -> ClusterSnapshot:
        data = read_bytes_of(path, limit=MAX_SNAPSHOT_BYTES)
        try:
            return ClusterSnapshot.from_json(strict_json(data))
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
            raise ConfigError(str(path), [f"not a cluster snapshot written by --save-snapshot: "
                                          f"{type(exc).__name__}: {str(exc)[:200]}"]) from None

    def dump_snapshot(self, snapshot: ClusterSnapshot) -> dict[str, Any]:
        return snapshot.to_json()
