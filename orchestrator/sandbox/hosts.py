"""Test hosts in Linux namespaces: one network namespace, sshd, service manager and knobs each.

Only the root namespace side lives here (network, files, start and stop by PID); what runs
inside a host is in ``hostinit``. Everything is named with the ``orch-`` prefix so that a
leftover from a crashed run can be found and removed.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from orchestrator.errors import SandboxError
from orchestrator.sandbox.layout import HostPaths, SandboxPaths
from orchestrator.sandbox.state import SandboxState, save

Say = Callable[[str], None]
BRIDGE = "orch-br0"
# `sandbox up --bastion`: the node hosts' sshd listens only on a second network that this machine has
# no address on; the bastion host is on both, so SSH reaches the nodes only through it (ProxyJump).
BACK_BRIDGE = "orch-br1"
BACK_SUBNET = "10.232.0"
BASTION = "bastion"
NETNS_PREFIX = "orch-"
VETH_PREFIX = "orv"
SUBNET = "10.231.0"
GATEWAY = f"{SUBNET}.1"
HOST_FILES = Path(__file__).parent / "host_files"
# Every host has a non-root `deploy` user with a password, which sudo asks for (hostinit.add_deploy_user).
DEPLOY_USER = "deploy"
DEPLOY_PASSWORD = "deploy.password"
SUDO = "/usr/bin/sudo"  # Debian's, installed by scripts/setup; the hosts share this machine's /usr

THP = "/sys/kernel/mm/transparent_hugepage"
# Seeds are the defaults that hurt databases (the seeds' stories): THP always, zone reclaim on.
# max_map_count is already right: Elasticsearch refuses to start on a non-loopback address without it.
KNOB_SEEDS: dict[str, str] = {
    f"{THP}/enabled": "[always] madvise never\n",
    f"{THP}/defrag": "[always] defer defer+madvise madvise never\n",
    "/proc/sys/vm/zone_reclaim_mode": "1\n",
    "/proc/sys/vm/swappiness": "60\n",
    "/proc/sys/vm/max_map_count": "262144\n",
}
SCHEDULER_SEED = "none [mq-deadline] kyber bfq \n"
# Each host has its own boot id, new at every boot, where real hosts have it (read over SSH).
BOOT_ID = "/proc/sys/kernel/random/boot_id"


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


def run(*cmd: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise SandboxError(f"`{' '.join(cmd)}` failed: {proc.stderr.strip() or proc.stdout.strip()}")
    return proc


def check_prerequisites() -> None:
    if os.geteuid() != 0:
        raise SandboxError("--hosts netns needs root (it creates network namespaces and mounts). "
                           "Run as root, or use --hosts local to run the nodes on 127.0.0.1.")
    missing = [tool for tool in ("ip", "unshare", "mount", "sshd", "ssh-keygen", "setpriv")
               if shutil.which(tool) is None and not Path(f"/usr/sbin/{tool}").exists()]
    if missing:
        raise SandboxError(f"missing tools for --hosts netns: {', '.join(missing)} "
                           "(apt-get install openssh-server iproute2 util-linux)")


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


def seed_knobs(paths: HostPaths, scheduler: str | None) -> dict[str, str]:
    """Write the knob files with their boot defaults; return target -> file for hostinit."""
    paths.knobs.mkdir(parents=True, exist_ok=True)
    seeds = dict(KNOB_SEEDS)
    if scheduler:
        seeds[scheduler] = SCHEDULER_SEED
    mapping = {}
    for target, content in seeds.items():
        if not Path(target).exists():
            continue  # e.g. no zone_reclaim_mode on a kernel without NUMA: the host lacks it too
        knob_file = paths.knobs / target.strip("/").replace("/", "__")
        knob_file.write_text(content)
        mapping[target] = str(knob_file)
    boot_id = paths.knobs / "boot_id"
    boot_id.write_text(f"{uuid.uuid4()}\n")
    mapping[BOOT_ID] = str(boot_id)
    return mapping


def reset_knobs(paths: HostPaths) -> None:
    """A reboot's view of the knobs: back to boot defaults (what was persisted is replayed by the caller)."""
    spec = json.loads(paths.spec.read_text())
    for target, knob_file in spec["knobs"].items():
        Path(knob_file).write_text(f"{uuid.uuid4()}\n" if target == BOOT_ID else KNOB_SEEDS.get(target, SCHEDULER_SEED))


def write_unit(unit_dir: Path, name: str, exec_start: str, user: str | None, enabled: bool,
               nofile: int | None = None) -> None:
    unit_dir.mkdir(parents=True, exist_ok=True)
    lines = ["[Unit]", f"Description=sandbox {name}", "", "[Service]", f"ExecStart={exec_start}",
             "TimeoutStopSec=60"]
    if user:
        lines.append(f"User={user}")
    if nofile:
        lines.append(f"LimitNOFILE={nofile}")
    (unit_dir / f"{name}.service").write_text("\n".join(lines) + "\n")
    if enabled:
        wants = unit_dir / "multi-user.target.wants"
        wants.mkdir(exist_ok=True)
        link = wants / f"{name}.service"
        if not link.is_symlink():
            link.symlink_to(f"../{name}.service")


def make_deploy_password(paths: SandboxPaths) -> Path:
    """A fresh password for the hosts' `deploy` user (hostinit.add_deploy_user), kept as a secret file."""
    from orchestrator.sandbox.security import write_secret

    where = paths.secret(DEPLOY_PASSWORD)
    write_secret(where, secrets.token_urlsafe(12))
    return where


def prepare_host_files(paths: HostPaths, host: TestHost, knobs: dict[str, str], authorized_keys: Path,
                       es_start_script: Path | None, ssh_address: str | None = None,
                       service: str = "elasticsearch", deploy_password: Path | None = None,
                       host_ca: Path | None = None) -> str:
    """Everything the host needs on disk (the ``service`` unit, Elasticsearch's or OpenSearch's, when a
    start script is given).
    Returns the host's public key line for known_hosts."""
    for d in (paths.etc_upper, paths.bin_upper, paths.overlay_work("etc"), paths.overlay_work("bin"), paths.sshd_dir):
        d.mkdir(parents=True, exist_ok=True)
    shutil.copy2(HOST_FILES / "systemctl", paths.bin_upper / "systemctl")
    # numad stand-in: a copy of sleep named numad, so `pgrep -x numad` and `pidof numad` see it.
    shutil.copy2("/bin/sleep", paths.bin_upper / "numad")
    unit_dir = paths.etc_upper / "systemd" / "system"
    write_unit(unit_dir, "numad", "/usr/local/bin/numad infinity", None, enabled=True)
    if es_start_script is not None:
        write_unit(unit_dir, service, str(es_start_script), "65534", enabled=True, nofile=65535)
    user_keys = []
    if deploy_password is not None:
        # sshd reads a user's keys as that user, who cannot enter the sandbox's private ssh/ directory.
        user_keys = ["/etc/ssh/authorized_keys/%u"]
        where = paths.etc_upper / "ssh" / "authorized_keys"
        where.mkdir(parents=True, exist_ok=True)
        shutil.copy2(authorized_keys, where / DEPLOY_USER)
        (where / DEPLOY_USER).chmod(0o644)
    key = paths.sshd_dir / "ssh_host_ed25519_key"
    if not key.exists():
        run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"root@{host.name}", "-f", str(key))
    certificate = []
    if host_ca is not None:
        # An OpenSSH host certificate for the host's names, so that a known_hosts holding only the
        # sandbox's @cert-authority line is enough to reach it.
        names = ",".join(dict.fromkeys([ssh_address or host.address, host.address, host.name]))
        run("ssh-keygen", "-q", "-s", str(host_ca), "-I", host.name, "-h", "-n", names, "-V", "-5m:+30d",
            str(key) + ".pub")
        certificate = [f"HostCertificate {key}-cert.pub"]
    (paths.sshd_dir / "sshd_config").write_text("\n".join([
        f"ListenAddress {ssh_address or host.address}",
        "Port 22",
        f"HostKey {key}",
        *certificate,
        " ".join(["AuthorizedKeysFile", str(authorized_keys), *user_keys]),
        "PidFile /run/sshd.pid",
        "UsePAM no",
        "PermitRootLogin prohibit-password",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "StrictModes no",
        "PrintMotd no",
        "MaxStartups 100:30:200",
        "MaxSessions 50",
        "Subsystem sftp internal-sftp",
        # The hosts share /root with this machine, and bash runs ~/.bashrc for sshd's commands when it
        # is a top-level shell; this machine's starts pyenv (0.1 s per command, a tenth of the tool's
        # overhead per node). SHLVL=1 makes the command's bash a second-level shell, which skips it.
        "SetEnv SHLVL=1",
    ]) + "\n")
    paths.spec.write_text(json.dumps({"name": host.name, "address": host.address, "knobs": knobs,
                                      "deploy_password_file": str(deploy_password) if deploy_password else None},
                                     indent=2))
    pub = (paths.sshd_dir / "ssh_host_ed25519_key.pub").read_text().split()
    return f"{ssh_address or host.address} {pub[0]} {pub[1]}"


def start_host(paths: HostPaths, host: TestHost, timeout_s: float = 30) -> tuple[int, int]:
    """Boot the host; return (outer PID of unshare, outer PID of the host's init)."""
    paths.ready_flag.unlink(missing_ok=True)
    cmd = ["ip", "netns", "exec", host.netns, "unshare", "--mount", "--pid", "--fork", "--mount-proc",
           "--uts", "--ipc", "--kill-child", "--", sys.executable, "-m", "orchestrator.sandbox.hostinit",
           str(paths.root)]
    with open(paths.init_log, "a") as log:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
                                env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])})
    deadline = time.monotonic() + timeout_s
    while not paths.ready_flag.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            tail = paths.init_log.read_text()[-1500:] if paths.init_log.exists() else ""
            raise SandboxError(f"test host {host.name} did not boot:\n{tail}")
        time.sleep(0.05)
    return proc.pid, init_pid_of(proc.pid)


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
    """Write known_hosts, then boot every host, recording its PIDs as soon as it runs."""
    paths.known_hosts.write_text("\n".join(host_keys) + "\n")
    say(f"booting test hosts (sshd, numad, {services})")
    for host, rec in zip(test_hosts, st.hosts, strict=False):
        rec.unshare_pid, rec.init_pid = start_host(paths.host(host.name), host)
        save(paths.state_file, st)


def init_pid_of(unshare_pid: int) -> int:
    children = Path(f"/proc/{unshare_pid}/task/{unshare_pid}/children").read_text().split()
    if not children:
        raise SandboxError(f"test host process {unshare_pid} has no init")
    return int(children[0])


def pid_alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def stop_host(unshare_pid: int | None, init_pid: int | None, timeout_s: float = 60) -> None:
    """Graceful power-off (services stopped by the host's init), then a hard one if needed."""
    stop_hosts([(unshare_pid, init_pid)], timeout_s)


def stop_hosts(hosts: list[tuple[int | None, int | None]], timeout_s: float = 60) -> None:
    """Power off every (unshare PID, init PID) at once, then a hard power-off of any still up after
    ``timeout_s``: hosts whose services are slow to stop (OpenSearch 2.x: 50 s) stop side by side."""
    for _unshare, init_pid in hosts:
        if pid_alive(init_pid):
            os.kill(init_pid, signal.SIGTERM)  # type: ignore[arg-type]
    deadline = time.monotonic() + timeout_s
    while any(pid_alive(init) for _, init in hosts) and time.monotonic() < deadline:
        time.sleep(0.1)
    for unshare_pid, init_pid in hosts:
        for pid in (init_pid, unshare_pid):
            if pid_alive(pid):
                os.kill(pid, signal.SIGKILL)  # type: ignore[arg-type]


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
