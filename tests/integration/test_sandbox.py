"""The sandbox is a real cluster: real JVMs, real sshd, per-host knobs, and nothing left behind."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from orchestrator.sandbox.rootfs import SERVICE_ACCOUNTS
from tests.helpers import assert_no_traceback, orchestrate
from tests.integration.conftest import NINE_NODES_THREE_ZONES, SandboxManager, Shape, es_client

REAL_KNOBS = ["/sys/kernel/mm/transparent_hugepage/enabled", "/sys/kernel/mm/transparent_hugepage/defrag",
              "/proc/sys/vm/zone_reclaim_mode", "/proc/sys/vm/swappiness", "/proc/sys/vm/max_map_count"]


def real_knob_values() -> dict[str, str]:
    return {k: Path(k).read_text() for k in REAL_KNOBS if Path(k).exists()}


def ssh(info: dict, node: str, command: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ssh", "-F", info["ssh_config"], node, command], capture_output=True, text=True,
                          timeout=timeout)


def wait_for(predicate, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


def test_three_nodes_form_a_green_cluster(sandboxes: SandboxManager) -> None:
    info = sandboxes.get(Shape())
    assert {"inventory", "ssh_config", "endpoints", "nodes"} <= info.keys()
    assert [n["name"] for n in info["nodes"]] == ["es-1", "es-2", "es-3"]
    assert all(isinstance(n["pid"], int) and n["pid"] > 1 for n in info["nodes"])
    health = es_client(info).cluster.health()
    assert health["status"] == "green" and health["number_of_nodes"] == 3
    # Each node is its own JVM process, run by its unit's unprivileged service account `elasticsearch`.
    for node in info["nodes"]:
        assert os.stat(f"/proc/{node['pid']}").st_uid == SERVICE_ACCOUNTS["elasticsearch"]
    assert len({n["pid"] for n in info["nodes"]}) == 3


def test_node_stopped_and_started_over_ssh_rejoins(sandboxes: SandboxManager) -> None:
    info = sandboxes.get(Shape())
    es = es_client(info)
    es.indices.create(index="rejoin-test", settings={"number_of_shards": 3, "number_of_replicas": 1})
    es.cluster.health(index="rejoin-test", wait_for_status="green", timeout="60s")
    old_pid = next(n["pid"] for n in info["nodes"] if n["name"] == "es-2")
    stop = ssh(info, "es-2", "systemctl stop elasticsearch && systemctl is-active elasticsearch")
    assert stop.returncode == 3 and stop.stdout.strip() == "inactive", stop
    wait_for(lambda: es.cluster.health()["number_of_nodes"] == 2, 60, "es-2 to leave")
    start = ssh(info, "es-2", "systemctl start elasticsearch && systemctl is-active elasticsearch")
    assert start.returncode == 0, start
    health = es.cluster.health(wait_for_nodes="3", wait_for_status="green", timeout="90s")
    assert health["status"] == "green" and not health["timed_out"]
    new_pid = next(n["pid"] for n in sandboxes.status()["nodes"] if n["name"] == "es-2")
    assert new_pid != old_pid
    es.indices.delete(index="rejoin-test")


def test_a_host_that_answers_without_end_is_read_no_further_than_the_cap(sandboxes: SandboxManager) -> None:
    """L4 (issue 56): a host's output was read whole before any bound (3 hosts x 50 MB took 805 MB). Over the real
    sshd of a test host, a command printing 40 MiB is refused past the cap, and the host answers the next
    command as usual."""
    from orchestrator.config.inventory import load_inventory
    from orchestrator.errors import HostError
    from orchestrator.hosts.transport import MAX_OUTPUT_BYTES
    from orchestrator.runs.target import transport_of

    info = sandboxes.get(Shape())
    inv, _ = load_inventory(None, Path(info["inventory"]))
    transport = transport_of(inv)
    try:
        node = inv.node("es-1")
        with pytest.raises(HostError, match="answered more than 16 MiB"):
            transport.run(node, f"head -c {40 * 2**20} /dev/zero", 60)
        said = transport.run(node, f"head -c {MAX_OUTPUT_BYTES} /dev/zero | wc -c", 60)
        assert said.ok and said.stdout.strip() == str(MAX_OUTPUT_BYTES)
    finally:
        transport.close()


def test_numad_runs_and_stops_per_host(sandboxes: SandboxManager) -> None:
    # Restart tests before this one tuned the hosts (numad stopped): started again, as a boot would.
    info = sandboxes.get(Shape())
    for host in ("es-1", "es-2"):
        assert ssh(info, host, "systemctl start numad").returncode == 0
    assert ssh(info, "es-1", "pgrep -x numad && pidof numad").returncode == 0
    assert ssh(info, "es-1", "systemctl stop numad; pgrep -x numad").returncode == 1
    assert ssh(info, "es-2", "pgrep -x numad").returncode == 0
    assert ssh(info, "es-1", "systemctl start numad").returncode == 0


def test_knob_write_changes_one_host_and_never_the_machine(sandboxes: SandboxManager) -> None:
    info = sandboxes.get(Shape())
    before = real_knob_values()
    thp = "/sys/kernel/mm/transparent_hugepage/enabled"
    for host in ("es-1", "es-2"):  # back to the boot default, whatever earlier tests tuned
        assert ssh(info, host, f"echo '[always] madvise never' > {thp}").returncode == 0
    assert ssh(info, "es-1", f"cat {thp}").stdout == "[always] madvise never\n"
    assert ssh(info, "es-1", f"echo never > {thp} && echo 0 > /proc/sys/vm/zone_reclaim_mode").returncode == 0
    assert ssh(info, "es-1", f"cat {thp}").stdout.strip() == "never"
    assert ssh(info, "es-2", f"cat {thp}").stdout == "[always] madvise never\n"
    # A knob that is not overlaid cannot be written at all from inside a host.
    blocked = ssh(info, "es-1", "echo 5 > /proc/sys/vm/overcommit_ratio")
    assert blocked.returncode != 0 and "Read-only file system" in blocked.stderr
    assert real_knob_values() == before
    ssh(info, "es-1", f"echo '[always] madvise never' > {thp}; echo 1 > /proc/sys/vm/zone_reclaim_mode")


def test_second_up_is_refused_clearly(sandboxes: SandboxManager) -> None:
    sandboxes.get(Shape())
    proc = orchestrate("sandbox", "up")
    assert proc.returncode == 3
    assert "already running" in proc.stderr
    assert_no_traceback(proc)


def test_bad_arguments_are_clear_errors() -> None:
    proc = orchestrate("sandbox", "up", "--nodes", "2", "--zones", "3")
    assert proc.returncode == 3 and "--zones" in proc.stderr
    assert_no_traceback(proc)


@pytest.mark.sandbox_shape("zones")
def test_nine_nodes_in_three_zones_keep_copies_apart_with_three_masters(sandboxes: SandboxManager) -> None:
    info = sandboxes.get(NINE_NODES_THREE_ZONES)
    zones = [n["zone"] for n in info["nodes"]]
    assert sorted(zones) == ["zone-1"] * 3 + ["zone-2"] * 3 + ["zone-3"] * 3
    es = es_client(info)
    eligible = sorted(row["name"] for row in es.cat.nodes(format="json", h="name,node.role")
                      if "m" in row["node.role"])
    assert eligible == ["es-1", "es-2", "es-3"]
    es.indices.create(index="aware", settings={"number_of_shards": 9, "number_of_replicas": 1})
    es.cluster.health(index="aware", wait_for_status="green", timeout="90s")
    zone_of_node = {n["name"]: n["zone"] for n in info["nodes"]}
    copies: dict[str, list[str]] = {}
    for row in es.cat.shards(index="aware", format="json", h="shard,node"):
        copies.setdefault(row["shard"], []).append(zone_of_node[row["node"]])
    assert len(copies) == 9
    for shard, shard_zones in copies.items():
        assert len(set(shard_zones)) == 2, f"shard {shard} has both copies in {shard_zones}"
    es.indices.delete(index="aware")


@pytest.mark.sandbox_shape("host-cpus")
def test_a_host_limited_in_cpu_keeps_its_node_within_the_quota_across_a_restart_and_down_removes_it(
        sandboxes: SandboxManager) -> None:
    """`up --host-cpus 0.5`: the host's CPU cgroup has the quota; the node's JVM is in it, and so is the new
    JVM after a restart over SSH (the host's systemd starts it inside the quota); two busy loops in the host
    are throttled to it; `down` removes the cgroup."""
    info = sandboxes.get(Shape(nodes=1, secured=False, host_cpus=0.5))
    assert info["host_cpus"] == 0.5
    group = Path("/sys/fs/cgroup/cpu/orch-es-1")
    assert (group / "cpu.cfs_quota_us").read_text().strip() == "50000"
    assert (group / "cpu.cfs_period_us").read_text().strip() == "100000"

    def in_the_quota(pid: int) -> bool:
        return ":cpu:/orch-es-1\n" in Path(f"/proc/{pid}/cgroup").read_text() + "\n"

    assert in_the_quota(info["nodes"][0]["pid"])
    assert ssh(info, "es-1", "systemctl restart elasticsearch").returncode == 0
    wait_for(lambda: sandboxes.status()["nodes"][0]["pid"] not in (None, info["nodes"][0]["pid"]), 60,
             "the node's new JVM")
    assert in_the_quota(sandboxes.status()["nodes"][0]["pid"])
    def throttled() -> int:
        return int(next(line.split()[1] for line in (group / "cpu.stat").read_text().splitlines()
                        if line.startswith("nr_throttled ")))

    before = throttled()
    busy = ssh(info, "es-1", "for i in 1 2; do timeout 2 sh -c 'while :; do :; done' & done; wait; "
                             "cat /proc/loadavg", timeout=30)
    assert busy.returncode == 0, busy.stderr
    after = throttled()
    assert after - before >= 10, (before, after)  # 2 s of two busy CPUs against half of one: throttled often
    sandboxes.down()
    assert not group.exists(), "down removes the host's CPU cgroup"


@pytest.mark.sandbox_last
def test_down_leaves_nothing_behind(sandboxes: SandboxManager) -> None:
    info = sandboxes.get(Shape())
    pids = [n["pid"] for n in info["nodes"]]
    down = orchestrate("sandbox", "down")
    sandboxes.forget()
    assert down.returncode == 0, down.stderr
    for pid in pids:
        assert not Path(f"/proc/{pid}").exists(), f"node process {pid} is still running"
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert "orch-" not in netns
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    assert "orch-br0" not in links and " orv" not in links
    mounts = Path("/proc/mounts").read_text()
    assert "/orchestrator/sandbox" not in mounts
    # Nothing points at the sandbox's addresses any more (they would be routed off this machine).
    assert not Path(info["inventory"]).exists()
    published = Path(os.environ.get("ORCHESTRATOR_CONFIG_HOME") or Path.home() / ".config" / "orchestrator")
    assert not (published / "clusters" / "sandbox.yaml").exists(), "the published inventory is removed too"
    gone = orchestrate("plan", "--cluster", "sandbox")
    assert gone.returncode == 2 and "sandbox up" in gone.stderr
    again = orchestrate("sandbox", "down")
    assert again.returncode == 0 and "nothing was running" in again.stderr
