"""The Riak sandbox: test hosts that run the Riak stand-in kept in tests/fixtures/riak.

No Riak server can be installed on these machines, so each host gets `riak` and `riak-admin`
commands that reproduce Riak KV's outputs and handoff behaviour (see that file). The hosts are
the same as the Elasticsearch sandbox's: own network namespace, sshd, knobs, numad, systemctl.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

from orchestrator.errors import SandboxError
from orchestrator.sandbox import host_network, host_power, host_setup, hosts, state
from orchestrator.sandbox.layout import HostPaths, SandboxPaths
from orchestrator.sandbox.shape import SandboxShape

STANDIN_DIR = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "riak"
RING_SIZE = 16
CONFIGURED_TRANSFER_LIMIT = 2  # riak.conf's default; a run raises it and restores it
# Fast enough for tests, slow enough that handoffs are seen running (seconds per partition).
# The releases the stand-in says it is, by form (its start_erl.data and `riak-admin status`).
STANDIN_RELEASES = {"2.x": "2.9.10", "3.x": "3.2.0"}
STANDIN_ERTS = "10.7.2.8"
STANDIN_TIMES = {"boot_s": 1.5, "handoff_s": 1.5, "stop_s": 0.5}


def standin_dir() -> Path:
    found = Path(os.environ.get("ORCHESTRATOR_RIAK_STANDIN") or STANDIN_DIR)
    if not (found / "riak_standin.py").is_file():
        raise SandboxError(f"the Riak sandbox runs the Riak stand-in from a source checkout, and "
                           f"{found / 'riak_standin.py'} is missing (set ORCHESTRATOR_RIAK_STANDIN to its directory)")
    return found


def node_names(count: int) -> list[str]:
    return [f"riak-{i}" for i in range(1, count + 1)]


def cluster_dir(paths: SandboxPaths) -> Path:
    return paths.root / "riak-cluster"


def data_dir(host_paths: HostPaths) -> Path:
    return host_paths.root / "riak-data"


def _install_standin(hp: HostPaths, address: str, standin: Path, shared: Path, form: str) -> None:
    """``form``: "2.x" (`riak-admin CMD`) or "3.x" (`riak admin CMD`, a location, `ok` after commands)."""
    shutil.copy2(standin / "riak_standin.py", hp.bin_upper / "riak_standin.py")
    for tool in ("riak", "riak-admin"):
        wrapper = hp.bin_upper / tool
        wrapper.write_text(f'#!/bin/sh\nexec /usr/bin/python3 /usr/local/bin/riak_standin.py {tool} "$@"\n')
        wrapper.chmod(0o755)
    conf_dir = hp.etc_upper / "riak"
    conf_dir.mkdir(parents=True, exist_ok=True)
    (conf_dir / "riak.conf").write_text(
        f"## riak.conf of the sandbox stand-in\nnodename = riak@{address}\n"
        f"transfer_limit = {CONFIGURED_TRANSFER_LIMIT}\nring_size = {RING_SIZE}\n"
        f"platform_data_dir = {data_dir(hp)}\n")
    (conf_dir / "standin.json").write_text(json.dumps({
        "cluster_dir": str(shared), "run_dir": "/run/riak", **STANDIN_TIMES, "form": form,
        **({"location": f"rack_{address.rsplit('.', 1)[-1]}"} if form == "3.x" else {})}))
    data_dir(hp).mkdir(parents=True, exist_ok=True)
    # The installed release, where a Riak package keeps it ("ERTS_VERSION RELEASE_VERSION").
    release = hp.rootfs_upper / "usr" / "lib" / "riak" / "releases" / "start_erl.data"
    release.parent.mkdir(parents=True, exist_ok=True)
    release.write_text(f"{STANDIN_ERTS} {STANDIN_RELEASES[form]}\n")
    units = hp.etc_upper / "systemd" / "system"
    units.mkdir(parents=True, exist_ok=True)
    # Started at boot, as a packaged Riak is: `riak start` returns once the node answers pings.
    # As the Riak package's unit: `riak start` daemonizes (forking), `riak stop` stops it.
    (units / "riak.service").write_text("[Unit]\nDescription=Riak KV (sandbox stand-in)\n\n[Service]\n"
                                        "Type=forking\nExecStart=/usr/local/bin/riak start\n"
                                        "ExecStop=/usr/local/bin/riak stop\nTimeoutStopSec=60\n\n"
                                        "[Install]\nWantedBy=multi-user.target\n")
    host_setup.enable_unit(units, "riak.service")


def up_netns(paths: SandboxPaths, st: state.SandboxState, shape: SandboxShape, say: hosts.Say) -> list[str]:
    """Create and boot the hosts; return the Riak node names."""
    hosts.check_prerequisites()
    standin = standin_dir()
    shared = cluster_dir(paths)
    shutil.rmtree(shared, ignore_errors=True)
    shared.mkdir(parents=True)
    test_hosts = [hosts.TestHost(name, i, f"zone-{(i - 1) % shape.zones + 1}")
                  for i, name in enumerate(node_names(shape.nodes), start=1)]
    members = [f"riak@{h.address}" for h in test_hosts]
    (shared / "state.json").write_text(json.dumps({"ring_size": RING_SIZE, "members": members,
                                                   "claimant": members[0], "nodes": {}, "transfers": []}))
    scheduler = hosts.data_disk_scheduler(paths.root)
    nodes = shape.nodes
    say(f"creating {nodes} Riak test hosts on {hosts.SUBNET}.0/24 (Riak stand-in from {standin})")
    host_network.create_bridge()
    host_keys = []
    for host in test_hosts:
        st.hosts.append(state.HostRecord(name=host.name, zone=host.zone, address=host.address, http_url="",
                                         netns=host.netns, veth=host.veth))
        state.save(paths.state_file, st)
        hp = paths.host(host.name)
        knobs = host_setup.seed_knobs(hp, scheduler)
        host_keys.append(host_setup.prepare_host_files(hp, host, knobs, paths.authorized_keys, None))
        # The last host runs as a Riak 3.x package does (`riak admin`), as in a cluster being upgraded.
        _install_standin(hp, host.address, standin, shared, "3.x" if host is test_hosts[-1] and nodes > 1 else "2.x")
        host_network.create_network(host)
    host_power.boot_all(paths, st, test_hosts, host_keys, "riak", say)
    return members


def wait_ready(paths: SandboxPaths, members: list[str], timeout_s: float) -> None:
    """Every member up and serving riak_kv, no transfer pending."""
    deadline = time.monotonic() + timeout_s
    seen = "no state yet"
    while time.monotonic() < deadline:
        raw = json.loads((cluster_dir(paths) / "state.json").read_text())
        now = time.time()
        serving = [m for m in members if m in raw["nodes"] and raw["nodes"][m]["up"]
                   and now - raw["nodes"][m]["heartbeat"] < 2 and now >= raw["nodes"][m]["boot_at"]]
        if len(serving) == len(members) and not raw["transfers"]:
            return
        seen = f"{len(serving)} of {len(members)} nodes serving, {len(raw['transfers'])} transfer(s)"
        time.sleep(0.2)
    logs = ", ".join(str(p) for p in sorted(cluster_dir(paths).glob("*.log")))
    raise SandboxError(f"the Riak sandbox was not ready after {timeout_s:.0f} s: {seen}; logs: {logs or 'none'}")
