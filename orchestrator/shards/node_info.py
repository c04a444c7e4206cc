"""A node as node info describes it, read into the snapshot's `EsNode`: the fields each read asks for
(`filter_path`), and how an answer's node becomes one."""

from __future__ import annotations

from typing import Any

from orchestrator.shards.answers import NODES_HOLDING, Node, Nodes, parsed, parsed_as
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


def node_from(node_id: str, n: Node, awareness_attribute: str) -> EsNode:
    return EsNode(
        id=node_id, name=n.name, host=n.host, ip=n.ip, roles=tuple(ROLE_ALIASES.get(r, r) for r in n.roles),
        zone=n.attributes.get(awareness_attribute), version=n.version, process_id=n.process.id or n.jvm.pid,
        start_time_ms=n.jvm.start_time_in_millis, processors=n.os.allocated_processors,
        recovery_settings=tuple(sorted((k, str(v)) for k, v in n.settings.items() if k.startswith(RECOVERY_SETTINGS))),
    )


def nodes_in(raw: Any, awareness_attribute: str, what: str) -> list[EsNode]:
    """The nodes of a node info answer (checked: shards/answers.py), by name: read from the checked models, not
    from a dump of them (a node-info read is made at each look of a node's rejoin: `bench_window`)."""
    found = parsed(Nodes, raw, what).nodes
    return sorted((node_from(node_id, n, awareness_attribute) for node_id, n in found.items()), key=lambda n: n.name)


def node_ids_in(raw: Any, what: str) -> set[str]:
    """The node ids of a node-info answer, and nothing of the nodes: what `absent` reads at each look while a
    node is away (a window's are, at each admission), from every node of the cluster. Checked as the batch's
    reads check theirs (`NODES_HOLDING`), not a model per node."""
    return set(parsed_as(NODES_HOLDING, raw, what).get("nodes", {}))
