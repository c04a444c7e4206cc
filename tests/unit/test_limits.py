"""The recovery limits a run raises: chosen from the nodes' processors, declared bandwidth, own
settings and Elasticsearch's defaults, each with the reason the plan shows."""

from __future__ import annotations

import json

from orchestrator.config.model import RecoveryLimits
from orchestrator.restart.plan import Mode
from orchestrator.shards.limits import CONCURRENT, PRIMARIES, RATE, chosen_limits
from orchestrator.shards.plan import build_plan
from orchestrator.shards.snapshot import ClusterSnapshot
from tests.unit.snapshots import copies, inventory, node, snapshot

GIB = 2**30
BANDWIDTH = "node.bandwidth.recovery."


def chosen(nodes: list, copies: dict[str, int] | None = None, **given: object) -> dict[str, tuple[str, str]]:
    return {lim.key: (lim.value, lim.why) for lim in chosen_limits(RecoveryLimits(**given), nodes, copies or {})}


def test_concurrency_recovers_a_nodes_copies_together_bounded_by_the_smallest_data_node() -> None:
    nodes = [node("a", processors=8), node("b", processors=2), node("m", roles=("master",), processors=1)]
    value, why = chosen(nodes, {"id-a": 20, "id-b": 12, "id-m": 0})[CONCURRENT]
    assert value == "20" and why.startswith("all of the most copies one data node holds (a: 20), at most 32 (16 per "
                                            "processor of the smallest data node (b: 2))"), why
    assert chosen(nodes, {"id-a": 90, "id-b": 90})[CONCURRENT][0] == "32"
    assert chosen(nodes, {"id-a": 1})[CONCURRENT][0] == "2", "never below Elasticsearch's 2"
    assert chosen([node("a", processors=32)], {"id-a": 500})[CONCURRENT][0] == "64", "at most 64"
    assert chosen([node("a")], {"id-a": 100})[CONCURRENT][0] == "32", "processors unknown"
    limits = chosen(nodes)
    assert limits[PRIMARIES][0] == "4", "2 processors: never below Elasticsearch's 4"
    assert chosen([node("a", processors=12)])[PRIMARIES][0] == "12"


def test_numbers_in_the_inventory_are_used_as_given() -> None:
    limits = chosen([node("a", processors=2)], {"id-a": 40}, node_concurrent_recoveries=15,
                    node_initial_primaries_recoveries=6, max_bytes_per_sec="1gb")
    assert {k: v for k, (v, _) in limits.items() if k != "indices.recovery.max_concurrent_file_chunks"} == {
        CONCURRENT: "15", PRIMARIES: "6", RATE: "1gb"}
    assert all("as the inventory says" in why for k, (_, why) in limits.items() if k in (CONCURRENT, RATE))


def test_rate_without_declared_bandwidth_is_100mb_and_says_how_to_do_better() -> None:
    value, why = chosen([node("a"), node("b")])[RATE]
    assert value == "100mb"
    assert "declare no recovery bandwidth (node.bandwidth.recovery.* in elasticsearch.yml)" in why


def test_rate_from_the_smallest_declared_bandwidth() -> None:
    fast = (("node.bandwidth.recovery.disk.read", "2gb"), ("node.bandwidth.recovery.disk.write", "2gb"),
            ("node.bandwidth.recovery.network", "10gb"))
    slow = (("node.bandwidth.recovery.disk.read", "500mb"), ("node.bandwidth.recovery.disk.write", "400mb"),
            ("node.bandwidth.recovery.network", "1gb"))
    value, why = chosen([node("a", recovery_settings=fast), node("b", recovery_settings=slow)])[RATE]
    assert value == "320mb", "80 % of b's 400mb disk write"
    assert "80% of the smallest recovery bandwidth the data nodes declare (b: 400.0 MiB/s" in why


def test_a_rate_set_for_the_cluster_never_lowers_a_nodes_own() -> None:
    declared = (("node.bandwidth.recovery.network", "1gb"),)
    value, why = chosen([node("a", recovery_settings=declared), node("b")])[RATE]
    assert value == "409mb" and why.startswith("a's own rate (40% of the 1.0 GiB/s it declares)"), why
    frozen = node("f", roles=("data_frozen",), memory_bytes=64 * GIB)
    value, why = chosen([node("a"), frozen])[RATE]
    assert value == "250mb" and "dedicated cold or frozen node with 64 GiB" in why
    small_cold = node("c", roles=("data_cold",), memory_bytes=6 * GIB)
    assert chosen([node("a"), small_cold])[RATE][0] == "100mb", "its own 60mb is lower than the run's"
    own = node("y", recovery_settings=(("indices.recovery.max_bytes_per_sec", "300mb"),))
    assert chosen([node("a"), own])[RATE] == (
        "300mb", "y's own rate (its elasticsearch.yml says 300mb): a rate set for the cluster applies to every node "
                 "and must not lower it")


def test_the_plan_shows_why_and_leaves_what_elasticsearch_already_does() -> None:
    shards = [c for shard in range(9) for c in copies("i", shard, ["a", "b"])]
    snap = snapshot([node("a", processors=2), node("b", processors=2)], shards, "a")
    plan = build_plan(inventory(["a", "b"]), snap, Mode.NODE)
    by_key = {s.key: s for s in plan.settings}
    assert by_key[CONCURRENT].during == "9" and "the most copies one data node holds (a: 9)" in by_key[CONCURRENT].why
    assert PRIMARIES not in by_key, "Elasticsearch's default 4 is what the run would set"
    assert any(n.startswith(f"{PRIMARIES} stays unset: Elasticsearch's default 4") for n in plan.notes), plan.notes
    assert by_key[RATE].during == "100mb" and by_key[RATE].why


def test_node_facts_survive_a_saved_snapshot() -> None:
    snap = snapshot([node("a", processors=2, memory_bytes=GIB, recovery_settings=((BANDWIDTH + "network", "1gb"),),
                          host_bytes_s=10**9, host_said="a 10 Gb/s link (ens5)")],
                    [], "a")
    again = ClusterSnapshot.from_json(json.loads(json.dumps(snap.to_json())))
    assert again.nodes == snap.nodes


def test_the_rate_follows_what_the_hosts_carry_and_never_binds_below_it() -> None:
    """Host profiles unlike the sandbox: the limit is 90 % of the least a data node's host carries (its
    link or its disk), so recoveries are not held below what the hardware does; what a node declares
    still wins, and a node's own higher rate is never lowered."""
    from orchestrator.hosts.capacity import HostCapacity, parse_capacity
    from orchestrator.shards.product import ShardProduct

    def on(name: str, capacity: HostCapacity) -> object:
        return node(name, host_bytes_s=capacity.bytes_s, host_said=capacity.text)

    nvme_10g = HostCapacity(link_mbit_s=10_000, link="ens5", disk="NVMe")
    assert nvme_10g.bytes_s == 1_250_000_000, "the link binds before the NVMe disk"
    value, why = chosen([on("a", nvme_10g), on("b", nvme_10g)])[RATE]
    assert value == "1072mb" and "90% of the least that a data node's host carries" in why, why
    assert "a 10 Gb/s link (ens5), an NVMe disk" in why
    ssd_25g = HostCapacity(link_mbit_s=25_000, link="bond0", disk="SSD")
    assert chosen([on("a", ssd_25g)])[RATE][0] == "386mb", "the SSD binds before 25 GbE: 90 % of 450 MB/s"
    hdd_1g = HostCapacity(link_mbit_s=1_000, link="eth0", disk="HDD")
    value, why = chosen([on("a", nvme_10g), on("b", hdd_1g)])[RATE]
    assert value == "107mb" and "(b's, 119.2 MiB/s: a 1 Gb/s link (eth0), an HDD disk" in why, why
    value, why = chosen([on("a", hdd_1g), node("b")])[RATE]
    assert value == "107mb" and "1 of 2 data nodes' hosts read, the others taken as alike" in why
    declared = (("node.bandwidth.recovery.network", "2gb"),)
    assert chosen([node("a", recovery_settings=declared, host_bytes_s=10**8, host_said="x")])[RATE][0] == "1638mb"
    own = node("y", recovery_settings=(("indices.recovery.max_bytes_per_sec", "300mb"),), host_bytes_s=10**8,
               host_said="a 1 Gb/s link (eth0)")
    assert chosen([own])[RATE][0] == "300mb", "its own rate is higher than its host's share"
    # Read on the host as the plan reads it, then given to the snapshot by inventory name.
    said = parse_capacity("link eth0 -1\nlink ens5 10000\nlink ens6 1000\ndisk nvme0n1p2 0\ndisk sdb1 1\n"
                          "disk proc \nkernel btime 1795500000 cpus 8\n")
    assert said == HostCapacity(link_mbit_s=10_000, link="ens5", disk="HDD"), "the slowest data disk"
    assert parse_capacity("link veth0 \ndisk  \n") == HostCapacity(), "nothing readable: nothing assumed"
    ssd_only = parse_capacity("disk dm-0 0\n")
    assert ssd_only == HostCapacity(disk="SSD") and ssd_only.bytes_s == 450 * 10**6
    snap = snapshot([node("a"), node("b")], [], "a")
    read = ShardProduct().with_host_capacity(inventory(["a", "b"]), snap, {"a": nvme_10g, "b": HostCapacity()})
    assert [(n.host_bytes_s, n.host_said) for n in read.nodes] == [(1_250_000_000, nvme_10g.text), (None, "")]
