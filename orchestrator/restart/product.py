"""A product plug-in: what the engine needs to restart one kind of cluster.

Elasticsearch (`orchestrator.es.product`), OpenSearch (`orchestrator.opensearch.product`, both on the
shared shard model of `orchestrator.shards`) and Riak (`orchestrator.riak.product`) implement this;
the registry (`orchestrator.products`) finds them by the inventory's `cluster.product`. The engine
knows no product: another one is a package of its own with a `PRODUCT` (docs/architecture.md).

Decisions are pure: `plan` and `gate` read a snapshot that the product's adapter took.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from orchestrator.config.model import Inventory
from orchestrator.restart.adapter import ClusterAdapter
from orchestrator.restart.context import RunContext
from orchestrator.restart.journal import RunOptions
from orchestrator.restart.plan import Mode, Plan
from orchestrator.restart.steps import StepFn

RunStepFn = Callable[[RunContext], None]


@dataclass(frozen=True)
class Column:
    """One column of a table the product adds: a batch's figures in the plan, a node's recovery in the
    report. ``value`` reads the figures (a mapping that may lack the key) and returns the cell."""

    header: str
    value: Callable[[Mapping[str, Any]], str]


class Product(Protocol):
    name: str
    default_playbook: str
    upgrade_playbook: str | None  # the procedure of `orchestrate upgrade`; None: the product has none yet
    batch_steps: Mapping[str, StepFn]  # besides the generic ones (stop, tune, start, rejoin)
    run_steps: Mapping[str, RunStepFn]  # for `before_run`
    order_rules: tuple[tuple[str, str], ...]  # (first, then) among its steps and the generic ones
    checks_before_stop: bool  # whether `stop_check` can refuse (if not, no snapshot is taken for it)
    # Whether its adapter needs no root shell on the hosts, so exact sudo rules (`ssh.sudo_rules:
    # commands`) are enough for a run.
    exact_sudo_rules: bool
    plan_columns: tuple[Column, ...]
    report_columns: tuple[Column, ...]

    def connect(self, inv: Inventory) -> ClusterAdapter:
        """The adapter to the inventory's cluster (secrets resolved here, never kept in the plan)."""
        ...

    def plan(self, inv: Inventory, snapshot: object, mode: Mode, options: RunOptions,
             tuning: tuple[str, ...]) -> Plan:
        """The restart plan: pure."""
        ...

    def gate(self, snapshot: object, plan: Plan, nodes: Sequence[str], options: RunOptions) -> list[str]:
        """Why the batch of ``nodes`` must not start now, from a gate snapshot; empty when it may. Pure."""
        ...

    def stop_check(self, snapshot: object, plan: Plan, nodes: Sequence[str], options: RunOptions) -> list[str]:
        """Why the batch of ``nodes`` must not stop at this very moment, from a gate snapshot taken just
        before (data whose only available copy is on them, not accepted in ``options``). Pure."""
        ...

    def with_upgrade_facts(self, adapter: ClusterAdapter, snapshot: object) -> object:
        """The snapshot with what an upgrade's plan checks besides (read through ``adapter``)."""
        ...

    def node_logs(self, adapter: ClusterAdapter) -> dict[str, str]:
        """Each node's log file on its host, by the product's node id, where the node logs its stops and
        starts (restart/durations.py) for a first plan's estimate; empty where there is none to read."""
        ...

    def load_snapshot(self, path: Path) -> object:
        """A snapshot saved by `plan --save-snapshot` (ConfigError where the product has none)."""
        ...

    def dump_snapshot(self, snapshot: object) -> dict[str, Any]:
        ...
