"""`sandbox up --hosts local`: the nodes as processes of this machine on 127.0.0.1, each with its
own ports, started and stopped by a small service script (no test hosts, no root needed).
"""

from __future__ import annotations

import os
import shlex
import socket
import subprocess

from orchestrator.errors import SandboxError
from orchestrator.sandbox import (
    host_power,
    host_setup,
    state,
)
from orchestrator.sandbox.hosts import Say
from orchestrator.sandbox.layout import HostPaths, SandboxPaths
from orchestrator.sandbox.node_setup import (
    NODE_UID,
    Home,
    http_url,
    node_names,
    node_spec,
    prepare_node,
    service_of,
    snapshot_dir,
    write_start_script,
    zone_of,
)
from orchestrator.sandbox.shape import SandboxShape

LOCAL_HTTP_BASE = 19200


LOCAL_TRANSPORT_BASE = 19300


def local_service(host_paths: HostPaths) -> str:
    """The command line that manages a local-mode node: the local service runner, pointed at its own files."""
    runner = host_setup.HOST_FILES / "local-service"
    return (f"SANDBOX_UNIT_DIR={shlex.quote(str(host_paths.units_dir))} "
            f"SANDBOX_RUN_DIR={shlex.quote(str(host_paths.run_dir))} {shlex.quote(str(runner))}")


def port_free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def up_local(paths: SandboxPaths, st: state.SandboxState, shape: SandboxShape, homes: list[Home], say: Say) -> None:
    nodes, zones, heap_mb, eligible = shape.nodes, shape.zones, shape.heap_mb, shape.eligible
    names = node_names(nodes)
    taken = [p for i in range(nodes) for p in (LOCAL_HTTP_BASE + i, LOCAL_TRANSPORT_BASE + i) if not port_free(p)]
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
        spec = node_spec(st, name, i, "127.0.0.1", http, LOCAL_TRANSPORT_BASE + i - 1, seeds, masters, heap_mb,
                          eligible, snapshot_dir(paths))
        prepare_node(paths, st, spec, hp)
        script = write_start_script(homes, hp, heap_mb)
        user = str(NODE_UID) if os.geteuid() == 0 else None
        host_setup.write_unit(hp.units_dir, service_of(st.product), str(script), user)
        hp.run_dir.mkdir(parents=True, exist_ok=True)
    for name in names:
        hp = paths.host(name)
        proc = subprocess.run(f"{local_service(hp)} start {service_of(st.product)}", shell=True,
                              capture_output=True, text=True)
        if proc.returncode != 0:
            raise SandboxError(f"node {name} did not start: {proc.stderr.strip()}")


def local_node_pids(paths: SandboxPaths, st: state.SandboxState) -> dict[str, int]:
    pids = {}
    for h in st.hosts:
        pid_file = paths.host(h.name).run_dir / f"{service_of(st.product)}.service.pid"
        if pid_file.exists():
            pid = int(pid_file.read_text().strip() or 0)
            if host_power.pid_alive(pid):
                pids[h.name] = pid
    return pids
