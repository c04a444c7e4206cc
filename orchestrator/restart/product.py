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
from typing import Any, Protocol, TypeVar

from orchestrator.config.discovered import Facts
from orchestrator.config.model import ClusterSection, Inventory, ProductSettings
from orchestrator.config.playbook import Playbook
from orchestrator.errors import ConfigError
from orchestrator.hosts.capacity import HostCapacity
from orchestrator.hosts.transport import Transport
from orchestrator.pending.verdict import RunningNode
from orchestrator.restart.adapter import AdapterT
from orchestrator.restart.context import RunContext
from orchestrator.restart.journal import RunOptions
from orchestrator.restart.plan import Mode, Plan
from orchestrator.restart.steps import StepFn

RunStepFn = Callable[[RunContext[AdapterT]], None]  # a `before_run` step of a product whose adapter is AdapterT
SnapshotT = TypeVar("SnapshotT")


def not_discoverable(product: str) -> ConfigError:
    """What `inventory discover` says of a product that cannot be asked (`discovers` False)."""
    return ConfigError("inventory discover", [f"discovery reads Elasticsearch and OpenSearch clusters; write a "
                                              f"{product} inventory by hand (docs/configuration.md)"])


@dataclass(frozen=True)
class Column:
    """One column of a table the product adds: a batch's figures in the plan, a node's recovery in the
    report. ``value`` reads the figures (a mapping that may lack the key) and returns the cell."""

    header: str
    value: Callable[[Mapping[str, Any]], str]


class Product(Protocol[SnapshotT, AdapterT]):
    """Generic over the product's snapshot and adapter types, so that mypy checks each plug-in's
    `PRODUCT: Product[ItsSnapshot, ItsAdapter]` against this interface and no decision or step checks
    a type at run time. The engine and the registry see `Product[Any, Any]`: they name no product."""

    # Read-only (properties here; plain class attributes in a plug-in), so that a plug-in may give a
    # narrower type: a dict for a Mapping, a tuple of two for a tuple of any length.
    @property
    def name(self) -> str: ...
    @property
    def default_playbook(self) -> str: ...
    @property
    def upgrade_playbook(self) -> str | None:
        """The procedure of `orchestrate upgrade`; None: the product has none yet."""
    @property
    def batch_steps(self) -> Mapping[str, StepFn[AdapterT]]:
        """Its own batch steps, besides the generic ones (stop, tune, start, rejoin)."""
    @property
    def run_steps(self) -> Mapping[str, RunStepFn[AdapterT]]:
        """Its steps for `before_run`."""
    @property
    def order_rules(self) -> tuple[tuple[str, str], ...]:
        """(first, then) among its steps and the generic ones."""
    @property
    def checks_before_stop(self) -> bool:
        """Whether `stop_check` can refuse (if not, no snapshot is taken for it)."""
    @property
    def recovery_rate_key(self) -> str | None:
        """The cluster setting that bounds recovery's bytes a second, which the run raises and a search latency
        budget moves (restart/latency_control.py); None: the product has none to move."""
    @property
    def exact_sudo_rules(self) -> bool:
        """Whether its adapter needs no root shell on the hosts, so exact sudo rules (`ssh.sudo_rules:
        commands`) are enough for a run."""
    @property
    def settings(self) -> type[ProductSettings]:
        """The model of its own section of the inventory (named like the product), checked when the
        inventory is opened for a run; `ProductSettings` itself where it has none."""
    @property
    def client_loggers(self) -> tuple[str, ...]:
        """The loggers its client logs each request to (the run's audit log keeps them)."""
    @property
    def discovers(self) -> bool:
        """Whether `inventory discover` can ask a cluster whether it is one of this product's."""
    @property
    def plan_columns(self) -> tuple[Column, ...]: ...
    @property
    def report_columns(self) -> tuple[Column, ...]: ...

    def connect(self, inv: Inventory) -> AdapterT:
        """The adapter to the inventory's cluster (secrets resolved here, never kept in the plan)."""
        ...

    def discover(self, section: ClusterSection) -> Facts:
        """What the cluster at the section's endpoint says of itself, for `inventory discover`; raises
        WrongProduct when the server is another product (the registry then asks the next)."""
        ...

    def plan(self, inv: Inventory, snapshot: SnapshotT, mode: Mode, options: RunOptions,
             tuning: tuple[str, ...]) -> Plan:
        """The restart plan: pure."""
        ...

    def gate(self, snapshot: SnapshotT, plan: Plan, nodes: Sequence[str], options: RunOptions) -> list[str]:
        """Why the batch of ``nodes`` must not start now, from a gate snapshot; empty when it may. Pure."""
        ...

    def stop_check(self, snapshot: SnapshotT, plan: Plan, nodes: Sequence[str], options: RunOptions) -> list[str]:
        """Why the batch of ``nodes`` must not stop at this very moment, from a gate snapshot taken just
        before (data whose only available copy is on them, not accepted in ``options``). Pure."""
        ...

    def window_check(self, snapshot: SnapshotT, plan: Plan, inv: Inventory, candidate: str, window: Sequence[str],
                     options: RunOptions) -> list[str]:
        """Why the node ``candidate`` must not join the window of ``window`` (the nodes admitted and not yet
        recovered) now, from a gate snapshot of its own part taken with ``proof`` (restart/window_run.py);
        empty when it may. Asked at its admission and again just before its stop. Pure."""
        ...

    def window_partners(self, snapshot: SnapshotT, plan: Plan, candidate: str) -> frozenset[str]:
        """The nodes (inventory names) that hold a copy of what ``candidate`` holds, from the snapshot its proof
        read: a hint only (the window tries first the nodes none of whose partners is in it); the proof decides."""
        ...

    def window_notes(self, snapshot: SnapshotT, plan: Plan, inv: Inventory, options: RunOptions) -> tuple[str, ...]:
        """What the plan says of a window's budget, from the plan as a run takes it (the nodes chosen, the
        estimates measured): how many nodes could be away together and what holds them back, and the estimate
        beside one at a time. () for a product that refuses a window. Pure."""
        ...

    def windowed(self, playbook: Playbook) -> Playbook:
        """The procedure of a run with several nodes away at once (`--max-unavailable` above 1): what a
        batch's steps become when other nodes are away beside it. Raises ConfigError where the product
        refuses a window, saying why."""
        ...

    def with_host_capacity(self, inv: Inventory, snapshot: SnapshotT,
                           capacity: Mapping[str, HostCapacity]) -> SnapshotT:
        """The snapshot with what each node's host carries (by inventory name, as read on the hosts), for
        the limits the plan raises; unchanged where the product chooses none from it."""
        ...

    def host_transport(self, inv: Inventory) -> Transport | None:
        """The product's own way to its nodes' hosts (the fake's in-memory hosts); None: SSH or local,
        as the inventory's `ssh` says (every real product)."""
        ...

    def with_upgrade_facts(self, adapter: AdapterT, snapshot: SnapshotT) -> SnapshotT:
        """The snapshot with what an upgrade's plan checks besides (read through ``adapter``)."""
        ...

    def node_logs(self, adapter: AdapterT) -> dict[str, str]:
        """Each node's log file on its host, by the product's node id, where the node logs its stops and
        starts (restart/durations.py) for a first plan's estimate; empty where there is none to read."""
        ...

    def running_nodes(self, adapter: AdapterT) -> list[RunningNode]:
        """What each running node says of itself for `orchestrate pending` (pending/verdict.py): its
        version, process, start time, and the files it read at start; empty where nothing can be read."""
        ...

    def load_snapshot(self, path: Path) -> SnapshotT:
        """A snapshot saved by `plan --save-snapshot` (ConfigError where the product has none)."""
        ...

    def dump_snapshot(self, snapshot: SnapshotT) -> dict[str, Any]:
        ...
