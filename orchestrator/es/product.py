"""Elasticsearch as a product plug-in of the restart engine (see restart/product.py): the shared shard
model (shards/) over elasticsearch-py, with rolling upgrades."""

from __future__ import annotations

from orchestrator.config.discovered import Facts
from orchestrator.config.model import ClusterSection, Inventory
from orchestrator.errors import ConfigError
from orchestrator.restart.product import Product
from orchestrator.shards.adapter import ShardClusterAdapter
from orchestrator.shards.product import ShardProduct
from orchestrator.shards.snapshot import ClusterSnapshot


class ElasticsearchProduct(ShardProduct[ShardClusterAdapter]):
    name = "elasticsearch"
    default_playbook = "elasticsearch-rolling"
    upgrade_playbook: str | None = "elasticsearch-upgrade"
    client_loggers = ("elastic_transport.transport",)  # elasticsearch-py's request log

    def discover(self, section: ClusterSection) -> Facts:
        from orchestrator.es.connect import ElasticsearchRest
        from orchestrator.shards.connection import connection_of

        adapter = ShardClusterAdapter(ElasticsearchRest(connection_of(section)), section.awareness_attribute)
        return adapter.discovery_facts()

    def connect(self, inv: Inventory) -> ShardClusterAdapter:
        from orchestrator.es.connect import ElasticsearchRest
        from orchestrator.shards.connection import connection

        if not inv.cluster.endpoints:
            raise ConfigError("inventory", ["cluster.endpoints: an Elasticsearch cluster needs at least one endpoint"])
        return ShardClusterAdapter(ElasticsearchRest(connection(inv)), inv.cluster.awareness_attribute)


PRODUCT: Product[ClusterSnapshot, ShardClusterAdapter] = ElasticsearchProduct()
