"""`sandbox up | down | status`: a real Elasticsearch cluster in test hosts, started and stopped by PID."""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import socket
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrator.errors import OrchestratorError, SandboxError
from orchestrator.paths import state_root
from orchestrator.sandbox import (
    debs,
    host_cgroups,
    host_network,
    host_power,
    host_setup,
    hosts,
    inventory_writer,
    riak,
    security,
    state,
)
from orchestrator.sandbox.assemble import EsHome, cache_root, ensure_es_home
from orchestrator.sandbox.inventory_writer import write_inventory, write_ssh_files
from orchestrator.sandbox.layout import HostPaths, SandboxPaths
from orchestrator.sandbox.node import (
    NodeSpec,
    jvm_command,
    node_environment,
    opensearch_jvm_command,
    security_settings,
    write_node_config,
)
from orchestrator.sandbox.opensearch_home import OpenSearchHome, ensure_opensearch_home
from orchestrator.sandbox.rootfs import SERVICE_ACCOUNTS, ensure_rootfs

Say = hosts.Say
NODE_UID = 65534
LOCAL_HTTP_BASE = 19200
LOCAL_TRANSPORT_BASE = 19300
CLUSTER_NAME = "sandbox"
RIAK_DAEMON = b"riak_standin.py\x00daemon"
JVM_MAIN_CLASSES = (b"SandboxLauncher", b"org.opensearch.bootstrap.OpenSearch")  # how a node's JVM is found
LABELS = {"elasticsearch": "Elasticsearch", "opensearch": "OpenSearch"}
Home = EsHome | OpenSearchHome


def describe(st: state.SandboxState) -> str:
    return "Riak stand-in" if st.product == "riak" else f"{LABELS[st.product]} {st.es_version}"


def service_of(product: str) -> str:
    """The systemd unit (and start script) of a node: `elasticsearch` or `opensearch`."""
    return "opensearch" if product == "opensearch" else "elasticsearch"


def node_names(count: int) -> list[str]:
    return [f"es-{i}" for i in range(1, count + 1)]


def zone_of(index: int, zones: int) -> str:
    """Round-robin: with 6 nodes in 3 zones, two per zone."""
    return f"zone-{(index - 1) % max(zones, 1) + 1}"


@dataclass(frozen=True)
class SandboxShape:
    """What `sandbox up` builds. ``mode``: netns (test hosts) or local (nodes on 127.0.0.1); ``masters``: how
    many nodes (the first ones) are master-eligible, 0: all of them; ``also_versions``: versions assembled
    beside ``es_version`` that `orchestrate upgrade --to` can switch to; ``secured``: Elasticsearch's
    security on (TLS, users, an API key, security.py); ``packages``: each host installs the product from the
    sandbox's apt repository (debs.py), and upgrades with apt; ``bastion``: SSH reaches the node hosts only
    through a bastion host."""

    nodes: int = 3
    zones: int = 1
    es_version: str = "9.5.3"
    mode: str = "netns"
    heap_mb: int = 512
    product: str = "elasticsearch"
    masters: int = 0
    also_versions: tuple[str, ...] = ()
    bastion: bool = False
    secured: bool = False
    packages: bool = False

    def problems(self) -> list[str]:
        """Why this shape cannot be built (each option's own limits, and which go together), before anything
        is touched."""
        netns, riak_product = self.mode == "netns", self.product == "riak"
        checks = [
            (1 <= self.nodes <= 12, "--nodes must be between 1 and 12 on one machine"),
            (1 <= self.zones <= self.nodes, "--zones must be between 1 and the number of nodes"),
            (0 <= self.masters <= self.nodes, "--masters must be between 1 and the number of nodes (0: every node)"),
            (not (self.masters and riak_product), "--masters is for an Elasticsearch or OpenSearch sandbox"),
            (netns or not riak_product,
             "the Riak sandbox needs --hosts netns (each node is a host with its own address)"),
            (not self.bastion or (netns and self.product == "elasticsearch"),
             "--bastion is for an Elasticsearch sandbox with --hosts netns"),
            (not self.packages or (netns and not riak_product),
             "--packages is for an Elasticsearch or OpenSearch sandbox with --hosts netns"),
            (not (self.also_versions and riak_product), "--also-version is for an Elasticsearch or OpenSearch sandbox"),
            (not self.secured or self.product == "elasticsearch",
             "a secured sandbox is for Elasticsearch (OpenSearch's security plugin is not on Maven Central; the "
             "Riak stand-in has none): add --insecure"),
        ]
        return [why for holds, why in checks if not holds]


def up(paths: SandboxPaths, shape: SandboxShape, timeout_s: float, say: Say) -> state.SandboxState:
    """Build and start the sandbox of ``shape``; refused before anything is touched when the shape cannot be
    built or a sandbox is running."""
    problems = shape.problems()
    if problems:
        raise SandboxError(problems[0])
    nodes, zones, mode, product = shape.nodes, shape.zones, shape.mode, shape.product
    es_version, heap_mb, secured = shape.es_version, shape.heap_mb, shape.secured
    existing = state.load(paths.state_file)
    if existing is not None and any_alive(paths, existing):
        raise SandboxError(f"a sandbox is already running ({len(existing.hosts)} nodes, {describe(existing)}); "
                           "`orchestrate sandbox down` stops it")
    if existing is not None or (mode == "netns" and os.geteuid() == 0 and host_network.leftover_namespaces()):
        say("cleaning up what an earlier sandbox left behind")
        down(paths, say)
    if mode == "netns":
        hosts.check_prerequisites()
        ensure_rootfs(cache_root(), say)
    if product == "riak":
        riak.standin_dir()

    def home_of(version: str) -> Home:
        return ensure_es_home(version, say, secured) if product == "elasticsearch" else \
            ensure_opensearch_home(version, say)

    es_home = home_of(es_version) if product != "riak" else None
    homes: list[Home] = [es_home, *(home_of(v) for v in dict.fromkeys(shape.also_versions) if v != es_version)] \
        if es_home else []
    # Every `up` is a fresh cluster: data of another version or shape would not start, and runs
    # journaled against the previous sandbox cluster have nothing left to resume.
    shutil.rmtree(paths.root / "hosts", ignore_errors=True)
    shutil.rmtree(paths.root / "snapshots", ignore_errors=True)  # a repository of the old cluster's data
    shutil.rmtree(state_root() / "runs" / CLUSTER_NAME, ignore_errors=True)
    started = time.monotonic()
    st = state.SandboxState(mode=mode, es_version=es_version if es_home else "", cluster_name=CLUSTER_NAME,
                            zones=zones, started_at=time.time(), product=product,
                            versions=[h.version for h in homes], secured=secured, packages=shape.packages)
    paths.root.mkdir(parents=True, exist_ok=True)
    os.chmod(paths.root, 0o755)
    if secured:
        security.prepare(paths)
    write_ssh_files(paths, [], mode)  # the client key exists before any host is prepared
    try:
        if es_home is None:
            members = riak.up_netns(paths, st, nodes, zones, say)
            say(f"waiting for {nodes} Riak nodes to serve riak_kv")
            riak.wait_ready(paths, members, timeout_s)
        elif mode == "netns":
            _up_netns(paths, st, nodes, zones, homes, heap_mb, say, shape.masters or nodes, shape.bastion)
        else:
            _up_local(paths, st, nodes, zones, homes, heap_mb, say, shape.masters or nodes)
        if es_home is not None:
            say(f"waiting for {nodes} nodes to form a green cluster")
            wait_green(paths, st, nodes, timeout_s)
        if secured:
            say("creating the orchestrator role, user and API key")
            security.create_tool_user(paths, [h.http_url for h in st.hosts])
    except BaseException:
        state.save(paths.state_file, st)
        say("start-up failed: stopping what was started")
        down(paths, lambda _m: None)
        raise
    st.ready = True
    state.save(paths.state_file, st)
    write_ssh_files(paths, st.hosts, mode, st.bastion)
    write_inventory(paths, st)
    what = (f"{describe(st)}, green" + (", secured (TLS, users)" if secured else "")) if es_home \
        else "Riak stand-in, ready"
    say(f"sandbox up: {nodes} nodes, {what} in {time.monotonic() - started:.1f} s")
    return st


def _node_spec(st: state.SandboxState, name: str, index: int, bind: str, http: int, transport: int,
               seeds: list[str], masters: list[str], heap_mb: int, eligible: int, repo: Path) -> NodeSpec:
    # Nodes after the first `eligible` are data-only: a cluster whose masters are not on every node.
    roles: dict[str, object] = {} if index <= eligible else {"node.roles": ["data", "ingest"]}
    roles["path.repo"] = [str(repo)]  # a shared file-system snapshot repository may live there
    if st.product == "elasticsearch":
        roles.update(security_settings(st.secured))
    zones = st.zones
    return NodeSpec(name=name, cluster_name=CLUSTER_NAME, bind_host=bind, http_port=http, transport_port=transport,
                    zone=zone_of(index, zones), seed_hosts=tuple(seeds), initial_masters=tuple(masters),
                    heap_mb=heap_mb, extra_settings=roles)


def _prepare_node(paths: SandboxPaths, st: state.SandboxState, spec: NodeSpec, hp: HostPaths) -> None:
    # A packaged node sees its directories where the package puts them (bound there: packaged_binds).
    write_node_config(spec, hp.node_dir, st.zones, st.product, Path("/var") if st.packages else None)
    if st.secured:
        security.install_node_files(paths, hp.node_dir, spec.name, [spec.bind_host])
    _chown_node(hp.node_dir, node_uid(st))


def http_url(st: state.SandboxState, address: str, port: int) -> str:
    return f"{'https' if st.secured else 'http'}://{address}:{port}"


def _write_start_script(homes: list[Home], host_paths: HostPaths, heap_mb: int) -> Path:
    """One start script per assembled version (elasticsearch-VERSION.sh) and the link the unit runs,
    elasticsearch.sh, to the first: an upgrade switches the link (upgrade.install method `switch`).
    OpenSearch's are opensearch-VERSION.sh and opensearch.sh."""
    node_dir = host_paths.node_dir
    service = "opensearch" if isinstance(homes[0], OpenSearchHome) else "elasticsearch"
    for home in homes:
        env = node_environment(home, node_dir)
        command = opensearch_jvm_command(home, node_dir, heap_mb) if isinstance(home, OpenSearchHome) \
            else jvm_command(home, node_dir, heap_mb)
        lines = ["#!/bin/sh", f"# Starts this host's {service} {home.version} node (written by `orchestrate "
                              "sandbox up`).",
                 "exec env -i " + " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items()) + " "
                 + " ".join(shlex.quote(c) for c in command)]
        versioned = version_script(host_paths, home.version, service)
        versioned.write_text("\n".join(lines) + "\n")
        versioned.chmod(0o755)
    link = start_link(host_paths, service)
    link.unlink(missing_ok=True)
    link.symlink_to(version_script(host_paths, homes[0].version, service).name)
    return link


def start_link(host_paths: HostPaths, service: str = "elasticsearch") -> Path:
    return host_paths.node_dir.parent / f"{service}.sh"


def version_script(host_paths: HostPaths, version: str, service: str = "elasticsearch") -> Path:
    return host_paths.node_dir.parent / f"{service}-{version}.sh"


def snapshot_dir(paths: SandboxPaths, uid: int = NODE_UID) -> Path:
    """Where the nodes may keep file-system snapshot repositories (`path.repo`), shared by all hosts."""
    where = paths.root / "snapshots"
    where.mkdir(parents=True, exist_ok=True)
    _chown_node(where, uid)
    return where


def node_uid(st: state.SandboxState) -> int:
    """Who a node runs as: on a test host its product's service account (rootfs.py), locally nobody."""
    return SERVICE_ACCOUNTS.get(service_of(st.product), NODE_UID) if st.mode == "netns" else NODE_UID


def _chown_node(node_dir: Path, uid: int) -> None:
    if os.geteuid() == 0:
        subprocess.run(["chown", "-R", f"{uid}:{uid}", str(node_dir)], check=True)


def _up_netns(paths: SandboxPaths, st: state.SandboxState, nodes: int, zones: int, homes: list[Home],
              heap_mb: int, say: Say, eligible: int, bastion: bool = False) -> None:
    names = node_names(nodes)
    test_hosts = [hosts.TestHost(name, i, zone_of(i, zones)) for i, name in enumerate(names, start=1)]
    seeds = [f"{h.address}:9300" for h in test_hosts]
    masters = names[: min(3, eligible)]
    scheduler = hosts.data_disk_scheduler(paths.root)
    say(f"creating {nodes} test hosts on {hosts.SUBNET}.0/24" + (", SSH only through a bastion" if bastion else ""))
    host_network.create_bridge()
    if bastion:
        host_network.create_back_bridge()
    host_keys = []
    deploy_password = host_setup.make_deploy_password(paths)
    repo = paths.root / "apt"
    if st.packages:
        say(f"building {LABELS[st.product]} packages ({', '.join(h.version for h in homes)}) for the hosts' apt "
            "repository")
        debs.write_repository(repo, [debs.ensure_deb(h, cache_root()) for h in homes])
    for i, host in enumerate(test_hosts, start=1):
        rec = state.HostRecord(name=host.name, zone=host.zone, address=host.address,
                               http_url=http_url(st, host.address, 9200), netns=host.netns, veth=host.veth,
                               ssh_address=host.back_address if bastion else None)
        st.hosts.append(rec)
        state.save(paths.state_file, st)
        hp = paths.host(host.name)
        spec = _node_spec(st, host.name, i, host.address, 9200, 9300, seeds, masters, heap_mb, eligible,
                          snapshot_dir(paths, node_uid(st)))
        _prepare_node(paths, st, spec, hp)
        script = None if st.packages else _write_start_script(homes, hp, heap_mb)
        knobs = host_setup.seed_knobs(hp, scheduler)
        host_keys.append(host_setup.prepare_host_files(hp, host, knobs, paths.authorized_keys, script,
                                                  ssh_address=rec.ssh_address, service=service_of(st.product),
                                                  deploy_password=deploy_password, host_ca=paths.host_ca,
                                                  own_binds=packaged_binds(hp, st.product) if st.packages else ()))
        if st.packages:
            packaged_host_files(hp, repo, heap_mb, st.product)
        host_network.create_network(host)
        if bastion:
            host_network.create_back_network(host)
    if bastion:
        jump, line = host_power.prepare_bastion(paths, scheduler)
        st.bastion = state.HostRecord(name=jump.name, zone="", address=jump.address, http_url="",
                                      netns=jump.netns, veth=jump.veth)
        state.save(paths.state_file, st)
        host_keys.append(line)
    host_power.boot_all(paths, st, test_hosts, host_keys, service_of(st.product), say)
    if st.packages:
        say(f"installing {st.product}={homes[0].version} on every host with apt-get")
        install_packages(test_hosts, st.product, homes[0].version)
    if st.bastion is not None:
        st.bastion.unshare_pid, st.bastion.init_pid = host_power.start_host(paths.host(hosts.BASTION), jump)
        state.save(paths.state_file, st)


def packaged_binds(hp: HostPaths, product: str) -> tuple[str, ...]:
    """A packaged node's directories where the package puts them, kept in the node's directory here."""
    layout = debs.Layout(product)
    return tuple(f"{hp.node_dir / sub}:{target}" for sub, target in (
        ("config", layout.conf), ("data", layout.data), ("logs", layout.logs)))


def packaged_host_files(hp: HostPaths, repo: Path, heap_mb: int, product: str) -> None:
    """apt's source (the sandbox's repository, bound read-only into the host) and the unit's defaults."""
    sources = hp.etc_upper / "apt" / "sources.list.d"
    sources.mkdir(parents=True, exist_ok=True)
    (sources / "sandbox.list").write_text(f"deb [trusted=yes] file:{repo} ./\n")
    default = hp.etc_upper / "default"
    default.mkdir(parents=True, exist_ok=True)
    (default / product).write_text(f"{debs.HEAP_VARIABLE}={heap_mb}\n")


def install_packages(test_hosts: list[hosts.TestHost], product: str, version: str) -> None:
    """What an operator's first install does on each host, from its console (side by side)."""
    command = ("apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "
               f"-o Dpkg::Options::=--force-confold {product}={shlex.quote(version)} && "
               f"systemctl enable --now {product}")

    def install(host: hosts.TestHost) -> None:
        init = host_power.container_init(host.name)
        if init is None:
            raise SandboxError(f"test host {host.name} is not running")
        proc = subprocess.run(["nsenter", "-t", str(init), "-a", "/bin/sh", "-c", command], capture_output=True,
                              text=True, env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"})
        if proc.returncode != 0:
            raise SandboxError(f"installing {product}={version} on {host.name} failed (exit {proc.returncode}):"
                               f"\n{(proc.stderr or proc.stdout).strip()[-1500:]}")

    with ThreadPoolExecutor(max_workers=len(test_hosts)) as pool:
        list(pool.map(install, test_hosts))


def local_service(host_paths: HostPaths) -> str:
    """The command line that manages a local-mode node: the local service runner, pointed at its own files."""
    runner = host_setup.HOST_FILES / "local-service"
    return (f"SANDBOX_UNIT_DIR={shlex.quote(str(host_paths.units_dir))} "
            f"SANDBOX_RUN_DIR={shlex.quote(str(host_paths.run_dir))} {shlex.quote(str(runner))}")


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _up_local(paths: SandboxPaths, st: state.SandboxState, nodes: int, zones: int, homes: list[Home],
              heap_mb: int, say: Say, eligible: int) -> None:
    names = node_names(nodes)
    taken = [p for i in range(nodes) for p in (LOCAL_HTTP_BASE + i, LOCAL_TRANSPORT_BASE + i) if not _port_free(p)]
    if taken:
        raise SandboxError(f"ports already in use on 127.0.0.1: {', '.join(map(str, taken))}; "
                           "stop what uses them or `orchestrate sandbox down` a previous sandbox")
    seeds = [f"127.0.0.1:{LOCAL_TRANSPORT_BASE + i}" for i in range(nodes)]
    masters = names[: min(3, eligible)]
    say(f"starting {nodes} nodes on 127.0.0.1")
    for i, name in enumerate(names, start=1):
        hp = paths.host(name)
        http = LOCAL_HTTP_BASE + i - 1
        rec = state.HostRecord(name=name, zone=zone_of(i, zones), address="127.0.0.1",
                               http_url=http_url(st, "127.0.0.1", http))
        st.hosts.append(rec)
        state.save(paths.state_file, st)
        spec = _node_spec(st, name, i, "127.0.0.1", http, LOCAL_TRANSPORT_BASE + i - 1, seeds, masters, heap_mb,
                          eligible, snapshot_dir(paths))
        _prepare_node(paths, st, spec, hp)
        script = _write_start_script(homes, hp, heap_mb)
        user = str(NODE_UID) if os.geteuid() == 0 else None
        host_setup.write_unit(hp.units_dir, service_of(st.product), str(script), user)
        hp.run_dir.mkdir(parents=True, exist_ok=True)
    for name in names:
        hp = paths.host(name)
        proc = subprocess.run(f"{local_service(hp)} start {service_of(st.product)}", shell=True,
                              capture_output=True, text=True)
        if proc.returncode != 0:
            raise SandboxError(f"node {name} did not start: {proc.stderr.strip()}")


def wait_green(paths: SandboxPaths, st: state.SandboxState, nodes: int, timeout_s: float) -> None:
    from orchestrator.sandbox.rest import INSECURE, rest_for
    from orchestrator.shards.adapter import ShardClusterAdapter

    access = security.superuser_access(paths) if st.secured else INSECURE
    cluster = ShardClusterAdapter(rest_for(st.product, [h.http_url for h in st.hosts], access=access))
    started = time.monotonic()
    deadline = started + timeout_s
    last: Any = "no answer yet"
    while time.monotonic() < deadline:
        if time.monotonic() - started > 20 and not node_pids(paths, st):
            raise SandboxError(f"every {LABELS[st.product]} node exited during start-up:\n"
                               f"{first_node_error(paths, st)}")
        try:
            health = cluster.health(wait_for_status="green", wait_for_nodes=str(nodes), timeout_s=5)
            last = f"{health['status']}, {health['number_of_nodes']} nodes"
            if health["status"] == "green" and health["number_of_nodes"] == nodes and not health["timed_out"]:
                return
        except OrchestratorError as exc:
            last = str(exc)
            time.sleep(1)
    raise SandboxError(f"the sandbox cluster was not green with {nodes} nodes after {timeout_s:.0f} s; "
                       f"last seen: {last}\n{first_node_error(paths, st)}")


def first_node_error(paths: SandboxPaths, st: state.SandboxState) -> str:
    """The first ERROR a node logged, and where its log is: what an operator reads first."""
    for h in st.hosts:
        log = paths.host(h.name).node_dir / "logs" / f"{st.cluster_name}.log"
        if not log.exists():
            continue
        lines = log.read_text(errors="replace").splitlines()
        for i, line in enumerate(lines):
            if "[ERROR]" in line:
                return f"{h.name}: " + "\n".join(lines[i:i + 3]) + f"\n(full log: {log})"
    return f"no node logged an error; logs are under {paths.root / 'hosts'}"


def any_alive(paths: SandboxPaths, st: state.SandboxState) -> bool:
    if st.mode == "netns":
        return any(host_power.pid_alive(h.init_pid) for h in st.hosts)
    return bool(local_node_pids(paths, st))


def local_node_pids(paths: SandboxPaths, st: state.SandboxState) -> dict[str, int]:
    pids = {}
    for h in st.hosts:
        pid_file = paths.host(h.name).run_dir / f"{service_of(st.product)}.service.pid"
        if pid_file.exists():
            pid = int(pid_file.read_text().strip() or 0)
            if host_power.pid_alive(pid):
                pids[h.name] = pid
    return pids


def down(paths: SandboxPaths, say: Say) -> int:
    """Stop everything the sandbox started, by PID, and remove its namespaces. Idempotent."""
    st = state.load(paths.state_file)
    stopped = 0
    if st is not None:
        every = [*st.hosts, *([st.bastion] if st.bastion else [])]
        if st.mode == "netns":
            stopped = sum(1 for h in every if host_power.pid_alive(h.init_pid))
            host_power.stop_hosts([(h.name, h.init_pid) for h in every])
        for h in every:
            if st.mode == "netns":
                if h.netns:
                    host_network.delete_network(h.netns, h.veth)
            else:
                hp = paths.host(h.name)
                if hp.units_dir.parent.exists():
                    subprocess.run(f"{local_service(hp)} stop {service_of(st.product)}", shell=True,
                                   capture_output=True)
                    stopped += 1
    if os.geteuid() == 0:
        for ns in host_network.leftover_namespaces():
            host_network.delete_network(ns, None)
        host_network.delete_bridge()
    # Without its hosts, the sandbox's addresses are routed off this machine: remove what points at
    # them, so `--cluster sandbox` says "start it first" instead of sending requests away.
    for leftover in (paths.inventory, paths.ssh_config, paths.known_hosts, paths.state_file):
        leftover.unlink(missing_ok=True)
    inventory_writer.remove_published_inventory(paths)
    say(f"sandbox down: {stopped} host(s) stopped" if stopped else "sandbox down: nothing was running")
    return stopped


def reboot(paths: SandboxPaths, name: str, say: Say, timeout_s: float = 120) -> None:
    """Reboot one test host as its console's Ctrl-Alt-Del does (SIGINT to its systemd): services stop, the
    knobs return to boot defaults, the boot replays what was persisted (sysctl.d, udev rules, enabled
    units). Shows whether tuning survives a reboot."""
    st = state.load(paths.state_file)
    if st is None or st.mode != "netns":
        raise SandboxError("reboot needs a running sandbox with --hosts netns")
    rec = next((h for h in st.hosts if h.name == name), None)
    if rec is None:
        raise SandboxError(f"no host {name!r}; hosts: {', '.join(h.name for h in st.hosts)}")
    hp = paths.host(name)
    init = host_power.container_init(name)
    if init is None:
        raise SandboxError(f"host {name} is not running")
    before = hp.ready_flag.read_text().strip() if hp.ready_flag.exists() else None
    os.kill(init, signal.SIGINT)
    host_power.wait_booted(hp, name, lambda: None if host_power.pid_alive(rec.init_pid) else 1, timeout_s,
                           not_boot=before)
    say(f"{name} rebooted")


def status(paths: SandboxPaths) -> dict[str, Any]:
    st = state.load(paths.state_file)
    if st is None:
        return {"running": False}
    pids = node_pids(paths, st)
    deploy_password = paths.secret(host_setup.DEPLOY_PASSWORD) if st.mode == "netns" and st.product != "riak" else None
    if deploy_password is not None and not deploy_password.exists():
        deploy_password = None  # no such user on the hosts (host_setup.add_deploy_user)
    return {
        "running": any_alive(paths, st),
        "mode": st.mode,
        "product": st.product,
        "es_version": st.es_version,
        "versions": st.versions,
        "packages": st.packages,
        "snapshot_dir": str(paths.root / "snapshots") if st.product != "riak" else None,
        "describe": describe(st),
        "cluster_name": st.cluster_name,
        "inventory": str(paths.inventory),
        "ssh_config": str(paths.ssh_config) if st.mode == "netns" else None,
        "bastion": st.bastion.address if st.bastion else None,
        "known_hosts": str(paths.known_hosts) if st.mode == "netns" else None,
        # Only the @cert-authority line of the hosts' certificates (Elasticsearch and OpenSearch hosts).
        "known_hosts_ca": str(paths.known_hosts_ca) if st.mode == "netns" and st.product != "riak" else None,
        # The hosts' non-root user and the password sudo asks it for (host_setup.add_deploy_user).
        "deploy_user": host_setup.DEPLOY_USER if deploy_password else None,
        "deploy_password_file": str(deploy_password) if deploy_password else None,
        "endpoints": [h.http_url for h in st.hosts if h.http_url],
        **security.status_fields(paths, st.secured),
        "nodes": [{"name": h.name, "host": h.address, "zone": h.zone, "http": h.http_url, "pid": pids.get(h.name)}
                  for h in st.hosts],
    }


def node_pids(paths: SandboxPaths, st: state.SandboxState) -> dict[str, int]:
    """PIDs (as seen from here) of each node's Elasticsearch or OpenSearch JVM (or Riak stand-in daemon)."""
    if st.mode != "netns":
        return local_node_pids(paths, st)
    found: dict[str, int] = {}
    for h in st.hosts:
        for pid in host_cgroups.host_pids(h.name):
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            if any(main in cmdline for main in (*JVM_MAIN_CLASSES, RIAK_DAEMON)):
                found[h.name] = pid
    return found
