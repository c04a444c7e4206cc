"""A test host's power: booting it (its supervisor, machine.py, in a mount namespace of its own),
waiting for its boot, and halting it (cleanly, then by force), by PID.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from orchestrator.errors import SandboxError
from orchestrator.sandbox.host_cgroups import host_pids, remove_cgroups
from orchestrator.sandbox.host_network import create_back_network, create_network
from orchestrator.sandbox.host_setup import prepare_host_files, seed_knobs
from orchestrator.sandbox.hosts import BASTION, Say, TestHost
from orchestrator.sandbox.layout import HostPaths, SandboxPaths
from orchestrator.sandbox.state import SandboxState, save


def start_host(paths: HostPaths, host: TestHost, timeout_s: float = 90) -> tuple[int, int]:
    """Boot the host (its supervisor, machine.py); return the supervisor's PID twice (the state's
    unshare_pid and init_pid) once the host has booted."""
    proc = launch(paths)
    wait_booted(paths, host.name, proc.poll, timeout_s)
    return proc.pid, proc.pid


def launch(paths: HostPaths) -> subprocess.Popen[bytes]:
    """Start the host's supervisor (machine.py) in a mount namespace of its own; it boots the host."""
    paths.ready_flag.unlink(missing_ok=True)
    cmd = ["unshare", "--mount", "--", sys.executable, "-m", "orchestrator.sandbox.machine", str(paths.root)]
    with open(paths.init_log, "a") as log:
        return subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
                                env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])})


def wait_booted(paths: HostPaths, name: str, exited: Callable[[], int | None], timeout_s: float,
                not_boot: str | None = None) -> str:
    """The boot id of the host once it has booted (a boot other than ``not_boot``)."""
    deadline = time.monotonic() + timeout_s
    while True:
        with contextlib.suppress(OSError):
            boot_id = paths.ready_flag.read_text().strip()
            if boot_id and boot_id != not_boot:
                return boot_id
        if exited() is not None or time.monotonic() > deadline:
            tail = paths.init_log.read_text(errors="replace")[-2500:] if paths.init_log.exists() else ""
            raise SandboxError(f"test host {name} did not boot within {timeout_s:.0f} s:\n{tail}")
        time.sleep(0.05)


def prepare_bastion(paths: SandboxPaths, scheduler: str | None) -> tuple[TestHost, str]:
    """The bastion host, on both networks, sshd on this machine's side; returns it and its known_hosts
    line. Booted with the others (`start_host`)."""
    host = TestHost(BASTION, 0, "none")
    hp = paths.host(BASTION)
    knobs = seed_knobs(hp, scheduler)
    line = prepare_host_files(hp, host, knobs, paths.authorized_keys, None, host_ca=paths.host_ca)
    create_network(host)
    create_back_network(host)
    return host, line


def boot_all(paths: SandboxPaths, st: SandboxState, test_hosts: list[TestHost], host_keys: list[str],
             services: str, say: Say) -> None:
    """Write known_hosts, then boot every host (side by side), recording its PID as soon as it runs."""
    paths.known_hosts.write_text("\n".join(host_keys) + "\n")
    say(f"booting {len(test_hosts)} test hosts (systemd, sshd, numad, {services})")
    procs = []
    for host, rec in zip(test_hosts, st.hosts, strict=False):
        hp = paths.host(host.name)
        proc = launch(hp)
        rec.unshare_pid = rec.init_pid = proc.pid
        save(paths.state_file, st)
        procs.append((host, hp, proc))
    for host, hp, proc in procs:
        wait_booted(hp, host.name, proc.poll, 120)


def pid_alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def container_init(name: str) -> int | None:
    """The PID (from here) of the host's systemd: its PID 1."""
    for pid in host_pids(name):
        with contextlib.suppress(OSError):
            status = Path(f"/proc/{pid}/status").read_text()
            nspid = next((line.split()[1:] for line in status.splitlines() if line.startswith("NSpid:")), [])
            if len(nspid) > 1 and nspid[-1] == "1":
                return pid
    return None


def stop_hosts(hosts: list[tuple[str, int | None]], timeout_s: float = 60) -> None:
    """Power off every (name, supervisor PID) at once (a clean halt by each host's systemd), then a hard
    power-off of any still up after ``timeout_s``: hosts whose services are slow to stop (OpenSearch 2.x:
    50 s) stop side by side."""
    for _name, pid in hosts:
        if pid_alive(pid):
            os.kill(pid, signal.SIGTERM)  # type: ignore[arg-type]
    deadline = time.monotonic() + timeout_s
    while any(pid_alive(pid) for _, pid in hosts) and time.monotonic() < deadline:
        time.sleep(0.1)
    for name, pid in hosts:
        for leftover in ([pid] if pid_alive(pid) else []) + host_pids(name):
            with contextlib.suppress(ProcessLookupError):
                os.kill(leftover, signal.SIGKILL)  # type: ignore[arg-type]
        remove_cgroups(name)
