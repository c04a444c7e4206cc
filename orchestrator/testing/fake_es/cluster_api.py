"""The fake's cluster-level APIs: health (its server-side waits let allocation rounds pass), settings,
state, allocation explain."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from orchestrator.testing.fake_es.filter_path import WILDCARDS
from orchestrator.testing.fake_es.model import INITIALIZING, STARTED, UNASSIGNED, Copy, FakeCluster, FakeIndex
from orchestrator.testing.fake_es.routes import Answer, Request, api, error, index_names

MAX_TICKS = 25  # allocation rounds a server-side wait lets pass before it answers 408
DEFAULTS = {
    "cluster.routing.allocation.enable": "all", "cluster.routing.allocation.node_concurrent_recoveries": "2",
    "cluster.routing.allocation.node_concurrent_incoming_recoveries": "2",
    "cluster.routing.allocation.node_concurrent_outgoing_recoveries": "2",
    "cluster.routing.allocation.node_initial_primaries_recoveries": "4",
    "cluster.routing.allocation.awareness.attributes": [], "cluster.routing.allocation.disk.threshold_enabled": "true",
    "cluster.routing.allocation.disk.watermark.low": "85%", "cluster.routing.allocation.disk.watermark.high": "90%",
    "cluster.routing.allocation.disk.watermark.flood_stage": "95%", "indices.recovery.max_bytes_per_sec": "40mb",
    "indices.recovery.max_concurrent_file_chunks": "2", "indices.recovery.max_concurrent_operations": "1",
    "node.bandwidth.recovery.network": "-1", "node.bandwidth.recovery.disk.read": "-1",
    "node.bandwidth.recovery.disk.write": "-1", "cluster.max_shards_per_node": "1000",
}


# --- health and settings ---------------------------------------------------------------------------
def counted_ok(wanted: str, count: int) -> bool:
    found = re.fullmatch(r"(>=|<=|>|<|ge\(|le\(|gt\(|lt\()?(\d+)\)?", wanted)
    if found is None:
        raise error(400, "illegal_argument_exception", f"cannot parse wait_for_nodes [{wanted}]")
    op, n = found.group(1) or "", int(found.group(2))
    return {"": count == n, ">=": count >= n, "ge(": count >= n, "<=": count <= n, "le(": count <= n,
            ">": count > n, "gt(": count > n, "<": count < n, "lt(": count < n}[op]


STATUS_ORDER = {"green": 0, "yellow": 1, "red": 2}


@api("GET", r"/_cluster/health(?:/(?P<indices>[^/]+))?", "GET /_cluster/health")
def health(cluster: FakeCluster, request: Request, found: re.Match[str]) -> Answer:
    waits = any(k in request.params for k in ("wait_for_status", "wait_for_nodes", "wait_for_no_initializing_shards",
                                              "wait_for_no_relocating_shards"))

    def met(h: dict[str, Any]) -> bool:
        status = request.params.get("wait_for_status")
        nodes = request.params.get("wait_for_nodes")
        return ((status is None or STATUS_ORDER[h["status"]] <= STATUS_ORDER[status])
                and (nodes is None or counted_ok(nodes, h["number_of_nodes"]))
                and not (request.flag("wait_for_no_initializing_shards") and h["initializing_shards"]))

    for _ in range(MAX_TICKS if waits else 1):
        cluster.tick()
        answer = cluster.health()
        if not waits or met(answer):
            break
    else:
        answer["timed_out"] = True
    indices = found.group("indices")
    level = request.params.get("level", "cluster")
    if indices or level != "cluster":
        chosen = index_names(cluster, indices, request)
        answer["indices"] = {i.name: index_health(cluster, i, level == "shards") for i in chosen}
    return (408 if answer["timed_out"] else 200), answer


def index_health(cluster: FakeCluster, index: FakeIndex, shards: bool) -> dict[str, Any]:
    def counts(copies: Iterable[Copy]) -> dict[str, int]:
        listed = list(copies)
        return {"active_shards": sum(1 for c in listed if c.state == STARTED), "relocating_shards": 0,
                "initializing_shards": sum(1 for c in listed if c.state == INITIALIZING),
                "unassigned_shards": sum(1 for c in listed if c.state == UNASSIGNED)}

    out = {"status": cluster.index_status(index), "number_of_shards": len(index.shards),
           "number_of_replicas": len(index.shards[0]) - 1 if index.shards else 0,
           "active_primary_shards": sum(1 for s in index.shards for c in s if c.primary and c.state == STARTED),
           **counts(index.copies)}
    if shards:
        out["shards"] = {str(n): {"status": "red" if any(c.primary and c.state != STARTED for c in copies)
                                  else "yellow" if any(c.state != STARTED for c in copies) else "green",
                                  "primary_active": any(c.primary and c.state == STARTED for c in copies),
                                  **counts(copies)} for n, copies in enumerate(index.shards)}
    return out


def setting_text(value: Any) -> Any:
    if isinstance(value, bool):
        return "true" if value else "false"
    return value if isinstance(value, list | str) or value is None else str(value)


@api("GET", r"/_cluster/settings", "GET /_cluster/settings")
def get_settings(cluster: FakeCluster, request: Request, found: re.Match[str]) -> Any:
    out = {scope: dict(values) for scope, values in cluster.settings.items()}
    if request.flag("include_defaults"):
        out["defaults"] = {k: v for k, v in DEFAULTS.items()
                           if k not in cluster.settings["persistent"] and k not in cluster.settings["transient"]}
    return out if request.flag("flat_settings") else {k: nested(v) for k, v in out.items()}


def nested(flat: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in flat.items():
        *parents, last = key.split(".")
        target = out
        for p in parents:
            target = target.setdefault(p, {})
        target[last] = value
    return out


def flat(values: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in values.items():
        if isinstance(value, dict):
            out.update(flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


@api("PUT", r"/_cluster/settings", "PUT /_cluster/settings")
def put_settings(cluster: FakeCluster, request: Request, found: re.Match[str]) -> Any:
    body = request.body if isinstance(request.body, dict) else {}
    changed: dict[str, dict[str, Any]] = {"persistent": {}, "transient": {}}
    for scope in ("persistent", "transient"):
        for key, value in flat(body.get(scope) or {}).items():
            if value is None:
                cluster.settings[scope].pop(key, None)
            else:
                cluster.settings[scope][key] = changed[scope][key] = setting_text(value)
    return {"acknowledged": True, **{k: nested(v) for k, v in changed.items()}}


@api("GET", r"/_cluster/state/(?P<metrics>[^/]+)(?:/(?P<indices>[^/]+))?", "GET /_cluster/state")
def state(cluster: FakeCluster, request: Request, found: re.Match[str]) -> Any:
    metrics = found.group("metrics").split(",")
    if "routing_table" in metrics or "routing_nodes" in metrics:
        cluster.tick()  # a real cluster allocates on its own; the fake, as it is watched (health, routing)
    out: dict[str, Any] = {"cluster_name": cluster.name, "cluster_uuid": cluster.uuid}
    if "master_node" in metrics or "_all" in metrics:
        master = cluster.elected_master()
        out["master_node"] = master.id if master else None
    if "blocks" in metrics or "_all" in metrics:
        out["blocks"] = {}
    if "routing_table" in metrics or "_all" in metrics:
        chosen = index_names(cluster, found.group("indices"), request, hidden_default=True)
        out["routing_table"] = {"indices": {i.name: {"shards": {str(n): [
            {"state": c.state, "primary": c.primary, "node": c.node, "relocating_node": None, "shard": n,
             "index": i.name} for c in copies] for n, copies in enumerate(i.shards)}} for i in chosen}}
    if "routing_nodes" in metrics or "_all" in metrics:  # every node's copies, as the elected master assigns them
        named = nodes_named(request.params.get("filter_path", ""))
        out["routing_nodes"] = {"unassigned": [], "nodes": {n.id: [
            {"state": c.state, "primary": c.primary, "node": c.node, "relocating_node": None, "shard": c.shard,
             "index": c.index, "allocation_id": {"id": f"{c.index}-{c.shard}-{c.node}"[:22]},
             "relocation_failure_info": {"failed_attempts": 0}}
            for c in sorted(cluster.on_node[n.id], key=lambda c: (c.index, c.shard))]
            for n in cluster.up_nodes() if named is None or n.id in named}}
    return out


def nodes_named(filter_path: str) -> set[str] | None:
    """The node ids a `filter_path` keeps of `routing_nodes` when each of its patterns names one node literally
    (`routing_nodes.nodes.ID`, as the tool asks a batch's copies), else None: only those nodes are listed, the
    filter would drop the rest (at 3,000 nodes, listing every node's copies was most of the fake's time)."""
    named = set()
    for pattern in (p.strip() for p in filter_path.split(",") if p.strip()):
        parts = pattern.split(".")
        if len(parts) < 3 or parts[:2] != ["routing_nodes", "nodes"] or not WILDCARDS.isdisjoint(parts[2]):
            return None
        named.add(parts[2])
    return named or None


@api("POST", r"/_cluster/allocation/explain", "POST /_cluster/allocation/explain")
def explain(cluster: FakeCluster, request: Request, found: re.Match[str]) -> Any:
    body = request.body if isinstance(request.body, dict) else {}
    index = cluster.indices.get(str(body.get("index")))
    shard = int(body.get("shard", 0))
    copies = index.shards[shard] if index is not None and 0 <= shard < len(index.shards) else []
    copy = next((c for c in copies if c.state == UNASSIGNED and c.primary == bool(body.get("primary"))), None)
    if copy is None:
        raise error(400, "illegal_argument_exception", f"unable to find any unassigned shards to explain "
                                                      f"[{body.get('index')}][{shard}]")
    home = cluster.nodes.get(copy.last_node or "")
    restricted = (cluster.setting("cluster.routing.allocation.enable") or "all") != "all"
    waiting = home is not None and not home.up
    decisions = [{"node_id": n.id, "node_name": n.name, "node_decision": "no",
                  "deciders": [{"decider": "enable", "decision": "NO", "explanation": "replica allocations are "
                                "forbidden due to cluster setting [cluster.routing.allocation.enable=primaries]"}]
                  if restricted else [{"decider": "same_shard", "decision": "NO", "explanation": "a copy of this "
                                       "shard is already allocated to this node"}]}
                 for n in cluster.up_nodes() if n.is_data]
    return {"index": copy.index, "shard": copy.shard, "primary": copy.primary, "current_state": "unassigned",
            "unassigned_info": {"reason": "NODE_LEFT", "details": f"node_left [{copy.last_node}]",
                                "last_allocation_status": "no_attempt"},
            "can_allocate": "allocation_delayed" if waiting else "no",
            "allocate_explanation": "cannot allocate because allocation is not permitted to any of the nodes",
            "node_allocation_decisions": decisions}

