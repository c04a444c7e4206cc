"""A test host's own files, written before it boots: its kernel knobs (seeded with the defaults that
hurt databases), its units, its `deploy` user and sudo rules, its SSH keys and configuration.
"""

from __future__ import annotations

import json
import resource
import secrets
import shutil
from pathlib import Path

from orchestrator.sandbox.hosts import TestHost, run
from orchestrator.sandbox.layout import HostPaths, SandboxPaths
from orchestrator.sandbox.rootfs import SERVICE_ACCOUNTS, rootfs_dir

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


READY_UNIT = "sandbox-ready.service"


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
    """A plain unit for a local-mode node (no test hosts: see local_mode.local_service)."""
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
                       host_ca: Path | None = None, own_binds: tuple[str, ...] = (), cpus: float = 0.0) -> str:
    """Everything the host has of its own before its first boot, written over the shared root file
    system: its name and machine id, sshd's settings and host key, the ``service`` unit (Elasticsearch's
    or OpenSearch's, when a start script is given), the `deploy` user's password and sudo rule.
    ``cpus``: the host's CPU quota (its supervisor puts the host in a CPU cgroup of its own), 0: none.
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
        "cpus": cpus,
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
