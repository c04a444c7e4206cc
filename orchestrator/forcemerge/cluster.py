"""Reading what force-merge decisions need, and starting and following merges as tasks."""

from __future__ import annotations

import time
from collections import defaultdict
from typing import Any

import elasticsearch

from orchestrator.errors import ConfigError
from orchestrator.es.adapter import ElasticsearchAdapter
from orchestrator.es.connect import translated
from orchestrator.forcemerge.decide import IndexFacts
from orchestrator.restart.lock import LOCK_INDEX


def resolve(es: ElasticsearchAdapter, pattern: str) -> list[str]:
    raw = es._do(f"resolve {pattern}", es.es.indices.get, index=pattern, expand_wildcards="open",
                 ignore_unavailable=True, allow_no_indices=True, features="settings")
    names = sorted(n for n, body in raw.items() if n != LOCK_INDEX
                   and str(body.get("settings", {}).get("index", {}).get("hidden", "false")) != "true")
    if not names:
        raise ConfigError("command line", [f"--indices {pattern!r} matches no open index"])
    return names


def segments_per_shard(es: ElasticsearchAdapter, indices: list[str]) -> dict[str, int]:
    """The most segments any copy of any shard of each index has."""
    rows = es._do("count segments", es.es.cat.segments, index=",".join(indices), format="json",
                  h="index,shard,prirep,ip,segment")
    per_copy: dict[tuple[str, str, str, str], int] = defaultdict(int)
    for r in rows:
        per_copy[(r["index"], r["shard"], r["prirep"], r.get("ip", ""))] += 1
    worst: dict[str, int] = dict.fromkeys(indices, 0)
    for (index, *_), n in per_copy.items():
        worst[index] = max(worst.get(index, 0), n)
    return worst


def write_targets(es: ElasticsearchAdapter, indices: list[str]) -> dict[str, str]:
    """index -> the alias or data stream it is the write index of."""
    out: dict[str, str] = {}
    aliases = es._do("read aliases", es.es.indices.get_alias, index=",".join(indices), ignore_unavailable=True)
    for index, body in aliases.items():
        for alias, conf in (body.get("aliases") or {}).items():
            if conf.get("is_write_index"):
                out[index] = f"alias {alias}"
    try:
        streams = es._do("read data streams", es.es.indices.get_data_stream, name="*")
    except Exception:
        streams = {"data_streams": []}
    for ds in streams.get("data_streams", []):
        backing = ds.get("indices") or []
        if backing:
            out[backing[-1]["index_name"]] = f"data stream {ds['name']}"
    return out


def indexing_totals(es: ElasticsearchAdapter, indices: list[str]) -> tuple[dict[str, int], dict[str, int]]:
    stats = es._do("read indexing stats", es.es.indices.stats, index=",".join(indices), metric="indexing,docs")
    totals, docs = {}, {}
    for name, body in stats.get("indices", {}).items():
        totals[name] = int(body["primaries"]["indexing"]["index_total"])
        docs[name] = int(body["primaries"].get("docs", {}).get("count", 0))
    return totals, docs


def gather(es: ElasticsearchAdapter, pattern: str, sample_s: float) -> list[IndexFacts]:
    indices = resolve(es, pattern)
    first, _ = indexing_totals(es, indices)
    time.sleep(sample_s)  # writes during this window mark an index as still being written to
    second, docs = indexing_totals(es, indices)
    segments = segments_per_shard(es, indices)
    writes = write_targets(es, indices)
    return [IndexFacts(name=i, max_segments_per_shard=segments.get(i, 0), docs=docs.get(i, 0),
                       write_index_of=writes.get(i), recent_writes=max(second.get(i, 0) - first.get(i, 0), 0))
            for i in indices]


def start_merge(es: ElasticsearchAdapter, index: str, max_segments: int) -> str:
    """Start the merge as a task and return its id: no HTTP request stays open for the merge's length."""
    body = es._do(f"start force-merge of {index}", es.es.perform_request, "POST",
                  f"/{index}/_forcemerge?max_num_segments={max_segments}&wait_for_completion=false",
                  headers={"accept": "application/json"})
    return str(body["task"])


def task_state(es: ElasticsearchAdapter, task_id: str) -> tuple[bool, str | None]:
    """(completed, error). A task no longer known after completion counts as completed."""
    es.calls += 1
    with translated(f"follow task {task_id}", es.conn.endpoints):
        try:
            body: Any = es.es.perform_request("GET", f"/_tasks/{task_id}", headers={"accept": "application/json"}).body
        except elasticsearch.NotFoundError:
            return True, None
    error = body.get("error")
    return bool(body.get("completed")), (error.get("reason") if isinstance(error, dict) else error)
