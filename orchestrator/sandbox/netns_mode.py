"""`sandbox up` with test hosts (the default as root): a host per node, booted, each node a unit of
its systemd, from the assembled home or (with --packages) from the sandbox's apt repository.
"""

from __future__ import annotations

import shlex
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from orchestrator.errors import SandboxError
from orchestrator.sandbox import (
    debs,
    host_network,
    host_power,
    host_setup,
    hosts,
    state,
)
from orchestrator.sandbox.assemble import cache_root
from orchestrator.sandbox.hosts import Say
from orchestrator.sandbox.layout import HostPaths, SandboxPaths
from orchestrator.sandbox.node_setup import (
    LABELS,
    Home,
    http_url,
    node_names,
    node_spec,
    node_uid,
    prepare_node,
    service_of,
    snapshot_dir,
    write_start_script,
    zone_of,
)
from orchestrator.sandbox.shape import SandboxShape


def up_netns(paths: SandboxPaths, st: state.SandboxState, shape: SandboxShape, homes: list[Home], say: Say) -> None:
    names = node_names(shape.nodes)
    heap_mb, eligible, bastion = shape.heap_mb, shape.eligible, shape.bastion
    test_hosts = [hosts.TestHost(name, i, zone_of(i, shape.zones)) for i, name in enumerate(names, start=1)]
    seeds = [f"{h.address}:9300" for h in test_hosts]
    masters = names[: min(3, eligible)]
    scheduler = hosts.data_disk_scheduler(paths.root)
    say(f"creating {shape.nodes} test hosts on {hosts.SUBNET}.0/24"
        + (", SSH only through a bastion" if bastion else "")
        + (f", each limited to {shape.host_cpus:g} CPU" if shape.host_cpus else ""))
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
        spec = node_spec(st, host.name, i, host.address, 9200, 9300, seeds, masters, heap_mb, eligible,
                          snapshot_dir(paths, node_uid(st)))
        prepare_node(paths, st, spec, hp)
        script = None if st.packages else write_start_script(homes, hp, heap_mb)
        knobs = host_setup.seed_knobs(hp, scheduler)
        host_keys.append(host_setup.prepare_host_files(hp, host, knobs, paths.authorized_keys, script,
                                                  ssh_address=rec.ssh_address, service=service_of(st.product),
                                                  deploy_password=deploy_password, host_ca=paths.host_ca,
                                                  own_binds=packaged_binds(hp, st.product) if st.packages else (),
                                                  cpus=st.host_cpus))
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
