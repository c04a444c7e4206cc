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
from orchestrator.config.model import Inventory, settings_of
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


def with_section(target: Target, name: str, given: Mapping[str, Any], flag: str = "") -> Target:
    """The target with the command line's values over those of the inventory's section ``name``, the section
    checked again as the inventory's; ``flag``: the option its problems are said of."""
    if not given:
        return target
    section = getattr(target.inv, name)
    try:
        changed = type(section).model_validate({**section.model_dump(), **given})
    except ValidationError as exc:
        raise ConfigError("command line", [f"{flag}: {p}" if flag else p for p in problems_of(exc, None)]) from None
    return replace(target, inv=target.inv.model_copy(update={name: changed}))


def with_metrics(target: Target, textfile: Path | None, pushgateway: str | None) -> Target:
    """The target with the command line's metrics outputs over the inventory's."""
    return with_section(target, "metrics", {k: v for k, v in (("textfile", textfile), ("pushgateway", pushgateway))
                                            if v is not None})


def with_schedule(target: Target, until: str | None) -> Target:
    """The target with the command line's end (``--until``: HH:MM or an ISO 8601 time) over the inventory's
    maintenance section (config/maintenance.py)."""
    if until is None:
        return target
    try:
        end = parse_until(until, datetime.now(UTC))
    except ValueError as exc:
        raise ConfigError("command line", [f"--until: {exc}"]) from None
    return with_section(target, "maintenance", {"until": end}, "--until")


def with_latency_budget(target: Target, budget: str | None) -> Target:
    """The target with the command line's search latency budget (``--search-latency-budget``: ``2x`` or
    ``50ms``; ``off``: none) over the inventory's ``search.latency_budget``."""
    if budget is None:
        return target
    given = "" if budget.strip().lower() in ("off", "none", "") else budget.strip().lower()
    return with_section(target, "search", {"latency_budget": given}, "--search-latency-budget")
