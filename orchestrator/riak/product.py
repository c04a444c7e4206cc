"""Riak KV as a product plug-in of the restart engine (see restart/product.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

from orchestrator.config.discovered import Facts
from orchestrator.config.model import ClusterSection, Inventory, NodeEntry
from orchestrator.config.playbook import Playbook
from orchestrator.errors import ConfigError
from orchestrator.hosts.capacity import HostCapacity
from orchestrator.hosts.transport import Transport
from orchestrator.pending.verdict import RunningNode
from orchestrator.restart.budget import window_asked
from orchestrator.restart.journal import RunOptions
from orchestrator.restart.plan import Mode, Plan
from orchestrator.restart.product import Column, Product, not_discoverable
from orchestrator.riak import steps
from orchestrator.riak.adapter import RiakAdapter
from orchestrator.riak.plan import build_riak_plan
from orchestrator.riak.settings import RiakSettings
from orchestrator.riak.status import RiakSnapshot, cluster_problems

RIAK_ETC = "/etc/riak"  # where the Riak package keeps riak.conf, advanced.config and vm.args
RIAK_RELEASE = "/usr/lib/riak/releases/start_erl.data"  # the installed release: "ERTS_VERSION RELEASE_VERSION"


NO_WINDOW = ("--max-unavailable above 1 is refused for Riak: two members away at once can take two primaries of "
             "one preflist, and no rule of this tool proves that safe yet (docs/riak.md). Leave it out: Riak "
             "restarts one node at a time")


class RiakProduct:
    name = "riak"
    default_playbook = "riak-rolling"
    upgrade_playbook: str | None = None
    batch_steps = steps.STEPS
    run_steps = steps.RUN_STEPS
    settings = RiakSettings  # riak: in the inventory
    client_loggers: tuple[str, ...] = ()  # it speaks through the hosts' transport, whose log is always kept
    discovers = False
    checks_before_stop = False
    recovery_rate_key: str | None = None  # its transfer limit is a count per node, not a rate
    exact_sudo_rules = False  # riak-admin runs through a root shell (as the riak user); no exact rules yet
    order_rules = (("start_service", "wait_for_service"), ("wait_for_join", "wait_for_service"),
                   ("wait_for_service", "wait_for_handoffs"), ("start_service", "wait_for_handoffs"),
                   ("stop_service", "note_handoffs_due"), ("note_handoffs_due", "start_service"))
    plan_columns = (Column("ring share", lambda f: f"{f['ring_pct']:.1f}%" if "ring_pct" in f else "-"),)
    report_columns = (Column("handoffs", lambda f: str(int(f["handoff_partitions"]))
                             if "handoff_partitions" in f else "-"),
                      Column("objects", lambda f: str(int(f["handoff_objects"])) if "handoff_objects" in f else "-"))

    def discover(self, section: ClusterSection) -> Facts:
        raise not_discoverable(self.name)

    def connect(self, inv: Inventory) -> RiakAdapter:
        from orchestrator.hosts.transport import make_transport

        return RiakAdapter(inv, make_transport(inv))

    def plan(self, inv: Inventory, snapshot: RiakSnapshot, mode: Mode, options: RunOptions,
             tuning: tuple[str, ...]) -> Plan:
        plan = build_riak_plan(inv, snapshot, mode, tuning=tuning)
        refused = unsupported_options(options, inv)
        return replace(plan, problems=(*plan.problems, *refused)) if refused else plan

    def stop_check(self, snapshot: RiakSnapshot, plan: Plan, nodes: Sequence[str], options: RunOptions) -> list[str]:
        # Riak keeps n_val replicas and hands a down node's writes to fallbacks: the gate's ring and
        # member checks are all there is to look at, and they were just passed.
        return []

    def window_check(self, snapshot: RiakSnapshot, plan: Plan, inv: Inventory, candidate: str, window: Sequence[str],
                     options: RunOptions) -> list[str]:
        return [NO_WINDOW] if window else []  # never asked: `windowed` refuses a window first

    def window_partners(self, snapshot: RiakSnapshot, plan: Plan, candidate: str) -> frozenset[str]:
        return frozenset()

    def window_notes(self, snapshot: RiakSnapshot, plan: Plan, inv: Inventory, options: RunOptions) -> tuple[str, ...]:
        return ()  # never asked: `windowed` refuses a window first

    def windowed(self, playbook: Playbook) -> Playbook:
        raise ConfigError("--max-unavailable", [NO_WINDOW])

    def gate(self, snapshot: RiakSnapshot, plan: Plan, nodes: Sequence[str], options: RunOptions) -> list[str]:
        snap = snapshot
        problems = cluster_problems(snap)
        missing = [member for member in plan.node_ids.values() if snap.member(member) is None]
        if missing:
            problems.append(f"no longer member(s) of the cluster: {', '.join(missing)}")
        return problems

    def with_host_capacity(self, inv: Inventory, snapshot: RiakSnapshot,
                           capacity: Mapping[str, HostCapacity]) -> RiakSnapshot:
        return snapshot  # handoffs: no recovery rate is chosen

    def host_transport(self, inv: Inventory) -> Transport | None:
        return None

    def with_upgrade_facts(self, adapter: RiakAdapter, snapshot: RiakSnapshot) -> RiakSnapshot:
        raise ConfigError("upgrade", [f"`orchestrate upgrade` is not available for {self.name} clusters yet: roll "
                                      "with `orchestrate restart` and a command step that installs the version"])

    def running_nodes(self, adapter: RiakAdapter) -> list[RunningNode]:
        def one(node: NodeEntry) -> RunningNode:
            pid = adapter.pid(node)
            # Started: read on the host from its process; the files: where the Riak package keeps them.
            return RunningNode(name=node.name, addresses=(node.host,), version=adapter.running_version(node),
                               pid=int(pid) if pid else None, started_s=None, package="riak",
                               files=tuple(f"{RIAK_ETC}/{f}" for f in ("riak.conf", "advanced.config", "vm.args")),
                               version_file=RIAK_RELEASE)

        with ThreadPoolExecutor(max_workers=min(16, max(len(adapter.inv.nodes), 1))) as pool:
            return list(pool.map(one, adapter.inv.nodes))

    def node_logs(self, adapter: RiakAdapter) -> dict[str, str]:
        return {}  # its log says nothing the first estimate reads

    def load_snapshot(self, path: Path) -> RiakSnapshot:
        raise ConfigError(str(path), ["--snapshot plans from a saved Elasticsearch cluster state; this cluster is "
                                      "riak: plan from the live cluster instead"])

    def dump_snapshot(self, snapshot: RiakSnapshot) -> dict[str, Any]:
        raise ConfigError("command line", ["--save-snapshot saves Elasticsearch cluster states; this cluster is riak"])


PRODUCT: Product[RiakSnapshot, RiakAdapter] = RiakProduct()


def unsupported_options(options: RunOptions, inv: Inventory) -> list[str]:
    """Options of the shard products that mean nothing to Riak: refused, never ignored without a word."""
    said = []
    if options.allow_yellow or inv.allow_yellow:
        said.append("--allow-yellow (or allow_yellow) is for Elasticsearch and OpenSearch: a Riak cluster has no "
                    "yellow; its gate waits for valid members, a ready ring and no handoffs. Leave it out")
    if options.allow_unavailable:
        said.append("--allow-unavailable is for Elasticsearch and OpenSearch indices: Riak keeps n_val replicas "
                    "and hands a down node's writes to fallbacks, so nothing becomes unavailable. Leave it out")
    if window_asked(options.max_unavailable):
        said.append(NO_WINDOW)
    return said
