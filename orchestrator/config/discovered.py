"""What `orchestrate inventory discover` writes an inventory from, whatever the product: the nodes a
cluster says it has (`Facts`, each product's `discover` reads them) and how the operator's own tools reach
their hosts (`SshView`: an OpenSSH client config, or what `ansible-inventory --list` prints).

Pure: `inventory_document` turns them into an inventory document, checked by the inventory's own model
before it is written.
"""

from __future__ import annotations

import ipaddress
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from orchestrator.config.loader import problems_of
from orchestrator.errors import ConfigError

MAX_LISTED = 100_000  # nodes in an answer, hosts in a listing


def valid_port(port: int) -> int:
    if not 1 <= port <= 65535:
        raise ValueError(f"port {port} is not between 1 and 65535")
    return port


def first_problems(exc: ValidationError, limit: int = 5) -> list[str]:
    """A validation error's first problems, as the config's are said (never the offending value), each cut:
    a cluster or a listing can name a key of any size."""
    return [p[:400] for p in problems_of(exc, None)[:limit]]


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
    config_file: str | None = None  # the OpenSSH config the hosts' aliases are resolved with, at every run


def ansible_view(listing: Mapping[str, Any], nodes: tuple[DiscoveredNode, ...], source: str) -> SshView:
    """Hosts from `ansible-inventory -i INVENTORY --list` (JSON): an inventory host named like the node,
    or whose ansible_host is the node's address; ansible_host, ansible_user and ansible_port."""
    try:
        hostvars = _AnsibleListing.model_validate(listing).meta.hostvars
    except ValidationError as exc:
        raise ConfigError(source, ["not what `ansible-inventory --list` prints: " + "; ".join(first_problems(exc))]) \
            from None
    found = {}
    for n in nodes:
        match = next((h for h in hostvars if h == n.name), None) or \
            next((h for h, v in hostvars.items() if n.ip in (h, v.ansible_host)), None)
        if match is None:
            continue
        v = hostvars[match]
        found[n.name] = SshHost(host=v.ansible_host or match, user=v.ansible_user, port=v.ansible_port,
                                identity_file=v.ansible_ssh_private_key_file)
    return SshView(found, source)


class _AnsibleHost(BaseModel):
    """One host's variables in `ansible-inventory --list`, as far as discovery reads them (others ignored)."""

    model_config = ConfigDict(extra="ignore")
    ansible_host: str = Field("", max_length=255)
    ansible_user: str | None = Field(None, pattern=r"^[a-z_][a-z0-9_-]{0,31}$")  # as the inventory's ssh.user
    ansible_port: int | None = None  # Ansible writes it as a number or a string of one
    ansible_ssh_private_key_file: str | None = Field(None, min_length=1, max_length=4096)

    @field_validator("ansible_port")
    @classmethod
    def port(cls, v: int | None) -> int | None:
        return None if v is None else valid_port(v)


class _AnsibleMeta(BaseModel):
    model_config = ConfigDict(extra="ignore")
    hostvars: dict[str, _AnsibleHost] = Field(default_factory=dict, max_length=MAX_LISTED)

    @field_validator("hostvars", mode="before")
    @classmethod
    def no_variables_is_none(cls, v: Any) -> Any:
        return {h: {} if hv is None else hv for h, hv in v.items()} if isinstance(v, dict) else v


class _AnsibleListing(BaseModel):
    model_config = ConfigDict(extra="ignore")
    meta: _AnsibleMeta = Field(default_factory=_AnsibleMeta, alias="_meta")


def common(values: list[str | None]) -> str | None:
    """The value every node shares (None when they differ or none has one)."""
    given = {v for v in values if v is not None}
    return given.pop() if len(given) == 1 and None not in values else None


# Cloud instance metadata services (AWS, its IPv6 one, Alibaba): never an endpoint the credentials go to.
METADATA = {ipaddress.ip_address(a) for a in ("169.254.169.254", "fd00:ec2::254", "100.100.100.200")}
SHARED = ipaddress.ip_network("100.64.0.0/10")  # carrier-grade NAT, and some overlay networks' (Tailscale)
UNIQUE_LOCAL = ipaddress.ip_network("fc00::/7")


NAT64 = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("64:ff9b:1::/48"))  # RFC 6052, RFC 8215
IPV4_COMPATIBLE = ipaddress.ip_network("::/96")  # `::a.b.c.d`, deprecated, still routed by some stacks


def ip_of(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The address ``host`` is, an IPv4 address written as IPv6 as the IPv4 one it reaches: mapped
    (`::ffff:127.0.0.1`), NAT64 (`64:ff9b::7f00:1`), 6to4 (`2002:7f00:1::`), Teredo (its client) and
    IPv4-compatible (`::127.0.0.1`)."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return None  # a name: the operator's DNS says where it is
    if not isinstance(address, ipaddress.IPv6Address):
        return address
    low32 = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    embedded = (address.ipv4_mapped or address.sixtofour or (address.teredo[1] if address.teredo else None)
                or (low32 if any(address in n for n in NAT64) else None)
                or (low32 if address in IPV4_COMPATIBLE and int(address) > 1 else None))
    return embedded or address


def scope(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str | None:
    """The address's kind, where an endpoint of that kind is written only beside a given one of the same."""
    if address.is_loopback:
        return "loopback"
    if isinstance(address, ipaddress.IPv4Address) and address in SHARED:
        return "shared (carrier-grade NAT)"
    if isinstance(address, ipaddress.IPv6Address) and address in UNIQUE_LOCAL:
        return "unique local"
    return None


def unfit_endpoint(url: str, given: str) -> str | None:
    """Why an address a cluster publishes is not written as an endpoint even when asked for all of them:
    the credentials go to every endpoint, and a cluster can publish any address."""
    address = ip_of(urllib.parse.urlsplit(url).hostname or "")
    if address is None:
        return None
    if address.is_link_local or address.is_unspecified or address.is_multicast:
        return "link-local, unspecified or multicast"
    if address in METADATA:
        return "a cloud's instance metadata address"
    kind = scope(address)
    given_address = ip_of(urllib.parse.urlsplit(given).hostname or "")
    given_kind = scope(given_address) if given_address is not None else \
        "loopback" if (urllib.parse.urlsplit(given).hostname or "") == "localhost" else None
    if kind is not None and kind != given_kind:
        return f"{kind}, while the given endpoint is not"
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
    if ssh.config_file:
        doc_ssh["config_file"] = ssh.config_file
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
