"""Is it safe? Pure checks over a cluster snapshot, each answer a sentence for the operator."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from itertools import chain

from orchestrator.es.snapshot import ClusterSnapshot


def cluster_problems(snap: ClusterSnapshot, allow_yellow: bool) -> list[str]:
    """Reasons the cluster as a whole is not ready for the next batch (empty when it is)."""
    h = snap.health
    if h.status == "red":
        return ["cluster health is red: some primary shard has no started copy. Fix that first; "
                "restarting a node now could lose the last copy of data."]
    problems = []
    if h.status == "yellow" and not allow_yellow:
        problems.append("cluster health is yellow: some replica is not allocated. Wait for green, or pass "
                        "--allow-yellow if this yellow is expected and settled.")
    if h.relocating_shards or h.initializing_shards:
        problems.append(f"the cluster is not settled: {h.initializing_shards} shard(s) initializing, "
                        f"{h.relocating_shards} relocating. Wait until recoveries finish.")
    return problems


def shards_without_other_copy(snap: ClusterSnapshot, node_ids: Iterable[str]) -> list[str]:
    """Shards whose every started copy is on ``node_ids``: restarting them makes the shard unavailable."""
    on_batch = Counter(chain.from_iterable(snap.started_by_node.get(n, ()) for n in set(node_ids)))
    total = snap.started_copies
    return sorted(f"[{i}][{s}]" for (i, s), n in on_batch.items() if total[(i, s)] == n)


def replica_counts(snap: ClusterSnapshot) -> dict[str, int]:
    """Replicas per index, as the fewest copies of any of its shards, minus the primary."""
    copies = Counter((c.index, c.shard) for c in snap.shards)
    fewest: dict[str, int] = {}
    for (index, _), n in copies.items():
        fewest[index] = min(fewest.get(index, n), n)
    return {index: n - 1 for index, n in fewest.items()}


def batch_problems(snap: ClusterSnapshot, node_ids: list[str], label: str) -> list[str]:
    """Reasons restarting these nodes together is unsafe, with what to do about it."""
    problems = []
    lonely = shards_without_other_copy(snap, node_ids)
    if lonely:
        indices = sorted({s.split("]")[0].lstrip("[") for s in lonely})
        replicas = replica_counts(snap)
        no_replicas = [i for i in indices if replicas.get(i, 0) == 0]
        shown = ", ".join(lonely[:5]) + (f" and {len(lonely) - 5} more" if len(lonely) > 5 else "")
        hint = (f"index(es) {', '.join(no_replicas[:5])} have 0 replicas: add a replica "
                f"(index.number_of_replicas: 1) before the restart" if no_replicas else
                "every copy of these shards is in this batch: check allocation awareness")
        problems.append(f"{label}: restarting it leaves shard(s) {shown} with no started copy; {hint}.")
    masters = snap.master_eligible
    leaving_masters = [n for n in masters if n.id in node_ids]
    # With fewer than 3 master-eligible nodes a master restart cannot keep a quorum: see master_notes.
    if len(masters) >= 3 and len(masters) - len(leaving_masters) <= len(masters) // 2:
        problems.append(f"{label}: {len(leaving_masters)} of {len(masters)} master-eligible nodes would be down "
                        "at once, losing the master quorum. Restart fewer master-eligible nodes per batch.")
    return problems


def master_notes(snap: ClusterSnapshot) -> list[str]:
    masters = snap.master_eligible
    if 0 < len(masters) < 3:
        return [f"the cluster has {len(masters)} master-eligible node(s): while one of them restarts the cluster may "
                "have no elected master (requests fail until it is back). Three master-eligible nodes avoid that."]
    return []
