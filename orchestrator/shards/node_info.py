"""A node as node info describes it, read into the snapshot's `EsNode`: the fields each read asks for
(`filter_path`), and how an answer's node becomes one."""

from __future__ import annotations

from typing import Any

from orchestrator.shards.answers import Nodes, parsed
from orchestrator.shards.snapshot import EsNode

# OpenSearch calls the master role cluster_manager; the shared decisions read "master".
ROLE_ALIASES = {"cluster_manager": "master"}
RECOVERY_SETTINGS = ("indices.recovery.", "node.bandwidth.recovery.")  # a node's own, read for the plan
# What the plan reads of each node: a third of node info's answer (its JVM's arguments, memory pools and
# collectors are most of it).
NODE_FIELDS = ",".join(f"nodes.*.{f}" for f in (
    "name", "host", "ip", "roles", "attributes", "version", "process.id", "jvm.pid", "jvm.start_time_in_millis",
    "os.allocated_processors", "settings"))
# What the identity of a node's process is read from (see `ShardClusterAdapter.live_identity`).
IDENTITY_FIELDS = ",".join(f"nodes.*.{f}" for f in ("name", "process.id", "jvm.pid", "jvm.start_time_in_millis"))


def node_from(node_id: str, n: dict[str, Any], awareness_attribute: str) -> EsNode:
    own = (n.get("settings") or {}).items()
    return EsNode(
        id=node_id, name=n.get("name", ""), host=n.get("host", ""), ip=n.get("ip", ""),
        roles=tuple(ROLE_ALIASES.get(r, r) for r in n.get("roles", ())),
        zone=(n.get("attributes") or {}).get(awareness_attribute),
        version=n.get("version", ""),
        process_id=(n.get("process") or {}).get("id") or (n.get("jvm") or {}).get("pid"),
        start_time_ms=(n.get("jvm") or {}).get("start_time_in_millis"),
        processors=(n.get("os") or {}).get("allocated_processors"),
        recovery_settings=tuple(sorted((k, str(v)) for k, v in own if k.startswith(RECOVERY_SETTINGS))),
    )


def nodes_in(raw: Any, awareness_attribute: str, what: str) -> list[EsNode]:
    """The nodes of a node info answer (checked: shards/answers.py), by name."""
    found = parsed(Nodes, raw, what).model_dump()["nodes"]
    return sorted((node_from(node_id, n, awareness_attribute) for node_id, n in found.items()), key=lambda n: n.name)
