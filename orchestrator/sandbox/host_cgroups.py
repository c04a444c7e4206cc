"""A test host's cgroups, as seen from this machine: what its processes are, and their removal.
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

from orchestrator.errors import SandboxError
from orchestrator.sandbox.hosts import NETNS_PREFIX

CGROUP_ROOT = Path("/sys/fs/cgroup")
CPU_QUOTA_FILE = CGROUP_ROOT / "cpu" / "cpu.cfs_quota_us"  # cgroup v1's CPU controller, where hosts get a quota


def host_cgroups(name: str) -> list[Path]:
    """The host's cgroups (its supervisor's and everything nspawn made under it), deepest first."""
    found = []
    for hierarchy in ("systemd", "unified", "cpu"):  # cpu: a host given a CPU quota (machine.join_own_cgroups)
        top = CGROUP_ROOT / hierarchy / f"{NETNS_PREFIX}{name}"
        if top.is_dir():
            # os.walk, not rglob: the host's systemd removes a finished unit's cgroup while it is walked.
            below = [Path(where) / d for where, dirs, _ in os.walk(top) for d in dirs]
            found += [*sorted(below, key=lambda p: -len(p.parts)), top]
    return found


def host_pids(name: str) -> list[int]:
    """Every process of the host (as seen from here): what its cgroups hold."""
    pids: set[int] = set()
    for group in host_cgroups(name):
        with contextlib.suppress(OSError, ValueError):
            pids.update(int(p) for p in (group / "cgroup.procs").read_text().split())
    return sorted(pids)


def remove_cgroups(name: str, timeout_s: float = 10) -> None:
    deadline = time.monotonic() + timeout_s
    for group in host_cgroups(name):
        while True:
            try:
                group.rmdir()
                break
            except FileNotFoundError:
                break
            except OSError:  # still holds a process that is being killed
                if time.monotonic() > deadline:
                    break
                time.sleep(0.05)


def check_cpu_quota(host_cpus: float, quota_file: Path = CPU_QUOTA_FILE) -> None:
    """`--host-cpus` needs the CPU controller where the hosts' supervisors put themselves (machine.py); without
    it a host would run unlimited, and the figures measured on it would not be what was asked."""
    if host_cpus and not quota_file.exists():
        raise SandboxError(f"--host-cpus needs the cgroup v1 CPU controller ({quota_file} is not there); "
                           "run without --host-cpus on this machine")
