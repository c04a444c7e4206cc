"""What every sandbox node is given, whichever its mode: its name, zone and settings, its files and
owner, and the start scripts of each assembled version (the link the unit runs is the upgrade's
`switch`).
"""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

from orchestrator.sandbox import (
    security,
    state,
)
from orchestrator.sandbox.assemble import EsHome
from orchestrator.sandbox.layout import HostPaths, SandboxPaths
from orchestrator.sandbox.node import (
    NodeSpec,
    jvm_command,
    node_environment,
    opensearch_jvm_command,
    security_settings,
    write_node_config,
)
from orchestrator.sandbox.opensearch_home import OpenSearchHome
from orchestrator.sandbox.rootfs import SERVICE_ACCOUNTS

NODE_UID = 65534


CLUSTER_NAME = "sandbox"


LABELS = {"elasticsearch": "Elasticsearch", "opensearch": "OpenSearch"}


Home = EsHome | OpenSearchHome


def service_of(product: str) -> str:
    """The systemd unit (and start script) of a node: `elasticsearch` or `opensearch`."""
    return "opensearch" if product == "opensearch" else "elasticsearch"


def node_names(count: int) -> list[str]:
    return [f"es-{i}" for i in range(1, count + 1)]


def zone_of(index: int, zones: int) -> str:
    """Round-robin: with 6 nodes in 3 zones, two per zone."""
    return f"zone-{(index - 1) % max(zones, 1) + 1}"


def node_spec(st: state.SandboxState, name: str, index: int, bind: str, http: int, transport: int,
               seeds: list[str], masters: list[str], heap_mb: int, eligible: int, repo: Path) -> NodeSpec:
    # Nodes after the first `eligible` are data-only: a cluster whose masters are not on every node.
    roles: dict[str, object] = {} if index <= eligible else {"node.roles": ["data", "ingest"]}
    roles["path.repo"] = [str(repo)]  # a shared file-system snapshot repository may live there
    if st.product == "elasticsearch":
        roles.update(security_settings(st.secured))
    zones = st.zones
    return NodeSpec(name=name, cluster_name=CLUSTER_NAME, bind_host=bind, http_port=http, transport_port=transport,
                    zone=zone_of(index, zones), seed_hosts=tuple(seeds), initial_masters=tuple(masters),
                    heap_mb=heap_mb, extra_settings=roles)


def prepare_node(paths: SandboxPaths, st: state.SandboxState, spec: NodeSpec, hp: HostPaths) -> None:
    # A packaged node sees its directories where the package puts them (bound there: packaged_binds).
    write_node_config(spec, hp.node_dir, st.zones, st.product, Path("/var") if st.packages else None)
    if st.secured:
        security.install_node_files(paths, hp.node_dir, spec.name, [spec.bind_host])
    chown_node(hp.node_dir, node_uid(st))


def http_url(st: state.SandboxState, address: str, port: int) -> str:
    return f"{'https' if st.secured else 'http'}://{address}:{port}"


def write_start_script(homes: list[Home], host_paths: HostPaths, heap_mb: int) -> Path:
    """One start script per assembled version (elasticsearch-VERSION.sh) and the link the unit runs,
    elasticsearch.sh, to the first: an upgrade switches the link (upgrade.install method `switch`).
    OpenSearch's are opensearch-VERSION.sh and opensearch.sh."""
    node_dir = host_paths.node_dir
    service = "opensearch" if isinstance(homes[0], OpenSearchHome) else "elasticsearch"
    for home in homes:
        env = node_environment(home, node_dir)
        command = opensearch_jvm_command(home, node_dir, heap_mb) if isinstance(home, OpenSearchHome) \
            else jvm_command(home, node_dir, heap_mb)
        lines = ["#!/bin/sh", f"# Starts this host's {service} {home.version} node (written by `orchestrate "
                              "sandbox up`).",
                 "exec env -i " + " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items()) + " "
                 + " ".join(shlex.quote(c) for c in command)]
        versioned = version_script(host_paths, home.version, service)
        versioned.write_text("\n".join(lines) + "\n")
        versioned.chmod(0o755)
    link = start_link(host_paths, service)
    link.unlink(missing_ok=True)
    link.symlink_to(version_script(host_paths, homes[0].version, service).name)
    return link


def start_link(host_paths: HostPaths, service: str = "elasticsearch") -> Path:
    return host_paths.node_dir.parent / f"{service}.sh"


def version_script(host_paths: HostPaths, version: str, service: str = "elasticsearch") -> Path:
    return host_paths.node_dir.parent / f"{service}-{version}.sh"


def snapshot_dir(paths: SandboxPaths, uid: int = NODE_UID) -> Path:
    """Where the nodes may keep file-system snapshot repositories (`path.repo`), shared by all hosts."""
    where = paths.root / "snapshots"
    where.mkdir(parents=True, exist_ok=True)
    chown_node(where, uid)
    return where


def node_uid(st: state.SandboxState) -> int:
    """Who a node runs as: on a test host its product's service account (rootfs.py), locally nobody."""
    return SERVICE_ACCOUNTS.get(service_of(st.product), NODE_UID) if st.mode == "netns" else NODE_UID


def chown_node(node_dir: Path, uid: int) -> None:
    if os.geteuid() == 0:
        subprocess.run(["chown", "-R", f"{uid}:{uid}", str(node_dir)], check=True)
