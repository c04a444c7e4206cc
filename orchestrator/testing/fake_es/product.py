"""`product: fake-elasticsearch`: Elasticsearch's own plug-in over the fake Elasticsearch server (the
inventory's endpoint is the server's URL), its hosts the server's fake ones. For tests of a pipeline of
your own, bulk load, force-merge and rolling restart, run exactly as on a real cluster, in seconds and
without a JVM (docs/pipelines.md). Never for the tool's own integration tests: those run real nodes."""

from __future__ import annotations

from pathlib import Path

from orchestrator.config.discovered import Facts
from orchestrator.config.model import ClusterSection, Inventory
from orchestrator.errors import ConfigError
from orchestrator.es.product import ElasticsearchProduct
from orchestrator.hosts.transport import Transport
from orchestrator.restart.product import Product, not_discoverable
from orchestrator.shards.adapter import ShardClusterAdapter
from orchestrator.shards.snapshot import ClusterSnapshot
from orchestrator.testing.fake_es.hosts import FakeHostTransport


class FakeElasticsearchProduct(ElasticsearchProduct):
    name = "fake-elasticsearch"
    default_playbook = str(Path(__file__).parent.parent / "fake-es-rolling.yaml")
    upgrade_playbook: str | None = None
    discovers = False  # `inventory discover` asks the real products only

    def discover(self, section: ClusterSection) -> Facts:
        raise not_discoverable(self.name)

    def host_transport(self, inv: Inventory) -> Transport | None:
        """The nodes' hosts are the server's: `systemctl stop/start` stops and starts its nodes."""
        if not inv.cluster.endpoints:
            raise ConfigError("inventory", ["cluster.endpoints: the fake Elasticsearch server's URL "
                                            "(FakeEsServer(...).url)"])
        return FakeHostTransport(inv.cluster.endpoints[0])


PRODUCT: Product[ClusterSnapshot, ShardClusterAdapter] = FakeElasticsearchProduct()
