"""The fake's APIs of a pipeline's load and merge: bulk indexing (each request's refresh adds a segment to
every copy it wrote to, as small flushed segments pile up under a real load), `_cat/segments`, aliases and
data streams (none), refresh, and a force-merge run as a task that is done when next asked about."""

from __future__ import annotations

import re
import zlib
from typing import Any

from orchestrator.testing.fake_es.index_api import INDICES, create
from orchestrator.testing.fake_es.model import STARTED, FakeCluster, FakeIndex
from orchestrator.testing.fake_es.routes import Request, api, cat, error, index_names


@api("PUT", r"(?:" + INDICES + r")?/_bulk", "PUT /_bulk")  # elasticsearch-py's method
@api("POST", r"(?:" + INDICES + r")?/_bulk", "POST /_bulk")
def bulk(cluster: FakeCluster, request: Request, found: re.Match[str]) -> Any:
    lines = request.body if isinstance(request.body, list) else []
    items, touched = [], set()
    for action, source in zip(lines[::2], lines[1::2], strict=False):
        kind, meta = next(iter(action.items())) if isinstance(action, dict) and action else ("index", {})
        name = meta.get("_index") or found.group("indices")
        if kind not in ("index", "create") or not name or not isinstance(source, dict):
            raise error(400, "illegal_argument_exception", "the fake takes index and create actions, each with "
                                                           "its document")
        index = cluster.indices.get(name) or fresh(cluster, name)
        doc_id = str(meta.get("_id") or f"auto-{index.indexed}")
        new = doc_id not in (index.ids or set())
        index.ids = (index.ids or set()) | {doc_id}
        index.indexed += 1
        for copy in index.shards[zlib.crc32(doc_id.encode()) % len(index.shards)]:
            copy.docs += 1 if new else 0
        touched.add(index.name)
        items.append({kind: {"_index": index.name, "_id": doc_id, "_version": 1,
                             "result": "created" if new else "updated", "status": 201 if new else 200}})
    for name in touched:  # the request's refresh: what it wrote is a new segment of each copy
        for copy in cluster.indices[name].copies:
            copy.segments += 1
    return {"took": 1, "errors": False, "items": items}


def fresh(cluster: FakeCluster, name: str) -> FakeIndex:
    """An index made by its first document: one primary and one replica, empty (created just now)."""
    index = create(cluster, name, {"index": {"number_of_shards": 1, "number_of_replicas": 1}})
    for copy in index.copies:
        copy.docs, copy.size, copy.segments = 0, 0, 0
    index.ids = set()
    return index


@api("GET", r"/_cat/segments(?:" + INDICES + ")?", "GET /_cat/segments")
def segments(cluster: FakeCluster, request: Request, found: re.Match[str]) -> Any:
    rows = []
    for index in index_names(cluster, found.group("indices"), request):
        for copy in index.copies:
            node = cluster.nodes.get(copy.node) if copy.node and copy.state == STARTED else None
            if node is not None:
                rows += [{"index": index.name, "shard": str(copy.shard), "prirep": "p" if copy.primary else "r",
                          "ip": node.ip, "segment": f"_{n}"} for n in range(copy.segments)]
    return cat(rows, request)


@api("POST", r"(?:" + INDICES + r")?/_refresh", "POST /_refresh")
def refresh(cluster: FakeCluster, request: Request, found: re.Match[str]) -> Any:
    copies = sum(1 for i in index_names(cluster, found.group("indices"), request) for _ in i.copies)
    return {"_shards": {"total": copies, "successful": copies, "failed": 0}}


@api("GET", INDICES + r"/_alias", "GET /{indices}/_alias")
def aliases(cluster: FakeCluster, request: Request, found: re.Match[str]) -> Any:
    return {i.name: {"aliases": {}} for i in index_names(cluster, found.group("indices"), request)}


@api("GET", r"/_data_stream(?:/[^/]+)?", "GET /_data_stream")
def data_streams(cluster: FakeCluster, request: Request, found: re.Match[str]) -> Any:
    return {"data_streams": []}


@api("POST", INDICES + r"/_forcemerge", "POST /{indices}/_forcemerge")
def forcemerge(cluster: FakeCluster, request: Request, found: re.Match[str]) -> Any:
    target = int(request.params.get("max_num_segments", "1"))
    chosen = index_names(cluster, found.group("indices"), request)
    task_id = f"{next(iter(cluster.nodes))}:{len(cluster.tasks) + 1}"
    cluster.tasks[task_id] = {"indices": [i.name for i in chosen], "max_segments": target}
    if request.flag("wait_for_completion", True):
        return merged(cluster, task_id)["response"]
    return {"task": task_id}


@api("GET", r"/_tasks/(?P<id>[^/]+)", "GET /_tasks/{id}")
def task(cluster: FakeCluster, request: Request, found: re.Match[str]) -> Any:
    if found.group("id") not in cluster.tasks:
        raise error(404, "resource_not_found_exception", f"task [{found.group('id')}] isn't running and hasn't "
                                                         "stored its results")
    return merged(cluster, found.group("id"))


def merged(cluster: FakeCluster, task_id: str) -> dict[str, Any]:
    """The merge is done once asked about: each started copy of its indices at most its target segments."""
    asked = cluster.tasks[task_id]
    copies = [c for name in asked["indices"] if name in cluster.indices for c in cluster.indices[name].copies
              if c.state == STARTED]
    for copy in copies:
        copy.segments = min(copy.segments, asked["max_segments"])
    return {"completed": True, "task": {"node": task_id.split(":")[0], "id": int(task_id.split(":")[1]),
                                        "action": "indices:admin/forcemerge"},
            "response": {"_shards": {"total": len(copies), "successful": len(copies), "failed": 0}}}
