"""A cluster to act on: its inventory, its product plug-in, its procedure and an adapter to reach it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from orchestrator import products
from orchestrator.config.inventory import load_inventory
from orchestrator.config.loader import problems_of
from orchestrator.config.maintenance import parse_until
from orchestrator.config.model import Inventory, MaintenanceSection, MetricsSection, SearchSection, settings_of
from orchestrator.config.playbook import Playbook, load_playbook
from orchestrator.errors import ConfigError
from orchestrator.hosts.transport import Transport, make_transport
from orchestrator.restart.adapter import ClusterAdapter
from orchestrator.restart.procedure import Procedure, require_install, resolve, without_tuning
from orchestrator.restart.product import Product
from orchestrator.restart.reboot import with_reboot


@dataclass
class Target:
    inv: Inventory
    inventory_path: Path
    product: Product[Any, Any]
    procedure: Procedure
    cluster: ClusterAdapter[Any]

    @property
    def playbook(self) -> Playbook:
        return self.procedure.playbook

    @property
    def name(self) -> str:
        return self.inv.cluster.name


def load_procedure(inv: Inventory, product: Product[Any, Any], upgrade: bool = False) -> Procedure:
    """The inventory's playbook (or the product's default), checked against the product; for an upgrade,
    the inventory's `upgrade.playbook` or the product's upgrade procedure."""
    if not upgrade:
        return resolve(load_playbook(inv.playbook or product.default_playbook, inv.directory), product)
    name = inv.upgrade.playbook or product.upgrade_playbook
    if name is None:
        raise ConfigError("upgrade", [f"`orchestrate upgrade` is not available for {product.name} clusters yet: "
                                      "roll with `orchestrate restart` and a command step that installs the version"])
    procedure = resolve(load_playbook(name, inv.directory), product)
    require_install(procedure)
    return procedure


def transport_of(inv: Inventory) -> Transport:
    """The way to the nodes' hosts: the product's own where it has one, else SSH or local as `ssh` says."""
    return products.get(inv.cluster.product).host_transport(inv) or make_transport(inv)


def open_target(cluster: str | None, config: Path | None, upgrade: bool = False, reboot: bool = False,
                cluster_keys: Mapping[str, Any] | None = None, tune: bool = True) -> Target:
    """Load and check everything before the first call to the cluster: a bad file fails here. ``reboot``:
    the procedure of `restart --reboot` (restart/reboot.py); ``tune`` False: of `restart --no-tune`, without
    the host tuning steps; ``cluster_keys``: see `load_inventory`."""
    inv, path = load_inventory(cluster, config, cluster_keys)
    product = products.get(inv.cluster.product)
    settings_of(inv, product.settings)  # the product's own section, checked before anything else
    procedure = load_procedure(inv, product, upgrade)
    if reboot:
        procedure = resolve(with_reboot(procedure.playbook), product)
    if not tune:
        procedure = resolve(without_tuning(procedure.playbook), product)
    return Target(inv, path, product, procedure, product.connect(inv))


def with_reboots(target: Target) -> Target:
    """The target with the procedure of `restart --reboot` (reboot_host, check_tuning), for a run that reboots
    some of its hosts (`restart --pending`: those waiting for a reboot; restart/reboot.py skips the others)."""
    return replace(target, procedure=resolve(with_reboot(target.procedure.playbook), target.product))


def with_window(target: Target) -> Target:
    """The target with the procedure of a window's run (several nodes away at once): the product's (it refuses
    a window where it has no rule that proves one safe)."""
    return replace(target, procedure=resolve(target.product.windowed(target.procedure.playbook), target.product))


def with_metrics(target: Target, textfile: Path | None, pushgateway: str | None) -> Target:
    """The target with the command line's metrics outputs over the inventory's (checked as the inventory's)."""
    if textfile is None and pushgateway is None:
        return target
    given = {k: v for k, v in (("textfile", textfile), ("pushgateway", pushgateway)) if v is not None}
    try:
        metrics = MetricsSection.model_validate({**target.inv.metrics.model_dump(), **given})
    except ValidationError as exc:
        raise ConfigError("command line", problems_of(exc, None)) from None
    return replace(target, inv=target.inv.model_copy(update={"metrics": metrics}))


def with_schedule(target: Target, until: str | None, outside: str | None = None) -> Target:
    """The target with the command line's end (``--until``: HH:MM or an ISO 8601 time) and choice of what to do
    outside a window over the inventory's maintenance section (config/maintenance.py)."""
    if until is None and outside is None:
        return target
    given: dict[str, object] = {} if outside is None else {"outside": outside}
    try:
        if until is not None:
            given["until"] = parse_until(until, datetime.now(UTC))
        section = MaintenanceSection.model_validate({**target.inv.maintenance.model_dump(), **given})
    except ValueError as exc:  # pydantic's ValidationError is one
        problems = problems_of(exc, None) if isinstance(exc, ValidationError) else [f"--until: {exc}"]
        raise ConfigError("command line", problems) from None
    return replace(target, inv=target.inv.model_copy(update={"maintenance": section}))


def with_latency_budget(target: Target, budget: str | None) -> Target:
    """The target with the command line's search latency budget (``--search-latency-budget``: ``2x`` or
    ``50ms``; ``off``: none) over the inventory's ``search.latency_budget``, checked as the inventory's."""
    if budget is None:
        return target
    given = "" if budget.strip().lower() in ("off", "none", "") else budget.strip().lower()
    try:
        search = SearchSection.model_validate({**target.inv.search.model_dump(), "latency_budget": given})
    except ValidationError as exc:
        raise ConfigError("command line", [f"--search-latency-budget: {p}" for p in problems_of(exc, None)]) from None
    return replace(target, inv=target.inv.model_copy(update={"search": search}))
