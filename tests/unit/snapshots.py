"""Building cluster snapshots for pure decision tests."""

from __future__ import annotations

from typing import Any

from orchestrator.config.model import Inventory
from orchestrator.shards.snapshot import ClusterSnapshot, EsNode, Health, ShardCopy


def node(name: str, zone: str | None = None, roles: tuple[str, ...] = ("master", "data"),
         **facts: Any) -> EsNode:
    """``facts``: processors, memory_bytes, recovery_settings."""
    return EsNode(id=f"id-{name}", name=name, host=f"h-{name}", ip=f"10.0.0.{name[-1]}", roles=roles, zone=zone,
                  version="9.5.3", process_id=100, start_time_ms=1, **facts)


def copies(index: str, shard: int, on: list[str], size: int = 1000) -> list[ShardCopy]:
    return [ShardCopy(index, shard, i == 0, "STARTED", f"id-{n}", size) for i, n in enumerate(on)]


def snapshot(nodes: list[EsNode], shards: list[ShardCopy], master: str, status: str = "green",
             persistent: dict[str, object] | None = None, transient: dict[str, object] | None = None,
             initializing: int = 0) -> ClusterSnapshot:
    return ClusterSnapshot(cluster_name="c", health=Health(status, len(nodes), initializing_shards=initializing),
                           nodes=tuple(nodes), master_id=f"id-{master}", shards=tuple(shards),
                           persistent=persistent or {}, transient=transient or {})


def inventory(names: list[str], zones: list[str] | None = None) -> Inventory:
    nodes = [{"name": n, "host": f"h-{n}", **({"zone": zones[i]} if zones else {})} for i, n in enumerate(names)]
    return Inventory.model_validate({"cluster": {"name": "c", "endpoints": ["http://x:9200"]},
                                     "ssh": {"known_hosts": "/dev/null"}, "nodes": nodes})
