"""What `sandbox up` builds: its shape, checked before anything is touched, and carried whole to each mode."""

from __future__ import annotations

from dataclasses import dataclass

from orchestrator.errors import SandboxError
from orchestrator.sandbox.state import SandboxMode, SandboxProduct

MODES: tuple[SandboxMode, ...] = ("netns", "local")
MOST_HOST_CPUS = 64  # a host's CPU quota: more than any machine this runs on has
PRODUCTS: tuple[SandboxProduct, ...] = ("elasticsearch", "opensearch", "riak")


def mode_named(name: str) -> SandboxMode:
    """A mode given by name (the command line's), as the shape types it."""
    for mode in MODES:
        if mode == name:
            return mode
    raise SandboxError(f"--hosts {name[:40]!r}: give one of {', '.join(MODES)}")


def product_named(name: str) -> SandboxProduct:
    """A product given by name (the command line's), as the shape types it."""
    for product in PRODUCTS:
        if product == name:
            return product
    raise SandboxError(f"--product {name[:40]!r}: give one of {', '.join(PRODUCTS)}")


@dataclass(frozen=True)
class SandboxShape:
    """What `sandbox up` builds. ``mode``: netns (test hosts) or local (nodes on 127.0.0.1); ``masters``: how
    many nodes (the first ones) are master-eligible, 0: all of them; ``also_versions``: versions assembled
    beside ``es_version`` that `orchestrate upgrade --to` can switch to; ``secured``: Elasticsearch's
    security on (TLS, users, an API key, security.py); ``packages``: each host installs the product from the
    sandbox's apt repository (debs.py), and upgrades with apt; ``bastion``: SSH reaches the node hosts only
    through a bastion host; ``host_cpus``: each test host's processes limited to this many CPUs (a cgroup's CPU
    quota, as a host of its own would be: a booting node then cannot take the CPU its peers serve searches
    with), 0: no limit."""

    nodes: int = 3
    zones: int = 1
    es_version: str = "9.5.3"
    mode: SandboxMode = "netns"
    heap_mb: int = 512
    product: SandboxProduct = "elasticsearch"
    masters: int = 0
    also_versions: tuple[str, ...] = ()
    bastion: bool = False
    secured: bool = False
    packages: bool = False
    host_cpus: float = 0.0

    def problems(self) -> list[str]:
        """Why this shape cannot be built (each option's own limits, and which go together), before anything
        is touched."""
        netns, riak_product = self.mode == "netns", self.product == "riak"
        checks = [
            (1 <= self.nodes <= 12, "--nodes must be between 1 and 12 on one machine"),
            (1 <= self.zones <= self.nodes, "--zones must be between 1 and the number of nodes"),
            (0 <= self.masters <= self.nodes, "--masters must be between 1 and the number of nodes (0: every node)"),
            (not (self.masters and riak_product), "--masters is for an Elasticsearch or OpenSearch sandbox"),
            (netns or not riak_product,
             "the Riak sandbox needs --hosts netns (each node is a host with its own address)"),
            (not self.bastion or (netns and self.product == "elasticsearch"),
             "--bastion is for an Elasticsearch sandbox with --hosts netns"),
            (not self.packages or (netns and not riak_product),
             "--packages is for an Elasticsearch or OpenSearch sandbox with --hosts netns"),
            (not (self.also_versions and riak_product), "--also-version is for an Elasticsearch or OpenSearch sandbox"),
            (not self.secured or self.product == "elasticsearch",
             "a secured sandbox is for Elasticsearch (OpenSearch's security plugin is not on Maven Central; the "
             "Riak stand-in has none): add --insecure"),
            (self.host_cpus == 0 or 0.01 <= self.host_cpus <= MOST_HOST_CPUS,
             f"--host-cpus must be 0 (no limit) or between 0.01 and {MOST_HOST_CPUS}"),
            (not self.host_cpus or (netns and not riak_product),
             "--host-cpus is for an Elasticsearch or OpenSearch sandbox with --hosts netns (test hosts of their own)"),
        ]
        return [why for holds, why in checks if not holds]

    @property
    def eligible(self) -> int:
        """How many nodes (the first ones) are master-eligible."""
        return self.masters or self.nodes
