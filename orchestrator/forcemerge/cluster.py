"""Reading what force-merge decisions need, and starting and following merges as tasks."""

from __future__ import annotations

import time
from collections import defaultdict

from orchestrator.errors import ConfigError
from orchestrator.forcemerge.decide import IndexFacts
from orchestrator.restart.lock import LOCK_INDEX
from orchestrator.shards.adapter import ShardClusterAdapter
from orchestrator.shards.answers import shaped


def shard_cluster(cluster: object, name: str, product: str) -> ShardClusterAdapter:
    """The cluster's adapter as one of the shard model: force-merge is an Elasticsearch and OpenSearch action."""
    if not isinstance(cluster, ShardClusterAdapter):
        raise ConfigError("inventory", [f"cluster {name} is a {product} cluster; force-merge is for Elasticsearch "
                                        "and OpenSearch clusters"])
    return cluster


def resolve(es: ShardClusterAdapter, pattern: str) -> list[str]:
    raw = es.indices(pattern)
    with shaped(f"resolve {pattern}"):
        names = sorted(n for n, body in raw.items() if n != LOCK_INDEX
                       and str(body.get("settings", {}).get("index", {}).get("hidden", "false")) != "true")
    if not names:
        raise ConfigError("command line", [f"--indices {pattern!r} matches no open index"])
    return names


def segments_per_shard(es: ShardClusterAdapter, indices: list[str]) -> dict[str, int]:
    """The most segments any copy of any shard of each index has."""
    rows = es.segments(indices)
    per_copy: dict[tuple[str, str, str, str], int] = defaultdict(int)
    for r in rows:
        per_copy[(r["index"], r["shard"], r["prirep"], r.get("ip", ""))] += 1
    worst: dict[str, int] = dict.fromkeys(indices, 0)
    for (index, *_), n in per_copy.items():
        worst[index] = max(worst.get(index, 0), n)
    return worst


def write_targets(es: ShardClusterAdapter, indices: list[str]) -> dict[str, str]:
    """index -> the alias or data stream it is the write index of."""
    out: dict[str, str] = {}
    aliases = es.aliases(indices)
    for index, body in aliases.items():
        for alias, conf in (body.get("aliases") or {}).items():
            if conf.get("is_write_index"):
                out[index] = f"alias {alias}"
    for ds in es.data_streams():
        backing = ds.get("indices") or []
        if backing:
            out[backing[-1]["index_name"]] = f"data stream {ds['name']}"
    return out


def indexing_totals(es: ShardClusterAdapter, indices: list[str]) -> tuple[dict[str, int], dict[str, int]]:
    totals, docs = {}, {}
    for name, body in es.indexing_stats(indices).items():
        totals[name] = int(body["primaries"]["indexing"]["index_total"])
        docs[name] = int(body["primaries"].get("docs", {}).get("count", 0))
    return totals, docs


def gather(es: ShardClusterAdapter, pattern: str, sample_s: float) -> list[IndexFacts]:
    indices = resolve(es, pattern)
    with shaped("read indexing stats"):
        first, _ = indexing_totals(es, indices)
    time.sleep(sample_s)  # writes during this window mark an index as still being written to
    with shaped("read indexing stats"):
        second, docs = indexing_totals(es, indices)
    with shaped("count segments"):
        segments = segments_per_shard(es, indices)
    with shaped("read aliases and data streams"):
        writes = write_targets(es, indices)
    return [IndexFacts(name=i, max_segments_per_shard=segments.get(i, 0), docs=docs.get(i, 0),
                       write_index_of=writes.get(i), recent_writes=max(second.get(i, 0) - first.get(i, 0), 0))
            for i in indices]


def start_merge(es: ShardClusterAdapter, index: str, max_segments: int) -> str:
    return es.start_forcemerge(index, max_segments)


def task_state(es: ShardClusterAdapter, task_id: str) -> tuple[bool, str | None]:
    """(completed, error). A task no longer known after completion counts as completed."""
    body = es.task(task_id)
    if body is None:
        return True, None
    with shaped(f"follow task {task_id}"):
        error = body.get("error")
        return bool(body.get("completed")), (error.get("reason") if isinstance(error, dict) else error)
