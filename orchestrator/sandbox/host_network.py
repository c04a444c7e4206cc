"""The test hosts' network: the bridges on this machine, each host's network namespace and its veth
pair (a second network behind the bastion with `--bastion`), and their removal.
"""

from __future__ import annotations

import contextlib
import os
import signal

from orchestrator.errors import SandboxError
from orchestrator.sandbox.hosts import NETNS_PREFIX, SUBNET, TestHost, run

BRIDGE = "orch-br0"


# `sandbox up --bastion`: the node hosts' sshd listens only on a second network that this machine has
# no address on; the bastion host is on both, so SSH reaches the nodes only through it (ProxyJump).
BACK_BRIDGE = "orch-br1"


GATEWAY = f"{SUBNET}.1"


def address_owner(address: str) -> str | None:
    """The interface that already has ``address``, if any."""
    out = run("ip", "-o", "-4", "addr", "show", check=False).stdout
    for line in out.splitlines():
        fields = line.split()
        if len(fields) > 3 and fields[3].split("/")[0] == address:
            return fields[1]
    return None


def create_bridge() -> None:
    owner = address_owner(GATEWAY)
    if owner not in (None, BRIDGE):
        raise SandboxError(f"address {GATEWAY} is already used by interface {owner}; "
                           "the sandbox needs the 10.231.0.0/24 test network")
    if run("ip", "link", "show", BRIDGE, check=False).returncode != 0:
        run("ip", "link", "add", BRIDGE, "type", "bridge")
    if owner is None:
        run("ip", "addr", "add", f"{GATEWAY}/24", "dev", BRIDGE)
    run("ip", "link", "set", BRIDGE, "up")


def create_back_bridge() -> None:
    """The network behind the bastion: a bridge with no address here, so this machine cannot reach it."""
    if run("ip", "link", "show", BACK_BRIDGE, check=False).returncode != 0:
        run("ip", "link", "add", BACK_BRIDGE, "type", "bridge")
    run("ip", "link", "set", BACK_BRIDGE, "up")


def create_back_network(host: TestHost) -> None:
    run("ip", "link", "add", host.back_veth, "type", "veth", "peer", "name", "eth1", "netns", host.netns)
    run("ip", "link", "set", host.back_veth, "master", BACK_BRIDGE, "up")
    run("ip", "-n", host.netns, "addr", "add", f"{host.back_address}/24", "dev", "eth1")
    run("ip", "-n", host.netns, "link", "set", "eth1", "up")


def create_network(host: TestHost) -> None:
    owner = address_owner(host.address)
    if owner is not None:
        raise SandboxError(f"address {host.address} for host {host.name} is already used by {owner}")
    run("ip", "netns", "add", host.netns)
    run("ip", "link", "add", host.veth, "type", "veth", "peer", "name", "eth0", "netns", host.netns)
    run("ip", "link", "set", host.veth, "master", BRIDGE, "up")
    run("ip", "-n", host.netns, "addr", "add", f"{host.address}/24", "dev", "eth0")
    run("ip", "-n", host.netns, "link", "set", "eth0", "up")
    run("ip", "-n", host.netns, "link", "set", "lo", "up")


def delete_network(host_netns: str, veth: str | None) -> None:
    if veth:
        run("ip", "link", "del", veth, check=False)
    # Processes still inside a leftover namespace were started by the sandbox: end them by PID.
    pids = run("ip", "netns", "pids", host_netns, check=False).stdout.split()
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(pid), signal.SIGKILL)
    run("ip", "netns", "del", host_netns, check=False)


def leftover_namespaces() -> list[str]:
    out = run("ip", "netns", "list", check=False).stdout
    return [line.split()[0] for line in out.splitlines() if line.startswith(NETNS_PREFIX)]


def delete_bridge() -> None:
    run("ip", "link", "del", BRIDGE, check=False)
    run("ip", "link", "del", BACK_BRIDGE, check=False)
