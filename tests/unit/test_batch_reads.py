"""A batch reads only what it is about (shards/batch_reads.py), and decides exactly as over the whole
cluster: for every batch of node and zone mode, the gate and the last look over `batch_snapshot` say what
they say over the plan's whole snapshot, through the real adapter and client against the fake
Elasticsearch (orchestrator/testing/fake_es) in cluster states that the checks refuse and accept."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace

import pytest

from orchestrator.errors import IncompleteAnswer
from orchestrator.es.connect import ElasticsearchRest
from orchestrator.restart.journal import RunOptions
from orchestrator.restart.plan import Mode, Plan
from orchestrator.shards import safety
from orchestrator.shards.adapter import ShardClusterAdapter
from orchestrator.shards.connection import Connection
from orchestrator.shards.snapshot import ShardCopy
from orchestrator.testing.fake_es.model import FakeCluster
from orchestrator.testing.fake_es.server import FakeEsServer
from tests.unit.journals import plan_of


@pytest.fixture
def fake() -> Iterator[tuple[FakeCluster, FakeEsServer, ShardClusterAdapter]]:
    cluster = FakeCluster.generate(12, copies_per_node=12, zones=2)
    cluster.create_index("solo", 1, 0)  # no replica: a batch holding it must be refused
    with FakeEsServer(cluster) as server:
        yield cluster, server, ShardClusterAdapter(ElasticsearchRest(Connection((server.url,))))


def plans(cluster: FakeCluster) -> list[Plan]:
    names = sorted(cluster.by_name, key=lambda n: int(n.split("-")[1]))
    ids = {n: cluster.by_name[n].id for n in names}
    zones = sorted({cluster.by_name[n].zone for n in names}, key=str)
    by_zone = [[n for n in names if cluster.by_name[n].zone == z] for z in zones]
    return [replace(plan_of([[n] for n in names]), node_ids=ids),
            replace(plan_of(by_zone, mode=Mode.ZONE), node_ids=ids)]


def where(copies: tuple[ShardCopy, ...], shards: set[tuple[str, int]]) -> list[tuple[str, int, str, str]]:
    """Where each copy of ``shards`` is, and its state."""
    return sorted((c.index, c.shard, c.node_id or "", c.state) for c in copies if (c.index, c.shard) in shards)


STATES: dict[str, Callable[[FakeCluster], None]] = {
    "green": lambda c: None,
    # Another node went away: its primaries were handed to replicas, now the only started copies; yellow.
    "a node away": lambda c: c.stop("es-5"),
    # As a run leaves it between its stop and its restore: allocation restricted, the copies unassigned.
    "allocation restricted": lambda c: (c.settings["persistent"].update(
        {"cluster.routing.allocation.enable": "primaries"}), c.stop("es-6"), c.start("es-6"), c.tick()),
}


@pytest.mark.parametrize("state", list(STATES))
def test_each_batch_is_decided_from_its_own_reads_as_from_the_whole_cluster(
        fake: tuple[FakeCluster, FakeEsServer, ShardClusterAdapter], state: str) -> None:
    cluster, _, adapter = fake
    STATES[state](cluster)
    whole = adapter.snapshot()
    refused = 0
    named = False
    for plan in plans(cluster):
        # The whole list says which of the plan's nodes are away, as a batch's gate reads it when one is.
        present = {n.id for n in whole.nodes}
        whole = replace(whole, absent=tuple(sorted(n for n, i in plan.node_ids.items() if i not in present)))
        for batch in plan.batches:
            mine = adapter.gate_snapshot(plan, batch.nodes)
            for options in (RunOptions(), RunOptions(allow_yellow=True), RunOptions(allow_unavailable=("solo",))):
                assert safety.gate(mine, plan, batch.nodes, options) == safety.gate(whole, plan, batch.nodes, options)
                assert safety.stop_check(mine, plan, batch.nodes, options) == \
                    safety.stop_check(whole, plan, batch.nodes, options)
            # The last look reads its proof (every copy where it is, every node asked answering): it decides as
            # the whole cluster does, and a batch whose node is away has no proof at all.
            if any(plan.node_ids[n] not in present for n in batch.nodes):
                with pytest.raises(IncompleteAnswer):
                    adapter.gate_snapshot(plan, batch.nodes, proof=True)
            else:
                proof = adapter.gate_snapshot(plan, batch.nodes, proof=True)
                for options in (RunOptions(), RunOptions(allow_unavailable=("solo",))):
                    assert safety.stop_check(proof, plan, batch.nodes, options) == \
                        safety.stop_check(whole, plan, batch.nodes, options)
                ids = {plan.node_ids[n] for n in batch.nodes}
                held = {(c.index, c.shard) for c in whole.shards if c.node_id in ids}
                assert {(c.index, c.shard) for c in proof.shards} == held, \
                    "a proof lists every copy of the shards its batch holds, and no other shard's"
                assert where(proof.shards, held) == where(whole.shards, held), "each copy where the cluster has it"
            refused += bool(safety.stop_check(mine, plan, batch.nodes, RunOptions()))
            named = named or any("(es-5 not in it)" in p for p in safety.gate(mine, plan, batch.nodes, RunOptions()))
            ids = {plan.node_ids[n] for n in batch.nodes}
            assert {c.index for c in mine.shards} == {c.index for c in whole.shards if c.node_id in ids}, \
                "the copies of the batch's own indices, no others"
    assert refused > 0, "some batch holds a copy with no other started copy (the solo index, a promoted primary)"
    assert named == (state == "a node away"), "a node away is named by the gate"


def test_a_settled_green_cluster_is_proved_safe_from_replica_counts_without_listing_other_copies(
        fake: tuple[FakeCluster, FakeEsServer, ShardClusterAdapter]) -> None:
    cluster, server, adapter = fake
    plan = plans(cluster)[0]
    server.counts.reset()
    adapter.gate_snapshot(plan, ("es-4",))
    asked = server.counts.as_json()["requests"]
    assert asked["GET /_cluster/state"] == 1 and asked["GET /{indices}/_settings"] == 1  # the elected master
    cluster.stop("es-5")  # yellow: the copies of the batch's indices are listed, wherever they are
    server.counts.reset()
    adapter.gate_snapshot(plan, ("es-4",))
    assert server.counts.as_json()["requests"]["GET /_cluster/state"] >= 2, "the elected master, the routing table"


def test_a_window_s_proof_lists_every_node_only_when_one_beyond_the_window_is_missing(
        fake: tuple[FakeCluster, FakeEsServer, ShardClusterAdapter]) -> None:
    """The nodes away are named from a list of every node in the cluster. A window's nodes are away by design,
    so its proof (asked at each admission and each last look, while nodes are away) reads that list only when a
    node beyond the window and the candidate is missing, as the window's check then says: a read that grows with
    the cluster is not made per admission. A gate of one batch at a time names them whenever one is away."""
    cluster, server, adapter = fake
    plan = plans(cluster)[0]
    cluster.stop("es-4")
    cluster.stop("es-5")

    def proof(window: list[str] | None) -> tuple[tuple[str, ...], int]:
        server.counts.reset()
        snap = adapter.gate_snapshot(plan, ("es-6",), proof=True, window=window)
        return snap.absent, server.counts.as_json()["requests"]["GET /_nodes"]

    in_window, asked = proof(["es-4", "es-5"])
    assert in_window == ()
    alone, asked_alone = proof(None)
    assert alone == ("es-4", "es-5") and asked_alone == asked + 1, "one list of every node, for the gate alone"
    assert proof(["es-5", "es-4", "es-6"]) == ((), asked), "the candidate is never away in its own proof"
    cluster.stop("es-7")  # beyond the window: named, with the window's nodes
    assert proof(["es-4", "es-5"]) == (("es-4", "es-5", "es-7"), asked_alone)
    assert proof(["es-4", "es-5", "es-7"]) == ((), asked), "in the window, it is away by design"


def test_a_deleted_index_between_two_reads_is_left_out_and_long_lists_are_sent_in_chunks(
        fake: tuple[FakeCluster, FakeEsServer, ShardClusterAdapter]) -> None:
    cluster, server, adapter = fake
    names = sorted(cluster.indices)
    copies = adapter.shards_of([*names, "deleted-meanwhile"])
    assert {c.index for c in copies} == set(names)
    assert adapter.recoveries_of(["deleted-meanwhile"], ["es-4"]) == []
    server.counts.reset()
    many = [f"an-index-with-a-long-name-{i:06d}" for i in range(400)]
    assert adapter.shards_of(many) == []
    assert server.counts.as_json()["requests"]["GET /_cluster/state"] >= 4, "in chunks: a request line is 4 KB at most"


@pytest.mark.parametrize(("replicas", "believed"), [("8", True), ("9", False)])
def test_a_replica_count_is_believed_up_to_what_the_data_nodes_hold_the_masters_not_counted(
        fake: tuple[FakeCluster, FakeEsServer, ShardClusterAdapter], replicas: str, believed: bool) -> None:
    """9 data nodes and 3 dedicated masters: a green cluster holds at most 8 replicas of a shard, one copy a data
    node. A count said past that (forged, or a setting no allocation could follow) is not believed: the batch's
    indices are listed from the routing table, and the sole copy of `solo` refuses its batch. Counting the masters
    as data nodes would believe 9 (and 11)."""
    cluster, server, adapter = fake
    plan = plans(cluster)[0]
    [solo] = cluster.indices["solo"].shards[0]
    node = next(name for name, n in cluster.by_name.items() if n.id == solo.node)
    server.forge["GET /{indices}/_settings"] = lambda answer: {
        index: {"settings": {"index": {"number_of_replicas": replicas}}} for index in answer}
    server.counts.reset()
    snap = adapter.gate_snapshot(plan, (node,))
    listed = server.counts.as_json()["requests"]["GET /_cluster/state"] >= 2  # the elected master, then routing
    assert listed is not believed
    if not believed:
        assert any("[solo][0]" in p for p in safety.gate(snap, plan, (node,), RunOptions()))


@pytest.mark.parametrize(("health", "data"), [
    ({"number_of_nodes": 12, "number_of_data_nodes": 9}, 9),
    ({"number_of_nodes": 12, "number_of_data_nodes": 0}, 0),  # every data node away: no count is believed
    ({"number_of_nodes": 12}, 12),  # a health that does not say (before the field, or a proxy's filter)
    ({"number_of_nodes": 12, "number_of_data_nodes": -1}, 12),
    ({"number_of_nodes": 12, "number_of_data_nodes": True}, 12),
    ({"number_of_nodes": 12, "number_of_data_nodes": "9"}, 12),
])
def test_the_data_nodes_are_what_health_says_else_all_its_nodes(health: dict[str, object], data: int) -> None:
    from orchestrator.shards.adapter import data_nodes, within

    assert data_nodes(health) == data
    # Believed: a count whose copies fit, one a data node; with no data node, not even none.
    held = {"i": data - 1} if data else {}
    assert within({**held, "j": data}, data_nodes(health)) == held
