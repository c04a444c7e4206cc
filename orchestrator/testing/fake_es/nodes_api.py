"""The fake's node APIs: node info and node stats (a node's own shard copies at `level=shards`), node
specifications as Elasticsearch resolves them (ids, names, addresses, `master:true`, attributes), the
shutdown API and `_cat/allocation`."""

from __future__ import annotations

import re
from fnmatch import fnmatchcase
from typing import Any

from orchestrator.testing.fake_es.filter_path import WILDCARDS
from orchestrator.testing.fake_es.model import Copy, FakeCluster, FakeNode
from orchestrator.testing.fake_es.routes import Request, api, cat

INFO_METRICS = {"settings", "os", "process", "jvm", "thread_pool", "transport", "http", "plugins", "ingest",
                "aggregations", "indices", "modules", "none", "_all", "remote_cluster_server"}
STATS_METRICS = {"os", "indices", "fs", "jvm", "process", "transport", "http", "breaker", "thread_pool", "_all"}
MEMORY = 64 * 2**30
SPECIAL_TERMS = {"_all", "_local", "_master"}


def resolve(cluster: FakeCluster, spec: str | None) -> list[FakeNode]:
    """The nodes (in the cluster) a node specification names, in the cluster's order."""
    if not spec or spec == "_all":
        return cluster.up_nodes()
    terms = spec.split(",")
    if all(WILDCARDS.isdisjoint(t) and ":" not in t and t not in SPECIAL_TERMS for t in terms):
        return [n for n in cluster.named(terms) if n.up]  # ids, addresses or names alone: looked up
    up = cluster.up_nodes()
    chosen: set[str] = set()
    for term in terms:
        if term in ("_all", "*"):
            chosen.update(n.id for n in up)
        elif term == "_local":
            chosen.update(n.id for n in up[:1])
        elif term == "_master":
            master = cluster.elected_master()
            chosen.update([master.id] if master else [])
        elif ":" in term:
            key, value = term.split(":", 1)
            for n in up:
                roles = {"master": n.is_master, "data": n.is_data}.get(key, key in n.roles)
                if key in ("master", "data") or key in {r for m in up for r in m.roles}:
                    if (value == "true") == roles:
                        chosen.add(n.id)
                elif key == "zone" and n.zone is not None and fnmatchcase(n.zone, value):
                    chosen.add(n.id)
        elif WILDCARDS.isdisjoint(term):  # an id, an address or a name: looked up, not matched against every node
            chosen.update(n.id for n in cluster.named([term]))
        else:
            chosen.update(n.id for n in up if term in (n.id, n.ip) or fnmatchcase(n.name, term))
    return [n for n in up if n.id in chosen]


def wrapped(cluster: FakeCluster, nodes: dict[str, Any]) -> dict[str, Any]:
    return {"_nodes": {"total": len(nodes), "successful": len(nodes), "failed": 0}, "cluster_name": cluster.name,
            "nodes": nodes}


def info(cluster: FakeCluster, node: FakeNode, metrics: set[str], flat_settings: bool) -> dict[str, Any]:
    everything = not metrics or "_all" in metrics
    out: dict[str, Any] = {
        "name": node.name, "transport_address": f"{node.ip}:9300", "host": node.ip, "ip": node.ip,
        "version": node.version, "transport_version": "9000000", "build_flavor": "default", "build_type": "tar",
        "build_hash": "0000000", "total_indexing_buffer": 53687091, "roles": list(node.roles),
        "attributes": {"zone": node.zone} if node.zone else {}}
    if everything or "settings" in metrics:
        # As a node installed from the package reports them (the sandbox's nodes report 16).
        settings = {"action.destructive_requires_name": "true", "bootstrap.memory_lock": "true",
                    "cluster.name": cluster.name, "discovery.seed_hosts": [m.ip for m in masters(cluster)],
                    "http.port": "9200", "http.type.default": "netty4", "network.host": node.ip,
                    "node.name": node.name, "node.roles": list(node.roles), "path.data": "/var/lib/elasticsearch",
                    "path.home": "/usr/share/elasticsearch", "path.logs": "/var/log/elasticsearch",
                    "path.repo": ["/mnt/snapshots"], "transport.port": "9300", "transport.type.default": "netty4",
                    "xpack.security.enabled": "true", "xpack.security.http.ssl.enabled": "true",
                    **({"node.attr.zone": node.zone} if node.zone else {}), **node.config}
        out["settings"] = settings if flat_settings else _nested(settings)
    if everything or "os" in metrics:
        out["os"] = {"refresh_interval_in_millis": 1000, "name": "Linux", "pretty_name": "Debian GNU/Linux 12",
                     "arch": "amd64", "version": "6.1.0", "available_processors": 8, "allocated_processors": 8}
    if everything or "process" in metrics:
        out["process"] = {"refresh_interval_in_millis": 1000, "id": node.pid, "mlockall": False}
    if everything or "jvm" in metrics:
        out["jvm"] = {"pid": node.pid, "version": "25", "vm_name": "OpenJDK 64-Bit Server VM",
                      "start_time_in_millis": node.start_ms,
                      "mem": {"heap_init_in_bytes": 2**33, "heap_max_in_bytes": 2**33}}
    if everything or "plugins" in metrics:
        out["plugins"] = []
    return out


def masters(cluster: FakeCluster) -> list[FakeNode]:
    return [n for n in cluster.nodes.values() if n.is_master][:5]


def _nested(flat: dict[str, Any]) -> dict[str, Any]:
    from orchestrator.testing.fake_es.cluster_api import nested

    return nested(flat)


@api("GET", r"/_nodes/shutdown", "GET /_nodes/shutdown")
def shutdown(cluster: FakeCluster, request: Request, found: re.Match[str]) -> Any:
    return {"nodes": []}


@api("GET", r"/_nodes(?:/(?P<spec>[^/]+))?/stats(?:/(?P<metrics>[^/]+))?(?:/(?P<index_metrics>[^/]+))?",
     "GET /_nodes/stats")
def node_stats(cluster: FakeCluster, request: Request, found: re.Match[str]) -> Any:
    spec, metrics = found.group("spec"), set((found.group("metrics") or "_all").split(","))
    shards = request.params.get("level") == "shards"
    out = {}
    asked = resolve(cluster, spec)
    for node in asked:
        if node.id in cluster.stats_failing:
            continue
        stats: dict[str, Any] = {"timestamp": 0, "name": node.name, "transport_address": f"{node.ip}:9300",
                                 "host": node.ip, "ip": node.ip, "roles": list(node.roles)}
        if metrics & {"os", "_all"}:
            stats["os"] = {"mem": {"total_in_bytes": MEMORY, "free_in_bytes": MEMORY // 4}}
        if metrics & {"thread_pool", "_all"}:  # the fake runs no search: its counters stay at zero
            stats["thread_pool"] = {"search": {"threads": 0, "queue": 0, "active": 0, "rejected": 0, "largest": 0,
                                               "completed": 0}}
        if metrics & {"indices", "_all"}:
            held = cluster.on_node[node.id]
            queries, query_ms = cluster.search_totals(node)
            stats["indices"] = {"docs": {"count": sum(c.docs for c in held), "deleted": 0},
                                "store": {"size_in_bytes": sum(c.size for c in held)},
                                "search": {"open_contexts": 0, "query_total": queries, "query_time_in_millis": query_ms,
                                           "query_current": 0, "fetch_total": queries, "fetch_time_in_millis": 0}}
            if shards:
                # What the filter drops is not built (a copy of an index on every node lists a lease per node).
                wanted = request.params.get("filter_path", "")
                left_out = {p.rsplit(".", 1)[-1] for p in wanted.split(",") if p.startswith("-")}
                leases = not wanted or "retention_leases" in wanted
                by_index: dict[str, list[dict[str, Any]]] = {}
                for c in sorted(held, key=lambda c: (c.index, c.shard)):
                    if c.index not in left_out:
                        by_index.setdefault(c.index, []).append({str(c.shard): copy_stats(cluster, c, leases)})
                stats["indices"]["shards"] = by_index
        out[node.id] = stats
    failed = [n for n in asked if n.id in cluster.stats_failing]
    answer = wrapped(cluster, out)
    if failed:  # as Elasticsearch 9 reports a node whose stats failed
        answer["_nodes"] = {"total": len(asked), "successful": len(out), "failed": len(failed), "failures": [
            {"type": "failed_node_exception", "reason": f"Failed node [{n.id}]", "node_id": n.id,
             "caused_by": {"type": "circuit_breaking_exception", "reason": "[parent] Data too large"}}
            for n in failed]}
    return answer


def copy_stats(cluster: FakeCluster, copy: Copy, with_leases: bool = True) -> dict[str, Any]:
    """One copy's shard-level stats (node stats and index stats alike): routing, docs, store, its last
    commit, sequence numbers and its view of the shard's retention leases (current: nothing at risk)."""
    top = copy.docs - 1
    leases = [{"id": f"peer_recovery/{c.node}", "retaining_seq_no": copy.docs, "timestamp": 0,
               "source": "peer recovery"} for c in cluster.indices[copy.index].shards[copy.shard]
              if c.node and with_leases]
    return {"routing": {"state": copy.state, "primary": copy.primary, "node": copy.node, "relocating_node": None},
            "docs": {"count": copy.docs, "deleted": 0}, "store": {"size_in_bytes": copy.size, "reserved_in_bytes": 0},
            "commit": {"id": "AAAAAAAAAAAAAAAAAAAAAA==", "generation": 4,
                       "user_data": {"local_checkpoint": str(top), "max_seq_no": str(top),
                                     "history_uuid": "h", "translog_uuid": "t"}, "num_docs": copy.docs},
            "seq_no": {"max_seq_no": top, "local_checkpoint": top, "global_checkpoint": top},
            "retention_leases": {"primary_term": 1, "version": len(leases), "leases": leases},
            "shard_path": {"state_path": "/var/lib/elasticsearch", "data_path": "/var/lib/elasticsearch",
                           "is_custom_data_path": False}}


@api("GET", r"/_nodes(?:/(?P<first>[^/]+))?(?:/(?P<second>[^/]+))?", "GET /_nodes")
def node_info(cluster: FakeCluster, request: Request, found: re.Match[str]) -> Any:
    first, second = found.group("first"), found.group("second")
    if second is None and first is not None and set(first.split(",")) <= INFO_METRICS:
        spec, metrics = None, first  # `/_nodes/jvm,process`: metrics, not nodes
    else:
        spec, metrics = first, second
    wanted = set(metrics.split(",")) if metrics else set()
    flat_settings = request.flag("flat_settings")
    return wrapped(cluster, {n.id: info(cluster, n, wanted, flat_settings) for n in resolve(cluster, spec)})


@api("GET", r"/_cat/allocation(?:/(?P<spec>[^/]+))?", "GET /_cat/allocation")
def cat_allocation(cluster: FakeCluster, request: Request, found: re.Match[str]) -> Any:
    rows = []
    for node in resolve(cluster, found.group("spec")):
        if not node.is_data:
            continue
        used = sum(c.size for c in cluster.on_node[node.id])
        total = 4 * 2**40
        rows.append({"shards": str(len(cluster.on_node[node.id])), "disk.indices": str(used),
                     "disk.used": str(used), "disk.avail": str(total - used), "disk.total": str(total),
                     "disk.percent": str(round(100 * used / total)), "host": node.ip, "ip": node.ip,
                     "node": node.name, "node.role": "dhis"})
    return cat(rows, request)
