"""The test hosts' root file system: a real Debian 12 with systemd, sshd, sudo and numad, built once
per machine with debootstrap and cached (as the Elasticsearch homes are).

Every host boots it with systemd-nspawn over an overlay of its own (``machine.py``), so what one host
writes (units, sysctl.d, its journal) stays on that host and across its reboots. What is not Debian's:
the service accounts the sandbox's nodes run as, and one boot-time unit that lays the host's own
kernel knob files over ``/sys`` and ``/proc/sys`` (the real machine's are never written).
"""

from __future__ import annotations

import contextlib
import fcntl
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from orchestrator.errors import SandboxError

ROOTFS_VERSION = 2  # raise when what is built changes: a new directory is built beside the old one
SUITE = "bookworm"
PACKAGES = ("systemd", "systemd-sysv", "dbus", "openssh-server", "sudo", "procps", "iproute2",
            # The Riak stand-in's interpreter; numad is Debian's own, enabled at boot as on a NUMA host.
            "python3", "numad")
DEFAULT_MIRROR = "http://deb.debian.org/debian"
# The nodes' service accounts, as the official packages create them (a fixed id here, so that the
# sandbox can give them their directories from outside the hosts).
SERVICE_ACCOUNTS = {"elasticsearch": 991, "opensearch": 992}
KNOBS_LIST = "/etc/sandbox/knobs"  # "target source" lines, written per host
KNOBS_SCRIPT = "/usr/local/sbin/sandbox-knobs"
KNOBS_UNIT = "sandbox-knobs.service"

Say = Callable[[str], None]

KNOBS_SCRIPT_TEXT = r"""#!/bin/sh
# Sandbox test host, early at boot: this host's kernel knob files laid over the kernel's, so tuning
# changes this host only (the real machine's knobs are never written). Then what udev would do at boot
# for a rule that sets a disk's IO scheduler (udevd does not run in a container).
set -u
if [ -f LIST ]; then
    while read -r target source; do
        [ -n "$target" ] && [ -e "$target" ] && mount --bind "$source" "$target"
    done < LIST
fi
# /proc/sys/net belongs to the host's own network namespace: writable, as on a real host (the rest of
# /proc/sys stays read-only, so a key that is not overlaid fails instead of reaching the machine).
mount --bind /proc/sys/net /proc/sys/net && mount -o remount,bind,rw /proc/sys/net
for rules in /etc/udev/rules.d/*.rules; do
    [ -f "$rules" ] || continue
    sed -n 's/.*KERNEL=="\([^"]*\)".*ATTR{queue\/scheduler}="\([^"]*\)".*/\1 \2/p' "$rules" |
    while read -r device value; do
        target="$(readlink -f "/sys/block/$device")/queue/scheduler"
        [ -e "$target" ] && echo "$value" > "$target" 2>/dev/null
    done
done
exit 0
""".replace("LIST", KNOBS_LIST)

KNOBS_UNIT_TEXT = f"""[Unit]
Description=Sandbox: this host's kernel knobs (overlaid per host) and its disks' IO schedulers
DefaultDependencies=no
Before=systemd-sysctl.service sysinit.target shutdown.target
Conflicts=shutdown.target

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart={KNOBS_SCRIPT}

[Install]
WantedBy=sysinit.target
"""


def rootfs_dir(cache: Path) -> Path:
    return cache / f"hostroot-{SUITE}-v{ROOTFS_VERSION}"


def debian_mirror(sources: tuple[Path, ...] = (Path("/etc/apt/sources.list.d/debian.sources"),
                                               Path("/etc/apt/sources.list"))) -> str:
    """The Debian mirror this machine's apt uses (the only one it may reach)."""
    for source in sources:
        with contextlib.suppress(OSError):
            for line in source.read_text().splitlines():
                words = line.split()
                if line.startswith("URIs:") and len(words) > 1 and "security" not in words[1]:
                    return words[1]
                if line.startswith("deb ") and len(words) > 2 and "security" not in line:
                    return next(w for w in words[1:] if "://" in w)
    return DEFAULT_MIRROR


def ensure_rootfs(cache: Path, say: Say) -> Path:
    """The cached root file system, built first when missing (about 1-2 minutes, once per machine)."""
    root = rootfs_dir(cache)
    if (root / ".orchestrator-rootfs").exists():
        return root
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / f".{root.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two setups at once: the second waits and finds it built
        if (root / ".orchestrator-rootfs").exists():
            return root
        missing = [tool for tool in ("debootstrap", "systemd-nspawn") if shutil.which(tool) is None]
        if missing:
            raise SandboxError(f"building the test hosts needs {', '.join(missing)} "
                               "(apt-get install debootstrap systemd-container)")
        building = root.with_name(root.name + ".building")
        shutil.rmtree(building, ignore_errors=True)
        mirror = debian_mirror()
        say(f"building the test hosts' Debian {SUITE} root file system with debootstrap from {mirror} (once)")
        started = time.monotonic()
        proc = subprocess.run(["debootstrap", "--variant=minbase", f"--include={','.join(PACKAGES)}", SUITE,
                               str(building), mirror], capture_output=True, text=True)
        if proc.returncode != 0:
            tail = (proc.stderr or proc.stdout).strip()[-1500:]
            raise SandboxError(f"debootstrap failed (exit {proc.returncode}):\n{tail}")
        customize(building)
        building.rename(root)
        say(f"test hosts' root file system ready in {root} ({time.monotonic() - started:.0f} s)")
    return root


def customize(root: Path) -> None:
    """What the sandbox adds to plain Debian: accounts, the knob unit; what it removes: anything that
    would make two hosts alike (host keys, machine id) and apt's downloaded lists."""
    for account, uid in SERVICE_ACCOUNTS.items():
        subprocess.run(["chroot", str(root), "groupadd", "--system", "--gid", str(uid), account], check=True)
        subprocess.run(["chroot", str(root), "useradd", "--system", "--uid", str(uid), "--gid", str(uid),
                        "--home-dir", f"/usr/share/{account}", "--no-create-home", "--shell", "/usr/sbin/nologin",
                        account], check=True)
    subprocess.run(["chroot", str(root), "useradd", "--no-create-home", "--home-dir", "/nonexistent",
                    "--shell", "/bin/sh", "deploy"], check=True)
    for key in (root / "etc" / "ssh").glob("ssh_host_*"):
        key.unlink()
    (root / "etc" / "machine-id").write_text("")
    # The hosts reach no mirror: apt's only source is the sandbox's own repository, where one is given.
    (root / "etc" / "apt" / "sources.list").write_text("# The sandbox's hosts reach no Debian mirror.\n")
    script = root / KNOBS_SCRIPT.lstrip("/")
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(KNOBS_SCRIPT_TEXT)
    script.chmod(0o755)
    unit = root / "etc" / "systemd" / "system" / KNOBS_UNIT
    unit.write_text(KNOBS_UNIT_TEXT)
    wants = unit.parent / "sysinit.target.wants"
    wants.mkdir(exist_ok=True)
    (wants / KNOBS_UNIT).symlink_to(f"../{KNOBS_UNIT}")
    # A container has no console login to offer; its getty would only fill the boot log.
    (root / "etc" / "systemd" / "system" / "console-getty.service").symlink_to("/dev/null")
    for leftovers in ("var/lib/apt/lists", "var/cache/apt/archives"):
        for item in (root / leftovers).glob("*"):
            if item.is_file():
                item.unlink()
    (root / ".orchestrator-rootfs").write_text(f"{ROOTFS_VERSION}\n")
