"""A cluster to act on: its inventory, its product plug-in, its procedure and an adapter to reach it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from orchestrator import products
from orchestrator.config.inventory import load_inventory
from orchestrator.config.model import Inventory
from orchestrator.config.playbook import Playbook, load_playbook
from orchestrator.restart.adapter import ClusterAdapter
from orchestrator.restart.procedure import Procedure, resolve
from orchestrator.restart.product import Product


@dataclass
class Target:
    inv: Inventory
    inventory_path: Path
    product: Product
    procedure: Procedure
    cluster: ClusterAdapter

    @property
    def playbook(self) -> Playbook:
        return self.procedure.playbook

    @property
    def name(self) -> str:
        return self.inv.cluster.name


def load_procedure(inv: Inventory, product: Product) -> Procedure:
    """The inventory's playbook (or the product's default), checked against the product."""
    return resolve(load_playbook(inv.playbook or product.default_playbook, inv.directory), product)


def open_target(cluster: str | None, config: Path | None) -> Target:
    """Load and check everything before the first call to the cluster: a bad file fails here."""
    inv, path = load_inventory(cluster, config)
    product = products.get(inv.cluster.product)
    procedure = load_procedure(inv, product)
    return Target(inv, path, product, procedure, product.connect(inv))
