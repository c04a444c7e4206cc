"""Test hosts: real Debian 12 systems with systemd as PID 1 (systemd-nspawn), each in its own network
namespace, with its own sshd, units, journal and kernel knobs.

Here: what a host is (its name, addresses and namespace), and the tools they share. This machine's side of
them is one module per concern: ``host_network`` (bridges, namespaces, veth pairs), ``host_setup`` (the
files a host boots with: knobs, units, users, keys), ``host_power`` (boot and halt, by PID) and
``host_cgroups``; each host's supervisor is ``machine``, its root file system ``rootfs``. Everything is
named with the ``orch-`` prefix so that a leftover from a crashed run can be found and removed."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from orchestrator.errors import SandboxError

Say = Callable[[str], None]


BACK_SUBNET = "10.232.0"


BASTION = "bastion"


NETNS_PREFIX = "orch-"


VETH_PREFIX = "orv"


SUBNET = "10.231.0"


@dataclass(frozen=True)
class TestHost:
    name: str
    index: int
    zone: str

    @property
    def address(self) -> str:
        return f"{SUBNET}.{10 + self.index}"

    @property
    def netns(self) -> str:
        return f"{NETNS_PREFIX}{self.name}"

    @property
    def veth(self) -> str:
        return f"{VETH_PREFIX}{self.index}"

    @property
    def back_address(self) -> str:
        return f"{BACK_SUBNET}.{10 + self.index}"

    @property
    def back_veth(self) -> str:
        return f"{VETH_PREFIX}b{self.index}"


def run(*cmd: str, check: bool = True, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, capture_output=True, text=True, input=stdin)
    if check and proc.returncode != 0:
        raise SandboxError(f"`{' '.join(cmd)}` failed: {proc.stderr.strip() or proc.stdout.strip()}")
    return proc


def check_prerequisites() -> None:
    if os.geteuid() != 0:
        raise SandboxError("--hosts netns needs root (it creates network namespaces and mounts). "
                           "Run as root, or use --hosts local to run the nodes on 127.0.0.1.")
    missing = [tool for tool in ("ip", "unshare", "mount", "ssh-keygen", "systemd-nspawn", "openssl")
               if shutil.which(tool) is None and not Path(f"/usr/sbin/{tool}").exists()]
    if missing:
        raise SandboxError(f"missing tools for --hosts netns: {', '.join(missing)} "
                           "(apt-get install openssh-client iproute2 util-linux systemd-container openssl)")


def data_disk_scheduler(path: Path) -> str | None:
    """The real sysfs scheduler file of the block device holding ``path`` (partition -> disk)."""
    dev = path.stat().st_dev
    sysdev = Path(f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}")
    if not sysdev.exists():
        return None
    device = sysdev.resolve()
    if (device / "partition").exists():
        device = device.parent
    scheduler = device / "queue" / "scheduler"
    return str(scheduler) if scheduler.exists() else None
