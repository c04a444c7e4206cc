"""The last look before a stop is a proof, never vacuous (issue 56, H2 and M1, M3): a node is stopped only
when each shard it holds is shown to have a started copy on a node outside its batch that the cluster lists.
What was asked and not answered is never "holds nothing"; one forged field does not make a proof. Through the
real adapter and client against the fake Elasticsearch, whose answers a test forges field by field; and a
whole run over it, whose fake hosts say which nodes were really stopped."""

from __future__ import annotations

import copy
import random
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestrator.errors import ClusterError, IncompleteAnswer
from orchestrator.es.connect import ElasticsearchRest
from orchestrator.restart.journal import RunOptions
from orchestrator.restart.plan import Plan
from orchestrator.shards import safety
from orchestrator.shards.adapter import ShardClusterAdapter
from orchestrator.shards.connection import Connection
from orchestrator.testing.fake_es.model import STARTED, FakeCluster
from orchestrator.testing.fake_es.server import FakeEsServer
from tests.unit.journals import plan_of

SOLO = "fresh-solo"  # an index with no replica, created once the plan was made


def only_copy_on(cluster: FakeCluster, index: str, node: str) -> None:
    """A new index of one shard and no replica, its only copy on ``node``."""
    with cluster.lock:
        cluster.create_index(index, 1, 0)
        [only] = cluster.indices[index].shards[0]
        cluster.on_node[only.node].discard(only)  # type: ignore[index]
        only.node = cluster.by_name[node].id
        cluster.on_node[only.node].add(only)


@pytest.fixture
def fake() -> Iterator[tuple[FakeCluster, FakeEsServer, ShardClusterAdapter, Plan]]:
    cluster = FakeCluster.generate(6, copies_per_node=6)
    names = sorted(cluster.by_name)
    plan = replace(plan_of([[n] for n in names]), node_ids={n: cluster.by_name[n].id for n in names})
    with FakeEsServer(cluster) as server:
        yield cluster, server, ShardClusterAdapter(ElasticsearchRest(Connection((server.url,)))), plan


def last_look(adapter: ShardClusterAdapter, plan: Plan, node: str) -> list[str]:
    """What the engine's last look says before ``node`` stops (its problems: empty means it stops)."""
    return safety.stop_check(adapter.gate_snapshot(plan, (node,), proof=True), plan, (node,), RunOptions())


def truly_lonely(cluster: FakeCluster, node: str) -> list[tuple[str, int]]:
    """From the fake's own state: shards ``node`` holds with no started copy on any other node that is up."""
    node_id = cluster.by_name[node].id
    up = {n.id for n in cluster.nodes.values() if n.up}
    return sorted((c.index, c.shard) for c in cluster.on_node[node_id]
                  if not any(o.state == STARTED and o.node in up and o.node != node_id
                             for o in cluster.indices[c.index].shards[c.shard]))


def test_a_node_whose_stats_fail_has_no_proof_and_is_never_taken_to_hold_nothing(
        fake: tuple[FakeCluster, FakeEsServer, ShardClusterAdapter, Plan]) -> None:
    """H2: Elasticsearch answers 200 with `_nodes.failed: 1` and the node left out; under the tool's filter the
    answer was `{}`, read as "holds no copy". Now it is IncompleteAnswer, at the gate (a wait rides it out) and
    at the last look."""
    cluster, _, adapter, plan = fake
    only_copy_on(cluster, SOLO, "es-2")
    assert last_look(adapter, plan, "es-2"), "with every node answering, the sole copy refuses the stop"
    cluster.stats_failing = {cluster.by_name["es-2"].id}
    for proof in (True, False):
        with pytest.raises(IncompleteAnswer, match="1 node of the 1 asked did not answer"):
            adapter.gate_snapshot(plan, ("es-2",), proof=proof)
    assert adapter.held_by([cluster.by_name["es-2"].id]) == {}, "a figure may read it as none; a proof may not"


def test_a_node_back_under_another_id_has_no_proof(
        fake: tuple[FakeCluster, FakeEsServer, ShardClusterAdapter, Plan]) -> None:
    """H2: the node's copies came back under another node id (its data path wiped): asked by the plan's id,
    it is not in the answer. The gate counts nodes (it waits for one away); the last look refuses."""
    cluster, _, adapter, plan = fake
    only_copy_on(cluster, SOLO, "es-2")
    stale = replace(plan, node_ids={**plan.node_ids, "es-2": "an-id-from-before-the-wipe"})
    with pytest.raises(IncompleteAnswer, match="an-id-from-before-the-wipe are not in the cluster's answer"):
        adapter.gate_snapshot(stale, ("es-2",), proof=True)


def forged_replicas(answer: Any) -> Any:
    return {index: {"settings": {"index": {"number_of_replicas": "1"}}} for index in answer}


def started_on_a_node_that_is_not(answer: Any) -> Any:
    forged = copy.deepcopy(answer)
    for body in forged.get("routing_table", {}).get("indices", {}).values():
        for listed in body.get("shards", {}).values():
            listed.append({"state": "STARTED", "primary": False, "node": "a-node-the-cluster-does-not-have"})
    return forged


def batch_copies_initializing(answer: Any) -> Any:
    forged = copy.deepcopy(answer)
    for node in forged.get("nodes", {}).values():
        for entries in node.get("indices", {}).get("shards", {}).values():
            for entry in entries:
                for held in entry.values():
                    held.setdefault("routing", {})["state"] = "INITIALIZING"
    return forged


@pytest.mark.parametrize("forgery", [
    ("GET /{indices}/_settings", forged_replicas),  # 1 replica said of an index that has none
    ("GET /_cluster/state", started_on_a_node_that_is_not),  # a started copy on a node id the cluster lacks
])
def test_one_forged_field_does_not_prove_a_sole_copy_safe(
        fake: tuple[FakeCluster, FakeEsServer, ShardClusterAdapter, Plan],
        forgery: tuple[str, Callable[[Any], Any]]) -> None:
    """M1: each forgery once gave the sole copy's node a stop; the last look still refuses it."""
    cluster, server, adapter, plan = fake
    only_copy_on(cluster, SOLO, "es-2")
    label, forge = forgery
    server.forge[label] = forge
    problems = last_look(adapter, plan, "es-2")
    assert problems and f"[{SOLO}][0]" in problems[0]


def test_a_copy_its_node_leaves_out_of_its_answer_is_still_held_where_the_master_assigns_it(
        fake: tuple[FakeCluster, FakeEsServer, ShardClusterAdapter, Plan]) -> None:
    """A node whose stats leave out its sole copy does not have it proven by omission: the last look also reads
    what the elected master assigns the batch's nodes, and the sole copy there refuses the stop."""
    cluster, server, adapter, plan = fake
    only_copy_on(cluster, SOLO, "es-2")

    def without_the_sole_copy(answer: Any) -> Any:
        forged = copy.deepcopy(answer)
        for node in forged.get("nodes", {}).values():
            node.get("indices", {}).get("shards", {}).pop(SOLO, None)
        return forged

    server.forge["GET /_nodes/stats"] = without_the_sole_copy
    problems = last_look(adapter, plan, "es-2")
    assert problems and f"[{SOLO}][0]" in problems[0]


def test_a_batch_copy_said_initializing_in_a_settled_green_cluster_is_an_answer_that_contradicts_itself(
        fake: tuple[FakeCluster, FakeEsServer, ShardClusterAdapter, Plan]) -> None:
    """M1: every copy of a settled green cluster is started; a batch copy said otherwise is the cluster's error
    (its sole copy, said initializing, escaped a check that looks only at started copies)."""
    cluster, server, adapter, plan = fake
    only_copy_on(cluster, SOLO, "es-2")
    server.forge["GET /_nodes/stats"] = batch_copies_initializing
    with pytest.raises(ClusterError, match=r"list the batch's shard copies: .*health says green with nothing moving, "
                                           r"yet"):
        adapter.gate_snapshot(plan, ("es-2",), proof=True)


def test_a_batch_copy_said_initializing_with_no_started_copy_elsewhere_is_refused_in_a_yellow_cluster(
        fake: tuple[FakeCluster, FakeEsServer, ShardClusterAdapter, Plan]) -> None:
    """M1, where the cluster is not settled green (another node away): the sole copy said initializing is not a
    started copy the stop would lose, yet nothing else holds its shard started; the proof wants one."""
    cluster, server, adapter, plan = fake
    only_copy_on(cluster, SOLO, "es-2")
    cluster.stop("es-6")
    server.forge["GET /_nodes/stats"] = batch_copies_initializing
    problems = last_look(adapter, plan, "es-2")
    assert problems and f"[{SOLO}][0]" in problems[0]


def test_a_replica_count_past_the_data_nodes_is_not_believed_and_costs_nothing(
        fake: tuple[FakeCluster, FakeEsServer, ShardClusterAdapter, Plan]) -> None:
    """M3: `number_of_replicas: "99999999999"` made the gate build that many copies (MemoryError, exit 70,
    allocation left restricted). A count no green cluster can hold is not believed: that index is listed."""
    cluster, server, adapter, plan = fake
    only_copy_on(cluster, SOLO, "es-2")
    server.forge["GET /{indices}/_settings"] = lambda answer: {
        index: {"settings": {"index": {"number_of_replicas": "99999999999"}}} for index in answer}
    snap = adapter.gate_snapshot(plan, ("es-2",))
    assert len(snap.shards) < 1000
    assert safety.gate(snap, plan, ("es-2",), RunOptions()), "the sole copy, listed, refuses the batch"


# --- a hostile cluster, any field of the proof's answers -------------------------------------------------------
PROOF_READS = ("GET /_nodes/stats", "GET /_cluster/state", "GET /{indices}/_settings", "GET /_nodes",
               "GET /_cluster/health")
STATES = ("STARTED", "INITIALIZING", "RELOCATING", "UNASSIGNED", "started", "")


def mangle(answer: Any, rng: random.Random) -> Any:
    """``answer`` with a few of its leaves changed, dropped or added, as a lying node would (drawn from ``rng``:
    the server answers from its own threads, where hypothesis draws nothing)."""
    forged = copy.deepcopy(answer)

    def walk(value: Any) -> Any:
        if isinstance(value, dict):
            for key in list(value):
                if rng.randrange(10) == 0:
                    del value[key]
                else:
                    value[key] = walk(value[key])
            if rng.randrange(8) == 0:
                value[rng.choice(["zz-node", "0", "1", "7", "state", "node"])] = rng.choice(
                    ["STARTED", True, {}, [], 1, "zz-node"])
            return value
        if isinstance(value, list):
            return [walk(v) for v in value] + ([copy.deepcopy(value[0])] if value and rng.randrange(6) == 0 else [])
        if rng.randrange(5) == 0:
            return rng.choice([*STATES, "green", "yellow", True, False, 0, 1, 2, "1", "99999999999", "²", "zz-node",
                               None])
        return value

    return walk(forged)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32), where=st.sets(st.sampled_from(PROOF_READS), min_size=1, max_size=1),
       node=st.sampled_from(["es-1", "es-2", "es-3", "es-4"]), failing=st.booleans())
def test_no_hostile_answer_makes_a_proof_for_a_node_whose_copies_are_not_elsewhere(
        fake: tuple[FakeCluster, FakeEsServer, ShardClusterAdapter, Plan], seed: int,
        where: set[str], node: str, failing: bool) -> None:
    """Whatever one of the proof's reads is answered (fields dropped, added, changed: states, node ids, counts,
    shard numbers; a node's stats failing beside it), the last look lets a node stop only if the fake's own state
    shows every shard it holds started on another node that is up; otherwise it refuses or is the cluster's
    error. One lying answer at a time: what a node says of itself is checked against what the elected master
    says of it, and the other way round; a master that lies in every answer it gives is beyond any client's
    proof (docs/safety.md)."""
    cluster, server, adapter, plan = fake
    if SOLO not in cluster.indices:
        only_copy_on(cluster, SOLO, "es-2")
    server.forge.clear()
    cluster.stats_failing = {cluster.by_name[node].id} if failing else set()
    rng = random.Random(seed)
    for label in where:
        server.forge[label] = lambda answer: mangle(answer, rng)
    try:
        problems = last_look(adapter, plan, node)
    except ClusterError:
        return  # the cluster's error: the run fails on its ordinary path, nothing stopped
    if not problems:
        assert truly_lonely(cluster, node) == [], f"{node} would stop holding a sole copy"


@pytest.mark.parametrize("lie", ["its stats fail", "one replica said of its index"])
def test_a_run_whose_last_look_has_no_proof_stops_no_node_and_resume_finishes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lie: str) -> None:
    """H2 and M1 as the probe ran them: once allocation is restricted, an index without a replica is created on
    the first batch's node, and that node's stats fail (or its index's settings say one replica). The run
    fails on its ordinary path (the cluster's error, or the last look's refusal), that node was never stopped
    and the cluster never red; the lie gone and the index deleted, `resume` finishes, each node restarted once
    and every setting put back."""
    from orchestrator.errors import UnsafeToProceed
    from orchestrator.restart import journal as journals
    from orchestrator.restart.journal import RunFailed, RunState
    from orchestrator.restart.plan import Mode
    from orchestrator.runs import plans
    from orchestrator.runs import restart as runs
    from orchestrator.runs.target import open_target
    from orchestrator.testing.fake_es.hosts import AnsweringHosts, FakeHostTransport, fake_inventory

    monkeypatch.setenv("ORCHESTRATOR_STATE", str(tmp_path / "state"))
    cluster = FakeCluster.generate(4, copies_per_node=6)
    pids = {n: cluster.by_name[n].pid for n in cluster.by_name}
    with FakeEsServer(cluster) as server:
        config = fake_inventory(tmp_path / "c.yaml", server.url,
                                [(n, cluster.by_name[n].ip) for n in sorted(cluster.by_name)])
        target = open_target(None, config)
        transport = FakeHostTransport(server.url)
        plan = plans.make_plan(target, Mode.NODE, RunOptions(), host_transport=lambda: transport)
        first = plan.batches[0].nodes[0]
        restricted = "cluster.routing.allocation.enable"
        reds: list[str] = []

        def once_restricted(c: FakeCluster) -> None:
            if c.setting(restricted) == "primaries" and SOLO not in c.indices:
                only_copy_on(c, SOLO, first)
                if lie == "its stats fail":
                    c.stats_failing = {c.by_name[first].id}
                else:
                    server.forge["GET /{indices}/_settings"] = forged_replicas
            if c.health()["status"] == "red":
                reds.append("red")

        server.tamper["GET /_nodes/stats"] = once_restricted
        server.tamper["GET /_cluster/health"] = once_restricted
        with pytest.raises(RunFailed) as failed:
            runs.start(target, plan, RunOptions(), lambda e: None, early=AnsweringHosts(transport))  # type: ignore[arg-type]
        expected = IncompleteAnswer if lie == "its stats fail" else UnsafeToProceed
        assert isinstance(failed.value.cause, expected), failed.value
        assert cluster.by_name[first].pid == pids[first] and cluster.by_name[first].up, f"{first} was stopped"
        assert reds == [] and cluster.health()["status"] == "green"
        journal = journals.latest("c")
        assert journal is not None and journal.state is RunState.FAILED
        server.tamper.clear()
        server.forge.clear()
        cluster.stats_failing = set()
        cluster.drop_index(SOLO)  # the operator's fix: the fresh index was a mistake
        monkeypatch.setattr(runs, "transport_of", lambda inv: transport)
        done = runs.resume(open_target(None, config), lambda e: None)
        assert done.state is RunState.SUCCEEDED
        assert all(cluster.by_name[n].pid == pids[n] + 10_000 for n in pids), "each node restarted exactly once"
        assert cluster.settings["persistent"] == {} and cluster.settings["transient"] == {}


def test_the_last_look_wants_a_started_copy_elsewhere_for_every_shard_the_batch_holds() -> None:
    """The proof, shard by shard and pure: a batch copy said initializing of a shard with no started copy
    anywhere else is refused by the last look, though it is no started copy the stop would lose (the plan's
    check, which sees started copies alone, lets it by)."""
    from orchestrator.shards.snapshot import ShardCopy
    from tests.unit.snapshots import copies, node, snapshot

    nodes = [node("es-1"), node("es-2"), node("es-3")]
    shards = [*copies("kept", 0, ["es-2", "es-3"]), ShardCopy("sole", 0, True, "INITIALIZING", "id-es-2", 1)]
    snap = snapshot(nodes, shards, "es-1", status="yellow", initializing=1)
    plan = replace(plan_of([["es-1"], ["es-2"], ["es-3"]]), node_ids={n: f"id-{n}" for n in ("es-1", "es-2", "es-3")})
    assert safety.shards_without_other_copy(snap, ["id-es-2"]) == []
    [problem] = safety.stop_check(snap, plan, ("es-2",), RunOptions())
    assert "[sole][0]" in problem and "[kept][0]" not in problem
