"""The supervisor of one test host: boots it with systemd-nspawn, again after each reboot, and halts it.

Run by ``host_power.start_host`` as ``unshare --mount -- python -m orchestrator.sandbox.machine HOST_DIR``,
in a mount namespace of its own, so that the host's root (an overlay of the cached Debian root file
system and the host's own directory) is mounted only here and vanishes with it. The host's systemd is
PID 1 of its container: `systemctl reboot` inside ends systemd-nspawn with exit 133, and booting it
again is a reboot (a new boot id, the journal kept, every SSH session cut); the knob files are back to
their boot defaults first, as a real kernel's would be. SIGTERM here halts the host cleanly.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from orchestrator.sandbox.layout import HostPaths

REBOOT_EXIT = 133  # systemd-nspawn's exit code when the container asked for a reboot


CPU_PERIOD_US = 100_000  # the CPU quota's period (the kernel's default)


def join_own_cgroups(name: str, cpus: float) -> None:
    """nspawn (with --keep-unit) makes its payload/ and supervisor/ cgroups under its caller's: each host
    starts from a cgroup of its own, or two hosts' would collide. With ``cpus``, the host also gets a CPU
    cgroup of its own with that quota: everything it starts (its systemd, the node's JVM after each restart)
    is born in it, and the host's systemd cannot move it out (nspawn gives it no CPU hierarchy to write)."""
    for hierarchy in ("systemd", "unified", *(("cpu",) if cpus else ())):
        base = Path("/sys/fs/cgroup") / hierarchy
        if base.is_dir():
            own = base / f"orch-{name}"
            own.mkdir(exist_ok=True)
            if hierarchy == "cpu":
                (own / "cpu.cfs_period_us").write_text(f"{CPU_PERIOD_US}\n")
                (own / "cpu.cfs_quota_us").write_text(f"{max(1000, round(cpus * CPU_PERIOD_US))}\n")
            (own / "cgroup.procs").write_text(f"{os.getpid()}\n")


def mount_root(paths: HostPaths, lower: str) -> None:
    subprocess.run(["mount", "--make-rprivate", "/"], check=True)
    for d in (paths.rootfs_upper, paths.rootfs_work, paths.rootfs_mount):
        d.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "overlay", "overlay", "-o",
                    f"lowerdir={lower},upperdir={paths.rootfs_upper},workdir={paths.rootfs_work}",
                    str(paths.rootfs_mount)], check=True)


def nspawn_command(spec: dict[str, Any], paths: HostPaths) -> list[str]:
    binds = [f"--bind={b}" for b in spec["binds"]] + [f"--bind-ro={b}" for b in spec["binds_ro"]]
    return ["systemd-nspawn", "--quiet", "--boot", f"--directory={paths.rootfs_mount}", f"--machine={spec['name']}",
            "--register=no", "--keep-unit", f"--network-namespace-path=/run/netns/{spec['netns']}",
            "--console=read-only", *binds]


def main(host_dir: str) -> None:
    from orchestrator.sandbox.host_setup import reset_knobs

    paths = HostPaths(Path(host_dir))
    spec = json.loads(paths.spec.read_text())
    log_fd = os.open(paths.init_log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    join_own_cgroups(spec["name"], float(spec.get("cpus") or 0))
    mount_root(paths, spec["rootfs"])
    child: dict[str, subprocess.Popen[bytes]] = {}
    halting = {"asked": False}

    def halt(signum: int, frame: object) -> None:
        halting["asked"] = True
        if "nspawn" in child and child["nspawn"].poll() is None:
            child["nspawn"].send_signal(signal.SIGTERM)  # nspawn asks the host's systemd to power off

    signal.signal(signal.SIGTERM, halt)
    signal.signal(signal.SIGINT, halt)
    boots = 0
    while not halting["asked"]:
        if boots:
            reset_knobs(paths)
            print(f"host {spec['name']} rebooting", flush=True)
        paths.ready_flag.unlink(missing_ok=True)
        boots += 1
        child["nspawn"] = subprocess.Popen(nspawn_command(spec, paths), stdin=subprocess.DEVNULL)
        rc = child["nspawn"].wait()
        print(f"host {spec['name']}: systemd-nspawn exited {rc} at {time.time():.1f}", flush=True)
        if rc != REBOOT_EXIT:
            break
    paths.ready_flag.unlink(missing_ok=True)


if __name__ == "__main__":
    main(sys.argv[1])
