"""What Elasticsearch and OpenSearch say of themselves for `orchestrate inventory discover`: their
answers to `GET _nodes/settings,http` and the awareness setting, read as the `Facts` every product's
discovery gives (config/discovered.py builds the inventory from them). The adapter reads the answers
(`ShardClusterAdapter.discovery_facts`)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from orchestrator.config.discovered import DiscoveredNode, Facts, first_problems, valid_port
from orchestrator.errors import ClusterError

AWARENESS = "cluster.routing.allocation.awareness.attributes"
MAX_LISTED = 100_000  # nodes in an answer, hosts in a listing
# host:port as a node publishes it: a name or IPv4 address, or [IPv6]; ES prefixes `name/` when it has one.
PUBLISHED = re.compile(r"(?:(?P<name>[A-Za-z0-9.-]{1,253})/)?(?P<host>[A-Za-z0-9.-]{1,253}|\[[0-9A-Fa-f:.]{2,45}\])"
                       r":(?P<port>[0-9]{1,5})")


class _Answer(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)


class _PathSettings(_Answer):
    data: str | list[str] = []


class _NodeSettings(_Answer):
    path: _PathSettings = _PathSettings()


class _Http(_Answer):
    publish_address: str = ""

    @field_validator("publish_address")
    @classmethod
    def host_and_port(cls, v: str) -> str:
        if not v:
            return v
        m = PUBLISHED.fullmatch(v)
        if m is None:
            raise ValueError("not host:port")
        valid_port(int(m["port"]))
        return f"{m['name'] or m['host']}:{m['port']}"  # the name, where it has one (its TLS certificate's)


class _NodeAnswer(_Answer):
    """One node of `GET _nodes/settings,http`, as far as discovery reads it."""

    name: str = Field(min_length=1, max_length=255)
    ip: str = Field("", max_length=255)
    host: str = Field("", max_length=255)
    roles: list[str] = []
    attributes: dict[str, str] = {}
    settings: _NodeSettings = _NodeSettings()
    http: _Http = _Http()


class _NodesAnswer(_Answer):
    nodes: dict[str, _NodeAnswer] = Field(default_factory=dict, max_length=MAX_LISTED)



def awareness_in_force(settings: Mapping[str, Any]) -> tuple[str, ...]:
    """The attributes allocation awareness uses, in the cluster's order, from the flat settings in force
    (defaults included: the setting is often in the node's configuration file)."""
    raw = settings.get(AWARENESS) or ""
    listed = raw if isinstance(raw, list) else str(raw).split(",")
    return tuple(a.strip() for a in listed if a.strip())


def facts_from_answers(cluster_name: str, nodes_info: Mapping[str, Any], settings: Mapping[str, Any]) -> Facts:
    """From `GET _nodes/settings,http` and the flat cluster settings in force (defaults included)."""
    try:
        answer = _NodesAnswer.model_validate(nodes_info)
    except ValidationError as exc:
        raise ClusterError("the cluster's answer to GET _nodes/settings,http is not what Elasticsearch or "
                           f"OpenSearch send: {'; '.join(first_problems(exc))}") from None
    nodes = []
    for n in answer.nodes.values():
        path = n.settings.path.data
        nodes.append(DiscoveredNode(name=n.name, ip=n.ip or n.host, http=n.http.publish_address,
                                    roles=tuple(n.roles), attributes=dict(n.attributes),
                                    data_paths=(path,) if isinstance(path, str) else tuple(path)))
    return Facts(cluster_name=cluster_name, nodes=tuple(sorted(nodes, key=lambda n: n.name)),
               awareness=awareness_in_force(settings))
