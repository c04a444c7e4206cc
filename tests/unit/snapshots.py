"""Building cluster snapshots for pure decision tests."""

from __future__ import annotations

import random
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


def generated_state(nodes: int, copies: int, zones: int, seed: int = 7) -> tuple[dict[str, Any], dict[str, Any]]:
    """A saved cluster state (`plan --snapshot`'s file) of ``nodes`` nodes in ``zones`` zones, ``copies`` copies of
    one replica placed at random across two zones, and its inventory: for plans at any scale."""
    rng = random.Random(seed)
    names = [f"n{i:04d}" for i in range(nodes)]
    zone_of = {n: f"z{i % zones}" for i, n in enumerate(names)}
    by_zone: dict[str, list[str]] = {}
    for n in names:
        by_zone.setdefault(zone_of[n], []).append(n)
    es_nodes = [{"id": f"id-{n}", "name": n, "host": n, "ip": f"10.{i // 65536}.{i // 256 % 256}.{i % 256}",
                 "roles": ["master", "data"] if i < 3 else ["data"], "zone": zone_of[n], "version": "9.5.3",
                 "process_id": 1000 + i, "start_time_ms": 1} for i, n in enumerate(names)]
    shards = []
    per_shard = 2  # primary + one replica, in two different zones (awareness)
    zone_names = sorted(by_zone)
    for s in range(copies // per_shard):
        index, shard = f"logs-{s // 10:05d}", s % 10
        first, second = rng.sample(zone_names, 2)
        for copy, zone in enumerate((first, second)):
            shards.append({"index": index, "shard": shard, "primary": copy == 0, "state": "STARTED",
                           "node_id": f"id-{rng.choice(by_zone[zone])}", "size_bytes": rng.randint(10**6, 5 * 10**9)})
    snapshot = {"cluster_name": "scale", "health": {"status": "green", "number_of_nodes": nodes},
                "nodes": es_nodes, "master_id": "id-n0000", "shards": shards}
    inventory = {"cluster": {"name": "scale", "endpoints": ["http://127.0.0.1:9"]},
                 "ssh": {"known_hosts": "/dev/null"}, "tuning": {"profile": "elasticsearch"},
                 "nodes": [{"name": n, "host": n, "zone": zone_of[n]} for n in names]}
    return snapshot, inventory

