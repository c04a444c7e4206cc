"""The order of a rolling upgrade's nodes, as Elasticsearch documents it (OpenSearch's is the same):
data nodes tier by tier (frozen, cold, warm, hot and other data nodes), then nodes that hold no data
(ingest, ML, coordinating-only), then master-eligible nodes, the elected master last. Newer nodes can
hold copies older nodes cannot read, never the reverse, so the old side keeps working while the new
one grows. Pure.
"""

from __future__ import annotations

from orchestrator.shards.snapshot import EsNode

TIERS = ("data_frozen", "data_cold", "data_warm")  # colder first; every other data role is "hot or other"


def upgrade_rank(node: EsNode, master_id: str | None) -> tuple[int, int]:
    """(group, tier) of a node in the upgrade order; lower goes first."""
    if node.id == master_id:
        return (3, 0)
    tiers = [TIERS.index(r) for r in node.roles if r in TIERS]
    hotter = node.is_data and any(r not in TIERS for r in node.roles if r == "data" or r.startswith("data_"))
    tier = len(TIERS) if hotter or not tiers else max(tiers)  # a node in several tiers goes with its hottest
    if node.is_master_eligible:
        return (2, tier)
    return (0, tier) if node.is_data else (1, 0)


def upgrade_order(names: list[str], nodes: dict[str, EsNode], master_id: str | None) -> list[str]:
    return sorted(names, key=lambda n: (upgrade_rank(nodes[n], master_id), n))
