"""The fake's index APIs: `_cat/shards`, `_cat/indices`, shard-level stats, recoveries, flush, index
creation and the documents the run lock is kept in; and the few answers a plan asks for once (the root,
snapshots, deprecations)."""

from __future__ import annotations

import re
from fnmatch import fnmatchcase
from typing import Any

from orchestrator.testing.fake_es.cluster_api import flat, nested
from orchestrator.testing.fake_es.model import STARTED, UNASSIGNED, Copy, FakeCluster, FakeIndex, LockDoc, node_id
from orchestrator.testing.fake_es.nodes_api import copy_stats
from orchestrator.testing.fake_es.routes import Request, api, cat, error, index_names, no_such_index

INDICES = r"/(?P<indices>[^/_][^/]*)"


@api("GET", r"/", "GET /")
def root(cluster: FakeCluster, request: Request, found: re.Match[str]) -> Any:
    return {"name": "es-1", "cluster_name": cluster.name, "cluster_uuid": cluster.uuid,
            "version": {"number": cluster.version, "build_flavor": "default", "build_type": "tar",
                        "lucene_version": "10.2.2", "minimum_wire_compatibility_version": "8.19.0",
                        "minimum_index_compatibility_version": "8.0.0"}, "tagline": "You Know, for Search"}


def shard_row(cluster: FakeCluster, copy: Copy) -> dict[str, Any]:
    node = cluster.nodes.get(copy.node) if copy.node else None
    assigned = node is not None
    return {"index": copy.index, "shard": str(copy.shard), "prirep": "p" if copy.primary else "r",
            "state": copy.state, "id": copy.node, "node": node.name if node else None,
            "ip": node.ip if node else None, "docs": str(copy.docs) if assigned else None,
            "store": str(copy.size) if assigned else None}


@api("GET", r"/_cat/shards(?:" + INDICES + ")?", "GET /_cat/shards")
def cat_shards(cluster: FakeCluster, request: Request, found: re.Match[str]) -> Any:
    if "ignore_unavailable" in request.params:
        raise error(400, "illegal_argument_exception",
                    f"request [{request.path}] contains unrecognized parameter: [ignore_unavailable]")
    chosen = index_names(cluster, found.group("indices"), request, hidden_default=True)  # the routing table
    return cat([shard_row(cluster, c) for i in chosen for c in i.copies], request)


@api("GET", r"/_cat/indices(?:" + INDICES + ")?", "GET /_cat/indices")
def cat_indices(cluster: FakeCluster, request: Request, found: re.Match[str]) -> Any:
    wanted = request.params.get("health")
    rows = []
    for index in index_names(cluster, found.group("indices"), request):
        status = cluster.index_status(index)
        if wanted and status != wanted:
            continue
        rows.append({"health": status, "status": "open", "index": index.name, "uuid": index.name,
                     "pri": str(len(index.shards)), "rep": str(len(index.shards[0]) - 1 if index.shards else 0),
                     "docs.count": str(sum(s[0].docs for s in index.shards)), "docs.deleted": "0",
                     "store.size": str(sum(c.size for c in index.copies if c.state == STARTED))})
    return cat(rows, request)


@api("GET", r"(?:" + INDICES + r")?/_stats(?:/(?P<metrics>[^/]+))?", "GET /_stats")
def stats(cluster: FakeCluster, request: Request, found: re.Match[str]) -> Any:
    chosen = index_names(cluster, found.group("indices"), request)
    shards = request.params.get("level") == "shards"
    out: dict[str, Any] = {}
    total = 0
    for index in chosen:
        assigned = [c for c in index.copies if c.state != UNASSIGNED]
        total += len(assigned)
        body: dict[str, Any] = {"uuid": index.name, "health": cluster.index_status(index), "status": "open",
                                "primaries": {"docs": {"count": sum(s[0].docs for s in index.shards)},
                                              "indexing": {"index_total": index.indexed}},
                                "total": {"store": {"size_in_bytes": sum(c.size for c in assigned)}}}
        if shards:
            body["shards"] = {}
            for c in assigned:
                body["shards"].setdefault(str(c.shard), []).append(copy_stats(cluster, c))
        out[index.name] = body
    return {"_shards": {"total": total, "successful": total, "failed": 0}, "_all": {"primaries": {}, "total": {}},
            "indices": out}


def recovery(cluster: FakeCluster, copy: Copy) -> dict[str, Any] | None:
    r = copy.recovery
    if r is None or copy.node is None:
        return None

    def node(node_id: str) -> dict[str, Any]:
        n = cluster.nodes.get(node_id)
        return {} if n is None else {"id": n.id, "host": n.ip, "transport_address": f"{n.ip}:9300", "ip": n.ip,
                                     "name": n.name}

    return {"id": copy.shard, "type": r.kind, "stage": "DONE" if r.done else "INDEX", "primary": copy.primary,
            "start_time_in_millis": r.start_ms, "stop_time_in_millis": r.start_ms + 1_000 if r.done else None,
            "total_time_in_millis": 1_000 if r.done else 0, "source": node(r.source) if r.source else {},
            "target": node(r.target),
            "index": {"size": {"total_in_bytes": r.copied, "reused_in_bytes": 0, "recovered_in_bytes": r.copied,
                               "percent": "100.0%" if r.done else "0.0%"},
                      "files": {"total": 0, "reused": 0, "recovered": 0, "percent": "100.0%"},
                      "total_time_in_millis": 0, "source_throttle_time_in_millis": 0,
                      "target_throttle_time_in_millis": 0},
            "translog": {"recovered": 0, "total": 0, "percent": "100.0%", "total_on_start": 0,
                         "total_time_in_millis": 0},
            "verify_index": {"check_index_time_in_millis": 0, "total_time_in_millis": 0}}


@api("GET", r"(?:" + INDICES + r")?/_recovery", "GET /_recovery")
def recoveries(cluster: FakeCluster, request: Request, found: re.Match[str]) -> Any:
    active_only = request.flag("active_only")
    out = {}
    for index in index_names(cluster, found.group("indices"), request):
        rows = [r for c in index.copies if (r := recovery(cluster, c)) is not None
                and not (active_only and r["stage"] == "DONE")]
        if rows:
            out[index.name] = {"shards": rows}
    return out


@api("POST", r"(?:" + INDICES + r")?/_flush", "POST /_flush")
def flush(cluster: FakeCluster, request: Request, found: re.Match[str]) -> Any:
    copies = sum(1 for i in index_names(cluster, found.group("indices"), request) for c in i.copies
                 if c.state != UNASSIGNED)
    return {"_shards": {"total": copies, "successful": copies, "failed": 0}}


# --- an index of documents: the run lock and the pause request ------------------------------------------
def create(cluster: FakeCluster, name: str, settings: dict[str, Any]) -> FakeIndex:
    values = {k.removeprefix("index."): v for k, v in flat(settings).items()}
    cluster.create_index(name, int(values.get("number_of_shards", 1)), int(values.get("number_of_replicas", 1)),
                         hidden=str(values.get("hidden", "false")).lower() == "true",
                         auto_expand=values.get("auto_expand_replicas"))
    return cluster.indices[name]


@api("PUT", INDICES, "PUT /{index}")
def create_index(cluster: FakeCluster, request: Request, found: re.Match[str]) -> Any:
    name = found.group("indices")
    if name in cluster.indices:
        raise error(400, "resource_already_exists_exception", f"index [{name}/{name}] already exists", index=name)
    body = request.body if isinstance(request.body, dict) else {}
    create(cluster, name, body.get("settings") or {})
    return {"acknowledged": True, "shards_acknowledged": True, "index": name}


def written(cluster: FakeCluster, index: str, doc_id: str, source: Any, result: str) -> dict[str, Any]:
    if index not in cluster.indices:
        create(cluster, index, {})  # created by its first document, as Elasticsearch does
    cluster.seq_no += 1
    cluster.docs[(index, doc_id)] = LockDoc(dict(source or {}), cluster.seq_no)
    return {"_index": index, "_id": doc_id, "_version": 1, "result": result, "_seq_no": cluster.seq_no,
            "_primary_term": 1}


@api("PUT", INDICES + r"/_create/(?P<id>[^/]+)", "PUT /{index}/_create/{id}")
def create_doc(cluster: FakeCluster, request: Request, found: re.Match[str]) -> Any:
    index, doc_id = found.group("indices"), found.group("id")
    if (index, doc_id) in cluster.docs:
        raise error(409, "version_conflict_engine_exception", f"[{doc_id}]: version conflict, document already "
                                                              "exists", index=index)
    return 201, written(cluster, index, doc_id, request.body, "created")


@api("GET", INDICES + r"/_doc/(?P<id>[^/]+)", "GET /{index}/_doc/{id}")
def get_doc(cluster: FakeCluster, request: Request, found: re.Match[str]) -> Any:
    index, doc_id = found.group("indices"), found.group("id")
    if index not in cluster.indices:
        raise no_such_index(index)
    doc = cluster.docs.get((index, doc_id))
    if doc is None:
        return 404, {"_index": index, "_id": doc_id, "found": False}
    return {"_index": index, "_id": doc_id, "_version": 1, "_seq_no": doc.seq_no, "_primary_term": doc.primary_term,
            "found": True, "_source": doc.source}


@api("PUT", INDICES + r"/_doc/(?P<id>[^/]+)", "PUT /{index}/_doc/{id}")
def put_doc(cluster: FakeCluster, request: Request, found: re.Match[str]) -> Any:
    index, doc_id = found.group("indices"), found.group("id")
    doc = cluster.docs.get((index, doc_id))
    if "if_seq_no" in request.params and (doc is None or str(doc.seq_no) != request.params["if_seq_no"]):
        raise error(409, "version_conflict_engine_exception", f"[{doc_id}]: version conflict", index=index)
    return written(cluster, index, doc_id, request.body, "updated" if doc else "created")


@api("DELETE", INDICES + r"/_doc/(?P<id>[^/]+)", "DELETE /{index}/_doc/{id}")
def delete_doc(cluster: FakeCluster, request: Request, found: re.Match[str]) -> Any:
    index, doc_id = found.group("indices"), found.group("id")
    if cluster.docs.pop((index, doc_id), None) is None:
        return 404, {"_index": index, "_id": doc_id, "result": "not_found"}
    return {"_index": index, "_id": doc_id, "result": "deleted"}


# --- read once by a plan ---------------------------------------------------------------------------------
@api("GET", r"/_snapshot/_status", "GET /_snapshot/_status")
def running_snapshots(cluster: FakeCluster, request: Request, found: re.Match[str]) -> Any:
    return {"snapshots": []}


@api("GET", r"/_snapshot(?:/[^/]+/[^/]+)?", "GET /_snapshot")
def snapshots(cluster: FakeCluster, request: Request, found: re.Match[str]) -> Any:
    return {"snapshots": [], "total": 0, "remaining": 0} if request.path.count("/") > 1 else {}


@api("GET", r"/_migration/deprecations", "GET /_migration/deprecations")
def deprecations(cluster: FakeCluster, request: Request, found: re.Match[str]) -> Any:
    return {"cluster_settings": [], "node_settings": [], "index_settings": {}, "ml_settings": [],
            "data_streams": {}, "templates": {}, "ilm_policies": {}}


# Elasticsearch's restricted system indices: their settings are not the tool's role's to read (docs/privileges.md),
# so a real cluster leaves them out of an index API's answer under `ignore_unavailable`.
RESTRICTED = (".security",)


SOME_INDICES = r"/(?P<indices>_all|[^/_][^/]*)"


@api("GET", SOME_INDICES + r"/_settings(?:/(?P<names>[^/]+))?", "GET /{indices}/_settings")
def index_settings(cluster: FakeCluster, request: Request, found: re.Match[str]) -> Any:
    out = {}
    for index in index_names(cluster, found.group("indices"), request):
        if index.name.startswith(RESTRICTED):  # as the tool's role sees them: no `allow_restricted_indices`
            continue
        values = {"index.number_of_shards": str(len(index.shards)), "index.hidden": str(index.hidden).lower(),
                  "index.number_of_replicas": str(len(index.shards[0]) - 1 if index.shards else 0),
                  "index.uuid": node_id(f"index:{index.name}"), **index.settings,
                  **({"index.auto_expand_replicas": index.auto_expand} if index.auto_expand else {})}
        wanted = (found.group("names") or "").split(",")
        values = {k: v for k, v in values.items() if not found.group("names") or any(fnmatchcase(k, w) for w in wanted)}
        out[index.name] = {"settings": values if request.flag("flat_settings") else nested(values)}
    return out


@api("PUT", SOME_INDICES + r"/_settings", "PUT /{indices}/_settings")
def put_index_settings(cluster: FakeCluster, request: Request, found: re.Match[str]) -> Any:
    """Dynamic index settings (flat or nested `index.` keys); null puts the default back."""
    body = flat(request.body) if isinstance(request.body, dict) else {}
    for index in index_names(cluster, found.group("indices"), request):
        for key, value in body.items():
            if not key.startswith("index."):
                raise error(400, "illegal_argument_exception", f"unknown setting [{key}]")
            if value is None:
                index.settings.pop(key, None)
            else:
                index.settings[key] = str(value)
    return {"acknowledged": True}


@api("GET", r"/_cat/recovery(?:" + INDICES + ")?", "GET /_cat/recovery")
def cat_recovery(cluster: FakeCluster, request: Request, found: re.Match[str]) -> Any:
    active_only = request.flag("active_only")
    rows = []
    for index in index_names(cluster, found.group("indices"), request):
        for c in index.copies:
            r = c.recovery
            if r is None or c.node is None or (active_only and r.done):
                continue
            source, target = cluster.nodes.get(r.source), cluster.nodes.get(r.target)
            row = {"index": index.name, "shard": str(c.shard), "type": r.kind.lower(),
                   "stage": "done" if r.done else "index", "source_node": source.name if source else "n/a",
                   "target_node": target.name if target else None, "bytes": str(r.copied),
                   "bytes_recovered": str(r.copied), "bytes_total": str(r.copied),
                   "start_time_millis": str(r.start_ms)}
            rows.append({**row, **{alias: row[name] for alias, name in RECOVERY_ALIASES.items()}})
    return cat(rows, request)


RECOVERY_ALIASES = {"start_millis": "start_time_millis", "i": "index", "s": "shard", "ty": "type", "st": "stage",
                    "snode": "source_node", "tnode": "target_node", "b": "bytes", "br": "bytes_recovered",
                    "tb": "bytes_total"}
