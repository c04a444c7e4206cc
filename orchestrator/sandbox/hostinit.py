"""PID 1 of a sandbox test host: private mounts, sshd, the enabled units, and reaping orphans.

Run by ``hosts.start_host`` inside fresh network, mount, PID, UTS and IPC namespaces. The host
sees the machine's file system, except that ``/etc``, ``/usr/local/bin``, ``/run`` and ``/tmp`` are
its own, and its kernel knobs are plain files bound over the real paths. ``/sys`` and ``/proc/sys``
are remounted read-only (a per-mount flag) so a write to any knob we did not overlay fails
instead of reaching the real machine.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from orchestrator.sandbox.layout import HostPaths


def sh(*cmd: str) -> None:
    subprocess.run(cmd, check=True)


def mount_private_views(paths: HostPaths) -> None:
    sh("mount", "--make-rprivate", "/")
    for target, upper, which in (("/etc", paths.etc_upper, "etc"), ("/usr/local/bin", paths.bin_upper, "bin")):
        work = paths.overlay_work(which)
        sh("mount", "-t", "overlay", "overlay", "-o",
           f"lowerdir={target},upperdir={upper},workdir={work}", target)
    if Path("/usr/bin/systemctl").exists():
        sh("mount", "--bind", "/usr/local/bin/systemctl", "/usr/bin/systemctl")
    sh("mount", "-t", "tmpfs", "-o", "mode=755", "tmpfs", "/run")
    # A private /tmp: JVMs in different hosts can have the same PID (one PID namespace each), and
    # the JVM's self-attach rendezvous file is /tmp/.java_pid<pid>. Shared, they would collide.
    sh("mount", "-t", "tmpfs", "-o", "mode=1777", "tmpfs", "/tmp")
    Path("/run/sshd").mkdir(mode=0o755)


def mount_knobs(knobs: dict[str, str]) -> None:
    sh("mount", "--bind", "/proc/sys", "/proc/sys")
    sh("mount", "-o", "remount,bind,ro", "/proc/sys")
    sh("mount", "-o", "remount,bind,ro", "/sys")
    for target, source in knobs.items():
        sh("mount", "--bind", source, target)


def replay_sysctl() -> None:
    """What a boot does with sysctl.d: files by name (/etc wins), then /etc/sysctl.conf.

    Only the overlaid knobs are writable here; other keys fail on the read-only /proc/sys.
    """
    by_name: dict[str, Path] = {}
    for d in ("/usr/lib/sysctl.d", "/run/sysctl.d", "/etc/sysctl.d"):
        for f in sorted(Path(d).glob("*.conf")) if Path(d).is_dir() else []:
            by_name[f.name] = f
    for f in [*(by_name[n] for n in sorted(by_name)), Path("/etc/sysctl.conf")]:
        for line in f.read_text().splitlines() if f.is_file() else []:
            line = line.strip()
            if not line or line.startswith(("#", ";")) or "=" not in line:
                continue
            key, value = (p.strip() for p in line.split("=", 1))
            with contextlib.suppress(OSError):
                Path("/proc/sys", key.lstrip("-").replace(".", "/")).write_text(value + "\n")


def replay_udev_schedulers() -> None:
    """What udev does at boot with rules that set a disk's IO scheduler."""
    rules = Path("/etc/udev/rules.d")
    for f in sorted(rules.glob("*.rules")) if rules.is_dir() else []:
        for line in f.read_text().splitlines():
            if 'KERNEL=="' not in line or 'ATTR{queue/scheduler}="' not in line:
                continue
            device = line.split('KERNEL=="', 1)[1].split('"', 1)[0]
            value = line.split('ATTR{queue/scheduler}="', 1)[1].split('"', 1)[0]
            target = Path("/sys/block", device).resolve() / "queue" / "scheduler"
            with contextlib.suppress(OSError):
                target.write_text(value + "\n")


SUDO_LOG = "/run/sudo-deploy.log"  # on the host's own /run: empty again after its reboot


def add_deploy_user(spec: dict[str, object]) -> None:
    """The non-root `deploy` user an operator's tool logs in as, with a password sudo asks for, and the
    sudo rule the tool needs (docs/privileges.md). In the host's own /etc, so kept across its reboots."""
    from orchestrator.sandbox.hosts import DEPLOY_USER as USER
    from orchestrator.sandbox.hosts import SUDO

    password_file = spec.get("deploy_password_file")
    if not password_file or not Path(SUDO).exists():
        return
    if subprocess.run(["id", "-u", USER], capture_output=True).returncode != 0:
        sh("useradd", "--no-create-home", "--home-dir", "/nonexistent", "--shell", "/bin/sh", USER)
    password = Path(str(password_file)).read_text().strip()
    subprocess.run(["chpasswd"], input=f"{USER}:{password}\n".encode(), check=True)
    sudoers = Path(f"/etc/sudoers.d/orchestrator-{USER}")
    sudoers.write_text(f"# Written by the sandbox (docs/privileges.md): sudo asks {USER} for its password,\n"
                       f"# and keeps a log of what {USER} ran, for the tests to read.\n"
                       f"Defaults:{USER} logfile={SUDO_LOG}, loglinelen=0\n"
                       f"{USER} ALL=(root) /bin/sh\n")
    sudoers.chmod(0o440)
    # sudo looks its host's name up; without this line it warns on every command.
    hosts = Path("/etc/hosts")
    if f" {spec['name']}\n" not in hosts.read_text():
        with hosts.open("a") as out:
            out.write(f"127.0.1.1 {spec['name']}\n")


def boot(paths: HostPaths) -> subprocess.Popen[bytes]:
    """What a boot does: persisted settings first, then sshd and every enabled unit. Returns sshd."""
    replay_sysctl()
    replay_udev_schedulers()
    sshd = subprocess.Popen(["/usr/sbin/sshd", "-D", "-e", "-f", str(paths.sshd_dir / "sshd_config")])
    subprocess.run(["/usr/local/bin/systemctl", "sandbox-boot"])
    paths.ready_flag.write_text(f"{time.time()}\n")
    return sshd


def fresh_tmpfs() -> None:
    """/run and /tmp as a boot finds them: empty (no pid file of a process that is gone)."""
    for target, mode in (("/run", "755"), ("/tmp", "1777")):
        sh("umount", "-l", target)
        sh("mount", "-t", "tmpfs", "-o", f"mode={mode}", "tmpfs", target)
    Path("/run/sshd").mkdir(mode=0o755)


def kill_everything_else(timeout_s: float = 30) -> None:
    """Every process of this host but PID 1 (kill(-1) from PID 1 reaches only this PID namespace)."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(-1, signal.SIGKILL)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return


def main(host_dir: str) -> None:
    from orchestrator.sandbox.hosts import reset_knobs

    paths = HostPaths(Path(host_dir))
    spec = json.loads(paths.spec.read_text())
    # PID 1 lives as long as the host: its output goes to the host's init log.
    log_fd = os.open(paths.init_log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    sh("hostname", spec["name"])
    mount_private_views(paths)
    mount_knobs(spec["knobs"])
    add_deploy_user(spec)
    running = {"sshd": boot(paths)}
    print(f"host {spec['name']} up", flush=True)

    def halt(signum: int, frame: object) -> None:
        # A clean power-off: services stop gracefully first, then sshd.
        subprocess.run(["/usr/local/bin/systemctl", "sandbox-halt"])
        running["sshd"].terminate()
        paths.ready_flag.unlink(missing_ok=True)
        os._exit(0)

    def reboot(signum: int, frame: object) -> None:
        # `systemctl reboot` on the host: services stop, every process ends, the knobs are back to
        # their boot defaults with a new boot id, and the host boots again (same mounts, same address).
        print(f"host {spec['name']} rebooting", flush=True)
        paths.ready_flag.unlink(missing_ok=True)
        subprocess.run(["/usr/local/bin/systemctl", "sandbox-halt"])
        kill_everything_else()
        reset_knobs(paths)
        fresh_tmpfs()
        running["sshd"] = boot(paths)
        print(f"host {spec['name']} up again", flush=True)

    signal.signal(signal.SIGTERM, halt)
    signal.signal(signal.SIGINT, halt)
    signal.signal(signal.SIGUSR1, reboot)
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            time.sleep(1)


if __name__ == "__main__":
    main(sys.argv[1])
