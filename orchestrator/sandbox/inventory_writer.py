"""What `sandbox up` leaves for other commands: an inventory, an SSH key, known_hosts, an ssh config."""

from __future__ import annotations

import shlex
import subprocess
from typing import Any

import yaml

from orchestrator.paths import write_atomically
from orchestrator.sandbox import host_setup, hosts
from orchestrator.sandbox.layout import SandboxPaths
from orchestrator.sandbox.state import HostRecord, SandboxState


def write_ssh_files(paths: SandboxPaths, records: list[HostRecord], mode: str,
                    bastion: HostRecord | None = None) -> None:
    paths.ssh_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    if not paths.ssh_key.exists():
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "orchestrator-sandbox",
                        "-f", str(paths.ssh_key)], check=True)
    paths.authorized_keys.write_text(paths.ssh_key.with_suffix(".pub").read_text())
    if not paths.host_ca.exists():
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "orchestrator-sandbox-host-ca",
                        "-f", str(paths.host_ca)], check=True)
    ca = paths.host_ca.with_suffix(".pub").read_text().split()
    patterns = f"{hosts.SUBNET}.*,{hosts.BACK_SUBNET}.*"
    paths.known_hosts_ca.write_text(f"@cert-authority {patterns} {ca[0]} {ca[1]}\n")
    if mode != "netns" or not records:
        return
    # Behind a bastion, a node's sshd listens only on the network the bastion shares with it.
    jump = f"  ProxyJump {bastion.name}\n" if bastion else ""
    blocks = [
        f"Host {r.name}\n  HostName {r.ssh_address or r.address}\n  User root\n  IdentityFile {paths.ssh_key}\n"
        f"  IdentitiesOnly yes\n  UserKnownHostsFile {paths.known_hosts}\n  StrictHostKeyChecking yes\n"
        f"  ConnectTimeout 5\n{jump if r is not bastion else ''}"
        for r in [*([bastion] if bastion else []), *records]
    ]
    paths.ssh_config.write_text("\n".join(blocks))


def local_service_commands(paths: SandboxPaths, unit: str) -> dict[str, str]:
    """Local mode: the local service runner (host_files/local-service), pointed at each node's files."""
    host_dir = shlex.quote(str(paths.root / "hosts")) + "/{node}"
    runner = shlex.quote(str(host_setup.HOST_FILES / "local-service"))
    prefix = f"SANDBOX_UNIT_DIR={host_dir}/units SANDBOX_RUN_DIR={host_dir}/run {runner}"
    return {"manager": "commands", "stop": f"{prefix} stop {unit}",
            "start": f"{prefix} start {unit}", "status": f"{prefix} is-active {unit}"}


def riak_inventory_document(paths: SandboxPaths, st: SandboxState) -> dict[str, Any]:
    from orchestrator.sandbox.riak import data_dir

    return {
        "cluster": {"name": st.cluster_name, "product": "riak"},
        "ssh": {"transport": "ssh", "user": "root", "key_file": str(paths.ssh_key),
                "known_hosts": str(paths.known_hosts)},
        # Riak's own commands, as an operator without a riak systemd unit would configure them.
        "service": {"manager": "commands", "stop": "riak stop", "start": "riak start", "status": "riak ping"},
        "nodes": [{"name": h.name, "host": h.address,
                   "data_paths": [str(data_dir(paths.host(h.name)))]} for h in st.hosts],
        "timeouts": {"stop_s": 60, "start_s": 60, "join_s": 60, "recovery_s": 180, "poll_interval_s": 0.5},
        "riak": {"transfer_limit": 8, "handoff_stall_s": 10},
        "tuning": {"profile": "riak"},
        "playbook": "riak-rolling",
    }


def inventory_document(paths: SandboxPaths, st: SandboxState) -> dict[str, Any]:
    if st.product == "riak":
        return riak_inventory_document(paths, st)
    netns = st.mode == "netns"
    unit = st.product  # elasticsearch or opensearch: the unit, the playbook and the tuning profile
    doc: dict[str, Any] = {
        "cluster": {"name": st.cluster_name, "product": st.product,
                    "endpoints": [h.http_url for h in st.hosts]},
        "ssh": ({"transport": "ssh", "user": "root", "key_file": str(paths.ssh_key),
                 "known_hosts": str(paths.known_hosts)}
                if netns else {"transport": "local"}),
        "service": {"manager": "systemd", "unit": unit} if netns else local_service_commands(paths, unit),
        # Behind a bastion, hosts are the SSH config's aliases: it says how to reach them (ProxyJump).
        "nodes": [{"name": h.name, "host": h.name if st.bastion else h.address, "zone": h.zone,
                   "data_paths": [str(paths.host(h.name).node_dir / "data")]} for h in st.hosts],
        # Sandbox nodes are small: tight timeouts make a stuck run fail fast.
        "timeouts": {"stop_s": 60, "start_s": 60, "join_s": 120, "recovery_s": 300, "poll_interval_s": 0.5},
        "tuning": {"profile": unit if netns else "none"},
        "playbook": f"{unit}-rolling",
    }
    if st.secured:
        from orchestrator.sandbox.security import inventory_cluster_fields

        doc["cluster"].update(inventory_cluster_fields(paths))
    if st.bastion is not None:
        doc["ssh"]["config_file"] = str(paths.ssh_config)
    if st.packages:
        # `orchestrate upgrade --to V` runs apt-get install PRODUCT=V on each host (its local repository).
        doc["upgrade"] = {"install": {"method": "package", "package": unit}}
    elif len(st.versions) > 1:
        # `orchestrate upgrade --to V` switches each host's start-script link to V's script.
        host_dir = str(paths.root / "hosts") + "/{node}"
        doc["upgrade"] = {"install": {"method": "switch", "target": host_dir + f"/{unit}-{{version}}.sh",
                                      "link": host_dir + f"/{unit}.sh"}}
    if "upgrade" in doc and unit != "elasticsearch":
        doc["upgrade"]["plugin_cli"] = f"/usr/share/{unit}/bin/{unit}-plugin"
    if st.zones <= 1:
        for node in doc["nodes"]:
            del node["zone"]
    return doc


INVENTORY_HEADER = "# Written by `orchestrate sandbox up`; used by `--cluster sandbox`.\n"


def write_inventory(paths: SandboxPaths, st: SandboxState) -> None:
    text = INVENTORY_HEADER + yaml.safe_dump(inventory_document(paths, st), sort_keys=False)
    write_atomically(paths.inventory, text, mode=0o644)
    write_atomically(paths.published_inventory, text, mode=0o644)


def remove_published_inventory(paths: SandboxPaths) -> None:
    """Remove `--cluster sandbox`'s inventory, if the sandbox wrote it (never a file of the user's)."""
    path = paths.published_inventory
    try:
        if path.read_text().startswith(INVENTORY_HEADER):
            path.unlink()
    except OSError:
        pass
