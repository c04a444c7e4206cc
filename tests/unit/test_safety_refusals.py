"""What a refusal of shards/safety.py tells the operator, and which checks see what: the sentence a stop or a
batch is refused with (which shards, which indices, why, and what to do), the gate's count of nodes, and which
yellows the gate accepts. Pure: snapshots built by hand."""

from __future__ import annotations

from dataclasses import replace

from orchestrator.restart.records import RunOptions
from orchestrator.shards import safety
from orchestrator.shards.settled import UnassignedCopy
from orchestrator.shards.snapshot import Health, ShardCopy
from tests.unit.journals import plan_of
from tests.unit.snapshots import copies, node, snapshot

NODES = [node("n1"), node("n2"), node("n3")]
SOLE = "index(es) {} have 0 replicas: add a replica (index.number_of_replicas: 1) before the restart, or accept it " \
       "with --allow-unavailable PATTERN"


def solo_indices(count: int, on: str = "n1") -> list[ShardCopy]:
    """``count`` indices of one shard and no replica (i-00, i-01, ...), each copy on ``on``."""
    return [c for i in range(count) for c in copies(f"i-{i:02d}", 0, [on])]


def refusal(shards: list[ShardCopy], batch: list[str], **how: object) -> list[str]:
    problems, _ = safety.unavailability(snapshot(NODES, shards, "n3"), [f"id-{n}" for n in batch],
                                        ", ".join(batch), **how)  # type: ignore[arg-type]
    return problems


def test_a_refusal_names_the_first_five_shards_the_first_ten_indices_and_how_many_more() -> None:
    """Eleven indices without a replica on the node: the sentence names five shards and counts the other six, names
    ten indices, and says which five have no replica and the two ways out."""
    five = "[i-00][0], [i-01][0], [i-02][0], [i-03][0], [i-04][0]"
    assert refusal(solo_indices(11), ["n1"]) == [
        f"n1: restarting it leaves shard(s) {five} and 6 more of index(es) "
        "i-00, i-01, i-02, i-03, i-04, i-05, i-06, i-07, i-08, i-09 with no started copy; "
        f"{SOLE.format('i-00, i-01, i-02, i-03, i-04')}."]
    # At five shards every one is named and nothing is "more"; at six, one is counted.
    assert refusal(solo_indices(5), ["n1"])[0].startswith(f"n1: restarting it leaves shard(s) {five} of index(es) ")
    assert refusal(solo_indices(6), ["n1"])[0].startswith(f"n1: restarting it leaves shard(s) {five} and 1 more of ")


def test_each_cause_of_a_lonely_shard_has_its_own_way_out() -> None:
    """Why no other copy is started decides what the operator is told to do: wait for the other copy to start,
    wait for the window's nodes to recover, or spread the copies (both in the batch)."""
    waiting = [ShardCopy("w", 0, True, "STARTED", "id-n1", 1), ShardCopy("w", 0, False, "INITIALIZING", "id-n2", 1)]
    assert refusal(waiting, ["n1"]) == [
        "n1: restarting it leaves shard(s) [w][0] of index(es) w with no started copy; their other copies are not "
        "started (unassigned or recovering: a node away, or a recovery not done): wait until the cluster is green, "
        "or bring the missing node back."]
    together = copies("t", 0, ["n1", "n2"])
    spread = ("n1, n2: restarting it leaves shard(s) [t][0] of index(es) t with no started copy; every copy of "
              "these shards is in this batch: check allocation awareness.")
    assert refusal(together, ["n1", "n2"]) == [spread]
    assert refusal(together, ["n1", "n2"], proof=True) == [spread], "the last look without a window: the same cause"
    assert refusal(together, ["n1"], proof=True, away=["id-n2"]) == [
        "n1: restarting it leaves shard(s) [t][0] of index(es) t with no started copy; their other started copies "
        "are on nodes of the window (away, or not yet recovered): it waits for them to recover."]


def test_an_index_counts_the_replicas_of_its_shard_with_fewest_copies() -> None:
    """A shard listed with fewer copies than its index's others (a read that saw one copy of it) makes the index
    one of fewer replicas, whichever shard comes last."""
    shards = [*copies("x", 0, ["n1"]), *copies("x", 1, ["n1", "n2"]), *copies("y", 0, ["n1", "n2"])]
    assert safety.replica_counts(snapshot(NODES, shards, "n3")) == {"x": 0, "y": 1}


def test_the_plans_check_sees_started_copies_and_the_last_look_any_copy_the_batch_holds() -> None:
    """A shard whose only copy is still initializing on the batch's node (a new index): the plan's check of the
    batch does not refuse it (it will have started by then; the gate waits while anything initializes), the last
    look before the stop does (the proof: no started copy elsewhere)."""
    fresh = [ShardCopy("new", 0, True, "INITIALIZING", "id-n1", 1)]
    snap = snapshot(NODES, fresh, "n3", status="yellow", initializing=1)
    assert safety.batch_problems(snap, ["id-n1"], "n1") == []
    assert safety.cluster_problems(snap, allow_yellow=True) == [
        "the cluster is not settled: 1 shard(s) initializing, 0 relocating. Wait until recoveries finish."]
    plan = plan_of([["n1"], ["n2"], ["n3"]])
    assert safety.stop_check(snap, plan, ["n1"], RunOptions()) == [
        "n1: restarting it leaves shard(s) [new][0] of index(es) new with no started copy; index(es) new have 0 "
        "replicas: add a replica (index.number_of_replicas: 1) before the restart, or accept it with "
        "--allow-unavailable PATTERN."]


def test_the_last_look_keeps_what_allow_unavailable_accepted() -> None:
    """An index the operator accepted to be unavailable (--allow-unavailable) is accepted at the last look too,
    not only by the plan and the gate: the stop goes on; another index is still refused."""
    plan = plan_of([["n1"], ["n2"], ["n3"]])
    snap = snapshot(NODES, [*copies("scratch-1", 0, ["n1"]), *copies("kept", 0, ["n1", "n2"])], "n3")
    assert safety.stop_check(snap, plan, ["n1"], RunOptions(allow_unavailable=("scratch-*",))) == []
    assert safety.stop_check(snap, plan, ["n1"], RunOptions(allow_unavailable=("other-*",))) == [
        f"n1: restarting it leaves shard(s) [scratch-1][0] of index(es) scratch-1 with no started copy; "
        f"{SOLE.format('scratch-1')}."]


def test_the_gate_names_each_planned_node_the_cluster_does_not_list() -> None:
    plan = plan_of([["n1"], ["n2"], ["n3"]])
    snap = replace(snapshot(NODES[:1], copies("k", 0, ["n1"]), "n1"), absent=("n2", "n3"))
    assert "only 1 of 3 nodes are in the cluster (n2, n3 not in it)" in safety.gate(snap, plan, ["n1"], RunOptions())


def test_a_copy_delayed_for_a_node_of_the_run_holds_the_gate_one_for_a_node_gone_does_not() -> None:
    """A yellow whose one unassigned replica waits (delayed allocation) for a node the run restarts: that node's
    copies are not back, so the next batch waits. Waiting for a node that is not the run's (gone for good) is a
    settled yellow, and the next batch may go."""
    plan = plan_of([["n1"], ["n2"], ["n3"]])
    shards = [*copies("d", 0, ["n2"]), ShardCopy("d", 0, False, "UNASSIGNED", None, 0)]
    base = snapshot(NODES, shards, "n3", status="yellow")
    base = replace(base, health=replace(base.health, unassigned_shards=1))

    def delayed_for(left: str) -> list[str]:
        copy = UnassignedCopy("d", 0, False, can_allocate="allocation_delayed", reason="NODE_LEFT", left_node=left)
        return safety.gate(replace(base, unassigned=(copy,)), plan, ["n1"], RunOptions())

    [held] = delayed_for("id-n2")
    assert held.startswith("cluster health is yellow and not settled: [d][0]r (NODE_LEFT, allocation_delayed)"), held
    assert delayed_for("id-gone") == []


def test_a_yellow_with_copies_moving_is_not_judged_settled() -> None:
    """Settlement is judged only when nothing moves: a yellow while a copy relocates is refused as yellow (not
    explained away by its unassigned copies' reasons), beside the relocation."""
    copy = UnassignedCopy("d", 0, False, can_allocate="allocation_delayed", reason="NODE_LEFT", left_node="id-gone")
    snap = snapshot(NODES, copies("d", 0, ["n2"]), "n3", status="yellow")
    snap = replace(snap, health=Health("yellow", 3, relocating_shards=1, unassigned_shards=1), unassigned=(copy,))
    assert safety.cluster_problems(snap, allow_yellow=False) == [
        "cluster health is yellow. Wait for green (or fix the allocation), or pass --allow-yellow if this yellow is "
        "expected.",
        "the cluster is not settled: 0 shard(s) initializing, 1 relocating. Wait until recoveries finish."]
    assert safety.cluster_problems(replace(snap, health=replace(snap.health, relocating_shards=0)), False) == []


def test_losing_the_master_quorum_is_refused_with_what_to_do() -> None:
    masters = [node(f"m{i}") for i in range(1, 6)]
    snap = snapshot(masters, [], "m1")
    assert safety.quorum_problems(snap, ["id-m1", "id-m2"], "b") == []
    assert safety.quorum_problems(snap, ["id-m1", "id-m2", "id-m3"], "b") == [
        "b: 3 of 5 master-eligible nodes would be down at once, losing the master quorum. Restart fewer "
        "master-eligible nodes per batch."]
