"""`orchestrate inventory discover`: an inventory written from what the cluster says about itself.

Pure: `inventory_document` turns the cluster's answers (`_nodes` with settings and http, the
awareness setting) and the operator's SSH view (an OpenSSH client config, or what
`ansible-inventory --list` prints) into an inventory document, checked by the inventory's own model
before it is written. The adapter reads the answers (`ShardClusterAdapter.discovery_facts`).
"""

from __future__ import annotations

import ipaddress
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

AWARENESS = "cluster.routing.allocation.awareness.attributes"



def awareness_in_force(settings: Mapping[str, Any]) -> tuple[str, ...]:
    """The attributes allocation awareness uses, in the cluster's order, from the flat settings in force
    (defaults included: the setting is often in the node's configuration file)."""
    raw = settings.get(AWARENESS) or ""
    listed = raw if isinstance(raw, list) else str(raw).split(",")
    return tuple(a.strip() for a in listed if a.strip())

@dataclass(frozen=True)
class DiscoveredNode:
    name: str
    ip: str
    http: str  # host:port it publishes for HTTP ("" when HTTP is off on it)
    roles: tuple[str, ...]
    attributes: dict[str, str]
    data_paths: tuple[str, ...]


@dataclass(frozen=True)
class Facts:
    cluster_name: str
    nodes: tuple[DiscoveredNode, ...]
    awareness: tuple[str, ...] = ()  # the attributes allocation awareness uses, in the cluster's order

    @classmethod
    def from_answers(cls, cluster_name: str, nodes_info: Mapping[str, Any], settings: Mapping[str, Any]) -> Facts:
        """From `GET _nodes/settings,http` and the flat cluster settings in force (defaults included)."""
        nodes = []
        for n in (nodes_info.get("nodes") or {}).values():
            path = ((n.get("settings") or {}).get("path") or {}).get("data") or ()
            paths = (path,) if isinstance(path, str) else tuple(str(p) for p in path)
            nodes.append(DiscoveredNode(name=str(n["name"]), ip=str(n.get("ip") or n.get("host") or ""),
                                        http=str((n.get("http") or {}).get("publish_address") or ""),
                                        roles=tuple(n.get("roles") or ()),
                                        attributes={str(k): str(v) for k, v in (n.get("attributes") or {}).items()},
                                        data_paths=paths))
        return cls(cluster_name=cluster_name, nodes=tuple(sorted(nodes, key=lambda n: n.name)),
                   awareness=awareness_in_force(settings))


@dataclass(frozen=True)
class SshHost:
    """How one node's host is reached over SSH, as the operator's own tools know it."""

    host: str
    user: str | None = None
    port: int | None = None
    identity_file: str | None = None
    known_hosts: str | None = None


@dataclass(frozen=True)
class SshView:
    hosts: dict[str, SshHost] = field(default_factory=dict)  # node name -> how to reach it
    source: str = ""


def ssh_config_view(config_text: str, nodes: tuple[DiscoveredNode, ...], source: str) -> SshView:
    """Hosts from an OpenSSH client config: a `Host` block matching the node's name (or its address)
    gives HostName, User, Port, IdentityFile and UserKnownHostsFile."""
    import paramiko

    config = paramiko.SSHConfig.from_text(config_text)
    patterns = [p for p in config.get_hostnames() if p != "*"]
    found = {}
    for n in nodes:
        alias = next((a for a in (n.name, n.ip) if any(fnmatchcase(a, p) for p in patterns)), None)
        if alias is None:
            continue
        entry = config.lookup(alias)
        files: list[str] = list(entry.get("identityfile") or [])
        found[n.name] = SshHost(host=str(entry.get("hostname") or alias), user=entry.get("user"),
                                port=int(entry["port"]) if "port" in entry else None,
                                identity_file=files[0] if files else None,
                                known_hosts=str(entry["userknownhostsfile"]).split()[0]
                                if "userknownhostsfile" in entry else None)
    return SshView(found, source)


def ansible_view(listing: Mapping[str, Any], nodes: tuple[DiscoveredNode, ...], source: str) -> SshView:
    """Hosts from `ansible-inventory -i INVENTORY --list` (JSON): an inventory host named like the node,
    or whose ansible_host is the node's address; ansible_host, ansible_user and ansible_port."""
    hostvars: Mapping[str, Any] = (listing.get("_meta") or {}).get("hostvars") or {}
    found = {}
    for n in nodes:
        match = next((h for h, v in hostvars.items() if h == n.name), None) or \
            next((h for h, v in hostvars.items() if n.ip in (h, str((v or {}).get("ansible_host", "")))), None)
        if match is None:
            continue
        v = hostvars[match] or {}
        found[n.name] = SshHost(host=str(v.get("ansible_host") or match), user=v.get("ansible_user"),
                                port=int(v["ansible_port"]) if v.get("ansible_port") else None,
                                identity_file=v.get("ansible_ssh_private_key_file"))
    return SshView(found, source)


def common(values: list[str | None]) -> str | None:
    """The value every node shares (None when they differ or none has one)."""
    given = {v for v in values if v is not None}
    return given.pop() if len(given) == 1 and None not in values else None


def unfit_endpoint(url: str, given: str) -> str | None:
    """Why an address a cluster publishes is not written as an endpoint even when asked for all of them:
    the credentials go to every endpoint, and a cluster can publish any address."""
    host = urllib.parse.urlsplit(url).hostname or ""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return None  # a name: the operator's DNS says where it is
    given_host = urllib.parse.urlsplit(given).hostname or ""
    if address.is_link_local or address.is_unspecified or address.is_multicast:
        return "link-local, unspecified or multicast"
    if address.is_loopback and not given_host.startswith(("127.", "localhost", "::1")):
        return "loopback, while the given endpoint is not"
    return None


def chosen_endpoints(facts: Facts, endpoint: str, all_endpoints: bool) -> tuple[list[str], list[str]]:
    """(endpoints, notes): only the one the operator gave, unless they asked for every published one."""
    given = endpoint.rstrip("/")
    scheme = given.split("://", 1)[0]
    published = [f"{scheme}://{n.http}" for n in facts.nodes if n.http]
    others = [p for p in published if p != given]
    if not all_endpoints:
        said = [f"the cluster publishes {len(others)} other HTTP address(es) ({', '.join(others[:5])}"
                f"{', ...' if len(others) > 5 else ''}): not written as endpoints, since the credentials would go "
                "there; add those you know are this cluster's to cluster.endpoints, or run again with "
                "--all-endpoints"] if others else []
        return [given], said
    unfit = {p: why for p in published if (why := unfit_endpoint(p, given))}
    notes = [f"{p} left out of the endpoints ({why})" for p, why in unfit.items()]
    return [p for p in published if p not in unfit] or [given], notes


def inventory_document(facts: Facts, endpoint: str, cluster: Mapping[str, Any], ssh: SshView,
                       name: str | None = None, product: str = "elasticsearch",
                       all_endpoints: bool = False) -> tuple[dict[str, Any], list[str]]:
    """(the inventory document, notes for the operator). ``cluster``: the connection settings given to
    discovery (credentials as secret references, never values). ``product``: the server's, which also
    names its systemd unit and tuning profile. ``all_endpoints``: every HTTP address the nodes publish is
    an endpoint (elasticsearch-py spreads requests over them), not only the given one."""
    endpoints, said = chosen_endpoints(facts, endpoint, all_endpoints)
    notes: list[str] = []
    attribute = facts.awareness[0] if facts.awareness else None
    if len(facts.awareness) > 1:
        notes.append(f"awareness uses {', '.join(facts.awareness)}; zones are read from {attribute} (set "
                     "cluster.awareness_attribute to batch by another)")
    doc_cluster: dict[str, Any] = {"name": name or facts.cluster_name, "product": product,
                                   "endpoints": endpoints, **cluster}
    if attribute and attribute != "zone":
        doc_cluster["awareness_attribute"] = attribute
    nodes = []
    for n in facts.nodes:
        reach = ssh.hosts.get(n.name)
        entry: dict[str, Any] = {"name": n.name, "host": reach.host if reach else n.ip}
        if attribute and n.attributes.get(attribute):
            entry["zone"] = n.attributes[attribute]
        if n.data_paths:
            entry["data_paths"] = list(n.data_paths)
        nodes.append(entry)
    if attribute and any("zone" not in e for e in nodes):
        notes.append(f"some nodes have no {attribute} attribute: no zone is written (zone mode needs one per node)")
        for e in nodes:
            e.pop("zone", None)
    missing = [n.name for n in facts.nodes if n.name not in ssh.hosts]
    if ssh.source and missing:
        notes.append(f"{ssh.source} does not name {', '.join(missing[:10])}: their host is the address the "
                     "cluster publishes")
    reached = [ssh.hosts.get(n.name) for n in facts.nodes]
    doc_ssh: dict[str, Any] = {"transport": "ssh"}
    for key, attr in (("user", "user"), ("key_file", "identity_file"), ("known_hosts", "known_hosts")):
        shared = common([getattr(r, attr) if r else None for r in reached])
        if shared:
            doc_ssh[key] = shared
    for entry, r in zip(nodes, reached, strict=True):
        if r is not None and r.user and r.user != doc_ssh.get("user"):
            entry["ssh_user"] = r.user
        if r is not None and r.port and r.port != 22:
            entry["ssh_port"] = r.port
    if "known_hosts" not in doc_ssh:
        doc_ssh["known_hosts"] = str(Path("~/.ssh/known_hosts").expanduser())
    doc = {"cluster": doc_cluster, "ssh": doc_ssh, "service": {"manager": "systemd", "unit": product},
           "nodes": nodes, "tuning": {"profile": product}}
    return doc, notes + said
