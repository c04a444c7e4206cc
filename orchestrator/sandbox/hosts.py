"""Test hosts: real Debian 12 systems with systemd as PID 1 (systemd-nspawn), each in its own network
namespace, with its own sshd, units, journal and kernel knobs.

Only this machine's side lives here (network, files, start and stop by PID); each host's supervisor
is ``machine``, its root file system ``rootfs``. Everything is named with the ``orch-`` prefix so that a
leftover from a crashed run can be found and removed.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from orchestrator.errors import SandboxError
from orchestrator.sandbox.layout import HostPaths, SandboxPaths
from orchestrator.sandbox.rootfs import SERVICE_ACCOUNTS, rootfs_dir
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
# Every host has a non-root `deploy` user with a password, which sudo asks for (add_deploy_user).
DEPLOY_USER = "deploy"
DEPLOY_PASSWORD = "deploy.password"

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
SUDO_LOG = "/run/sudo-deploy.log"  # on the host's own /run: empty again after its reboot
CGROUP_ROOT = Path("/sys/fs/cgroup")
READY_UNIT = "sandbox-ready.service"


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
    """Write the knob files with their boot defaults; return target -> file (laid over the target at
    each boot by the host's sandbox-knobs unit, rootfs.py)."""
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
    return mapping


def reset_knobs(paths: HostPaths) -> None:
    """A reboot's view of the knobs: back to boot defaults (what was persisted is replayed by the boot)."""
    spec = json.loads(paths.spec.read_text())
    for target, knob_file in spec["knobs"].items():
        Path(knob_file).write_text(KNOB_SEEDS.get(target, SCHEDULER_SEED))


def write_unit(unit_dir: Path, name: str, exec_start: str, user: str | None, nofile: int | None = None) -> None:
    """A plain unit for a local-mode node (no test hosts: see lifecycle.local_service)."""
    unit_dir.mkdir(parents=True, exist_ok=True)
    lines = ["[Unit]", f"Description=sandbox {name}", "", "[Service]", f"ExecStart={exec_start}",
             "TimeoutStopSec=60"]
    if user:
        lines.append(f"User={user}")
    if nofile:
        lines.append(f"LimitNOFILE={nofile}")
    (unit_dir / f"{name}.service").write_text("\n".join(lines) + "\n")


def node_unit_text(service: str, exec_start: str) -> str:
    """The node's unit, modelled on the official package's (elasticsearch.service, opensearch.service)."""
    user = service if service in SERVICE_ACCOUNTS else "root"
    return "\n".join([
        "[Unit]",
        f"Description={service.capitalize()} (sandbox node)",
        "Wants=network-online.target",
        "After=network-online.target",
        "",
        "[Service]",
        # Type=simple where the package says notify: the sandbox's node is started by its own launcher, and
        # the assembled home has no systemd module to send READY=1. `start` returns once the JVM runs; the
        # tool waits for the node to join, as it does everywhere.
        "Type=simple",
        f"User={user}",
        f"Group={user}",
        f"ExecStart={exec_start}",
        "StandardOutput=journal",
        "StandardError=inherit",
        # The package's 65535 is past this machine's hard limit (no CAP_SYS_RESOURCE here): systemd would
        # refuse to start the unit (status 205/LIMITS). The highest the machine allows instead.
        f"LimitNOFILE={min(65535, resource.getrlimit(resource.RLIMIT_NOFILE)[1])}",
        "LimitNPROC=4096",
        # The package's TimeoutStopSec=0 waits forever; here a stop that hangs is killed after 60 s and the
        # unit says so (Result=timeout), which the tool reports as killed, not clean.
        "TimeoutStopSec=60",
        "KillSignal=SIGTERM",
        "SuccessExitStatus=143",
        "TimeoutStartSec=900",
        "",
        "[Install]",
        "WantedBy=multi-user.target",
        "",
    ])


def enable_unit(unit_dir: Path, name: str, target: str = "multi-user.target") -> None:
    wants = unit_dir / f"{target}.wants"
    wants.mkdir(parents=True, exist_ok=True)
    link = wants / name
    if not link.is_symlink():
        link.symlink_to(f"../{name}")


def make_deploy_password(paths: SandboxPaths) -> Path:
    """A fresh password for the hosts' `deploy` user (hostinit.add_deploy_user), kept as a secret file."""
    from orchestrator.sandbox.security import write_secret

    where = paths.secret(DEPLOY_PASSWORD)
    write_secret(where, secrets.token_urlsafe(12))
    return where


def prepare_host_files(paths: HostPaths, host: TestHost, knobs: dict[str, str], authorized_keys: Path,
                       es_start_script: Path | None, ssh_address: str | None = None,
                       service: str = "elasticsearch", deploy_password: Path | None = None,
                       host_ca: Path | None = None, own_binds: tuple[str, ...] = ()) -> str:
    """Everything the host has of its own before its first boot, written over the shared root file
    system: its name and machine id, sshd's settings and host key, the ``service`` unit (Elasticsearch's
    or OpenSearch's, when a start script is given), the `deploy` user's password and sudo rule.
    Returns the host's public key line for known_hosts."""
    etc = paths.etc_upper
    for d in (etc / "ssh" / "sshd_config.d", etc / "ssh" / "authorized_keys", etc / "sandbox", paths.bin_upper,
              paths.sshd_dir):
        d.mkdir(parents=True, exist_ok=True)
    (etc / "hostname").write_text(f"{host.name}\n")
    (etc / "machine-id").write_text(f"{secrets.token_hex(16)}\n")
    # sudo looks its host's name up; without this line it warns on every command.
    (etc / "hosts").write_text(f"127.0.0.1 localhost\n127.0.1.1 {host.name}\n::1 localhost ip6-localhost\n")
    (etc / "sandbox" / "knobs").write_text("".join(f"{target} {source}\n" for target, source in knobs.items()))
    unit_dir = etc / "systemd" / "system"
    unit_dir.mkdir(parents=True, exist_ok=True)
    if es_start_script is not None:
        (unit_dir / f"{service}.service").write_text(node_unit_text(service, str(es_start_script)))
        enable_unit(unit_dir, f"{service}.service")
    # Tells the sandbox the host is up (sshd and the node's service started), with this boot's id.
    (unit_dir / READY_UNIT).write_text("\n".join([
        "[Unit]", "Description=Sandbox: tell the sandbox this host has booted",
        f"After=ssh.service {service}.service", "", "[Service]", "Type=oneshot",
        f"ExecStart=/bin/sh -c 'cat /proc/sys/kernel/random/boot_id > {paths.ready_flag}'", "",
        "[Install]", "WantedBy=multi-user.target", ""]))
    enable_unit(unit_dir, READY_UNIT)
    shutil.copy2(authorized_keys, etc / "ssh" / "authorized_keys" / "root")
    if deploy_password is not None:
        add_deploy_user(etc, authorized_keys, deploy_password)
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
    # Read before Debian's own sshd_config (its first line includes this directory; first value wins).
    (etc / "ssh" / "sshd_config.d" / "sandbox.conf").write_text("\n".join([
        f"ListenAddress {ssh_address or host.address}",
        f"HostKey {key}",
        *certificate,
        "AuthorizedKeysFile /etc/ssh/authorized_keys/%u",
        # PAM's loginuid and session modules need capabilities a container lacks; keys only.
        "UsePAM no",
        "PermitRootLogin prohibit-password",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "PrintMotd no",
        "MaxStartups 100:30:200",
        "MaxSessions 50",
    ]) + "\n")
    paths.spec.write_text(json.dumps({
        "name": host.name, "address": host.address, "netns": host.netns, "knobs": knobs,
        "rootfs": str(host_rootfs()),
        # The host sees the sandbox's files (its node's directory, the shared snapshot repository) and the
        # assembled homes and JVMs at the same paths as this machine does.
        # ``own_binds``: SOURCE:TARGET of this host's own (a packaged node's /etc/elasticsearch, say).
        "binds": [str(paths.root.parents[1]), *own_binds], "binds_ro": [str(p) for p in read_only_binds()],
    }, indent=2))
    pub = (paths.sshd_dir / "ssh_host_ed25519_key.pub").read_text().split()
    return f"{ssh_address or host.address} {pub[0]} {pub[1]}"


def add_deploy_user(etc: Path, authorized_keys: Path, password_file: Path) -> None:
    """The non-root `deploy` user an operator's tool logs in as (created in the root file system), with a
    password sudo asks for, and the sudo rule the tool needs (docs/privileges.md)."""
    shutil.copy2(authorized_keys, etc / "ssh" / "authorized_keys" / DEPLOY_USER)
    (etc / "ssh" / "authorized_keys" / DEPLOY_USER).chmod(0o644)
    hashed = run("openssl", "passwd", "-6", "-stdin", stdin=password_file.read_text().strip() + "\n").stdout.strip()
    shadow = (host_rootfs() / "etc" / "shadow").read_text().splitlines()
    lines = [f"{DEPLOY_USER}:{hashed}:" + line.split(":", 2)[2] if line.startswith(f"{DEPLOY_USER}:") else line
             for line in shadow]
    (etc / "shadow").write_text("\n".join(lines) + "\n")
    (etc / "shadow").chmod(0o640)
    sudoers = etc / "sudoers.d" / f"orchestrator-{DEPLOY_USER}"
    sudoers.parent.mkdir(parents=True, exist_ok=True)
    sudoers.write_text(f"# Written by the sandbox (docs/privileges.md): sudo asks {DEPLOY_USER} for its password,\n"
                       f"# and keeps a log of what {DEPLOY_USER} ran, for the tests to read.\n"
                       f"Defaults:{DEPLOY_USER} logfile={SUDO_LOG}, loglinelen=0\n"
                       f"{DEPLOY_USER} ALL=(root) /bin/sh\n")
    sudoers.chmod(0o440)


def host_rootfs() -> Path:
    from orchestrator.sandbox.assemble import cache_root

    return rootfs_dir(cache_root())


def read_only_binds() -> list[Path]:
    from orchestrator.sandbox.assemble import cache_root

    # Debian's OpenJDK links its configuration into /etc/java-N-openjdk: the hosts need it beside the JVM.
    return [p for p in (cache_root(), Path("/usr/lib/jvm"), *sorted(Path("/etc").glob("java-*"))) if p.is_dir()]


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


def host_cgroups(name: str) -> list[Path]:
    """The host's cgroups (its supervisor's and everything nspawn made under it), deepest first."""
    found = []
    for hierarchy in ("systemd", "unified"):
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
