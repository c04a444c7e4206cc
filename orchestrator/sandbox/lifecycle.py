"""`sandbox up | down | status`: a real Elasticsearch cluster in test hosts, started and stopped by PID."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from orchestrator.errors import OrchestratorError, SandboxError
from orchestrator.paths import state_root
from orchestrator.sandbox import (
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
from orchestrator.sandbox.assemble import cache_root, ensure_es_home
from orchestrator.sandbox.inventory_writer import write_inventory, write_ssh_files
from orchestrator.sandbox.layout import SandboxPaths
from orchestrator.sandbox.local_mode import local_node_pids, local_service, up_local
from orchestrator.sandbox.netns_mode import up_netns
from orchestrator.sandbox.node_setup import CLUSTER_NAME, LABELS, Home, service_of
from orchestrator.sandbox.opensearch_home import ensure_opensearch_home
from orchestrator.sandbox.rootfs import ensure_rootfs
from orchestrator.sandbox.shape import SandboxShape

Say = hosts.Say


RIAK_DAEMON = b"riak_standin.py\x00daemon"


JVM_MAIN_CLASSES = (b"SandboxLauncher", b"org.opensearch.bootstrap.OpenSearch")  # how a node's JVM is found


def describe(st: state.SandboxState) -> str:
    return "Riak stand-in" if st.product == "riak" else f"{LABELS[st.product]} {st.es_version}"


def up(paths: SandboxPaths, shape: SandboxShape, timeout_s: float, say: Say) -> state.SandboxState:
    """Build and start the sandbox of ``shape``; refused before anything is touched when the shape cannot be
    built or a sandbox is running."""
    problems = shape.problems()
    if problems:
        raise SandboxError(problems[0])
    nodes, zones, mode, product = shape.nodes, shape.zones, shape.mode, shape.product
    es_version, secured = shape.es_version, shape.secured
    existing = state.load(paths.state_file)
    if existing is not None and any_alive(paths, existing):
        raise SandboxError(f"a sandbox is already running ({len(existing.hosts)} nodes, {describe(existing)}); "
                           "`orchestrate sandbox down` stops it")
    if existing is not None or (mode == "netns" and os.geteuid() == 0 and host_network.leftover_namespaces()):
        say("cleaning up what an earlier sandbox left behind")
        down(paths, say)
    if mode == "netns":
        hosts.check_prerequisites()
        host_cgroups.check_cpu_quota(shape.host_cpus)
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
                            versions=[h.version for h in homes], secured=secured, packages=shape.packages,
                            host_cpus=shape.host_cpus)
    paths.root.mkdir(parents=True, exist_ok=True)
    os.chmod(paths.root, 0o755)
    if secured:
        security.prepare(paths)
    write_ssh_files(paths, [], mode)  # the client key exists before any host is prepared
    try:
        if es_home is None:
            members = riak.up_netns(paths, st, shape, say)
            say(f"waiting for {nodes} Riak nodes to serve riak_kv")
            riak.wait_ready(paths, members, timeout_s)
        elif mode == "netns":
            up_netns(paths, st, shape, homes, say)
        else:
            up_local(paths, st, shape, homes, say)
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


@dataclass(frozen=True)
class NodeStatus:
    name: str
    host: str
    zone: str
    http: str
    pid: int | None  # its JVM (or Riak daemon) as seen from here; None: not running


@dataclass(frozen=True)
class SandboxStatus:
    """What `sandbox status` says of the sandbox: what runs, and what scripts and tests need to reach it (its
    inventory, ssh config, known hosts, the hosts' non-root user, a secured sandbox's CA and users). ``state``
    None: no sandbox."""

    running: bool
    state: state.SandboxState | None = None
    paths: SandboxPaths | None = None
    nodes: tuple[NodeStatus, ...] = ()
    deploy_password_file: Path | None = None

    @property
    def endpoints(self) -> list[str]:
        return [h.http_url for h in self.state.hosts if h.http_url] if self.state else []

    def as_json(self) -> dict[str, Any]:
        """`sandbox status --json`: one object (`{"running": false}` without a sandbox)."""
        st, paths = self.state, self.paths
        if st is None or paths is None:
            return {"running": False}
        netns, shards = st.mode == "netns", st.product != "riak"
        return {
            "running": self.running,
            "mode": st.mode,
            "product": st.product,
            "es_version": st.es_version,
            "versions": st.versions,
            "packages": st.packages,
            "host_cpus": st.host_cpus or None,
            "snapshot_dir": str(paths.root / "snapshots") if shards else None,
            "describe": describe(st),
            "cluster_name": st.cluster_name,
            "inventory": str(paths.inventory),
            "ssh_config": str(paths.ssh_config) if netns else None,
            "bastion": st.bastion.address if st.bastion else None,
            "known_hosts": str(paths.known_hosts) if netns else None,
            # Only the @cert-authority line of the hosts' certificates (Elasticsearch and OpenSearch hosts).
            "known_hosts_ca": str(paths.known_hosts_ca) if netns and shards else None,
            # The hosts' non-root user and the password sudo asks it for (host_setup.add_deploy_user).
            "deploy_user": host_setup.DEPLOY_USER if self.deploy_password_file else None,
            "deploy_password_file": str(self.deploy_password_file) if self.deploy_password_file else None,
            "endpoints": self.endpoints,
            **security.status_fields(paths, st.secured),
            "nodes": [asdict(n) for n in self.nodes],
        }


def status(paths: SandboxPaths) -> SandboxStatus:
    st = state.load(paths.state_file)
    if st is None:
        return SandboxStatus(running=False)
    pids = node_pids(paths, st)
    deploy_password = paths.secret(host_setup.DEPLOY_PASSWORD) if st.mode == "netns" and st.product != "riak" else None
    if deploy_password is not None and not deploy_password.exists():
        deploy_password = None  # no such user on the hosts (host_setup.add_deploy_user)
    return SandboxStatus(running=any_alive(paths, st), state=st, paths=paths,
                         nodes=tuple(NodeStatus(h.name, h.address, h.zone, h.http_url, pids.get(h.name))
                                     for h in st.hosts),
                         deploy_password_file=deploy_password)


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
