"""OpenSearch as a product plug-in of the restart engine (see restart/product.py): the shared shard model
(shards/) over opensearch-py, with weighted routing in zone mode and windows (opensearch/routing.py) and rolling
upgrades along OpenSearch's own paths."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from types import MappingProxyType

from orchestrator.config.discovered import Facts
from orchestrator.config.model import ClusterSection, Inventory
from orchestrator.errors import ConfigError
from orchestrator.opensearch import routing
from orchestrator.opensearch.adapter import OpenSearchAdapter, weights_key
from orchestrator.restart.budget import window_asked
from orchestrator.restart.journal import RunOptions
from orchestrator.restart.plan import Mode, Plan
from orchestrator.restart.product import Product
from orchestrator.restart.steps import StepFn
from orchestrator.shards import steps as shard_steps
from orchestrator.shards.product import ShardProduct
from orchestrator.shards.snapshot import ClusterSnapshot
from orchestrator.shards.versions import OPENSEARCH_PATHS


class OpenSearchProduct(ShardProduct[OpenSearchAdapter]):
    name = "opensearch"
    default_playbook = "opensearch-rolling"
    upgrade_playbook: str | None = "opensearch-upgrade"
    upgrade_paths = OPENSEARCH_PATHS
    client_loggers = ("opensearch",)  # opensearch-py's request log
    batch_steps: Mapping[str, StepFn[OpenSearchAdapter]] = MappingProxyType({**shard_steps.STEPS,
                                                                             **routing.STEPS})
    order_rules = (*ShardProduct.order_rules, ("weigh_away_searches", "stop_service"),
                   ("wait_for_recovery", "restore_search_weights"))

    def plan(self, inv: Inventory, snapshot: ClusterSnapshot, mode: Mode, options: RunOptions,
             tuning: tuple[str, ...]) -> Plan:
        plan = super().plan(inv, snapshot, mode, options, tuning)
        attribute = inv.cluster.awareness_attribute
        if mode == Mode.ZONE:
            away = f"each {attribute} while it restarts"
        elif window_asked(options.max_unavailable):
            away = f"the {attribute} of the window's nodes while any of them is away"
        else:
            return plan
        return replace(plan, notes=(*plan.notes, f"searches are weighed away from {away} ({weights_key(attribute)}: "
                                                 "weight 0 for it, the others kept), and the weights from before the "
                                                 "run are put back exactly"))

    def discover(self, section: ClusterSection) -> Facts:
        from orchestrator.opensearch.connect import OpenSearchRest
        from orchestrator.shards.connection import connection_of

        return OpenSearchAdapter(OpenSearchRest(connection_of(section)), section.awareness_attribute).discovery_facts()

    def connect(self, inv: Inventory) -> OpenSearchAdapter:
        from orchestrator.opensearch.connect import OpenSearchRest
        from orchestrator.shards.connection import connection

        if not inv.cluster.endpoints:
            raise ConfigError("inventory", ["cluster.endpoints: an OpenSearch cluster needs at least one endpoint"])
        return OpenSearchAdapter(OpenSearchRest(connection(inv)), inv.cluster.awareness_attribute)


PRODUCT: Product[ClusterSnapshot, OpenSearchAdapter] = OpenSearchProduct()
