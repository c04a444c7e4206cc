"""Is it safe? Pure checks over a cluster snapshot, each answer a sentence for the operator."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from fnmatch import fnmatchcase
from itertools import compress

from orchestrator.restart.journal import RunOptions
from orchestrator.restart.plan import Plan
from orchestrator.shards.settled import Settlement, blocking_text, settle
from orchestrator.shards.snapshot import ClusterSnapshot

# The plan's figure: unassigned shard copies when the run started (what --allow-yellow accepted).


def yellow_settlement(snap: ClusterSnapshot, planned_node_ids: Iterable[str]) -> Settlement | None:
    """For a yellow with nothing moving, whether it is settled (shards/settled.py); else None."""
    h = snap.health
    if h.status != "yellow" or h.relocating_shards or h.initializing_shards:
        return None
    return settle(h.unassigned_shards, snap.unassigned, planned_node_ids)


def cluster_problems(snap: ClusterSnapshot, allow_yellow: bool, planned_node_ids: Iterable[str] = ()) -> list[str]:
    """Reasons the cluster as a whole is not ready for the next batch (empty when it is). A settled
    yellow (every unassigned replica explained by a documented reason) is ready."""
    h = snap.health
    if h.status == "red":
        return cluster_red(snap)
    problems = []
    settlement = yellow_settlement(snap, planned_node_ids)
    if h.status == "yellow" and not allow_yellow and not (settlement and settlement.settled):
        why = f" and not settled: {blocking_text(settlement)}" if settlement else ""
        problems.append(f"cluster health is yellow{why}. Wait for green (or fix the allocation), or pass "
                        "--allow-yellow if this yellow is expected.")
    if h.relocating_shards or h.initializing_shards:
        problems.append(f"the cluster is not settled: {h.initializing_shards} shard(s) initializing, "
                        f"{h.relocating_shards} relocating. Wait until recoveries finish.")
    return problems


def cluster_red(snap: ClusterSnapshot) -> list[str]:
    if snap.health.status != "red":
        return []
    return ["cluster health is red: some primary shard has no started copy. Fix that first; "
            "restarting a node now could lose the last copy of data."]


def shards_without_other_copy(snap: ClusterSnapshot, node_ids: Iterable[str]) -> list[str]:
    """Shards whose every started copy is on ``node_ids``: restarting them makes the shard unavailable."""
    ids = set(node_ids)
    # A batch of a quarter of the nodes or more (a zone) looks at every shard once, in C: cheaper than indexing
    # the shards with copies on several nodes for a plan of a few such batches (bench_plan, zone mode).
    whole_map = len(ids) > 1 and 4 * len(ids) >= len(snap.nodes)
    lonely = started_only_on_by_scan(snap, ids) if whole_map else started_only_on_by_index(snap, ids)
    return sorted(f"[{i}][{s}]" for i, s in lonely)


def started_only_on_by_index(snap: ClusterSnapshot, ids: set[str]) -> list[tuple[str, int]]:
    """The shards whose every started copy is on ``ids``, through the snapshot's indexes of the shards by their
    first started copy's node: a batch looks only at its own nodes' shards."""
    sole = snap.started_on_one_node
    lonely = [key for n in ids for key in sole.get(n, ())]
    if len(ids) > 1:  # a shared shard's copies are on two nodes or more: one node alone never holds all
        shared = snap.started_on_several_nodes
        for keys, holder_lists in (shared[n] for n in ids if n in shared):
            lonely += compress(keys, map(ids.issuperset, holder_lists))  # in C, not a loop of Python (bench_plan)
    return lonely


def started_only_on_by_scan(snap: ClusterSnapshot, ids: set[str]) -> list[tuple[str, int]]:
    """The same shards, each shard's started copies looked at once, in C."""
    holders = snap.started_holders
    return list(compress(holders, map(ids.issuperset, holders.values())))


def held_without_started_copy_elsewhere(snap: ClusterSnapshot, node_ids: Iterable[str],
                                       away: Iterable[str] = ()) -> list[str]:
    """Shards with a copy on ``node_ids`` and no started copy on any node but those and ``away`` (a window's):
    the proof a stop needs, shard by shard. Stricter than `shards_without_other_copy`, which sees only started
    copies: a batch copy said to be initializing, of a shard with no started copy elsewhere, is refused here."""
    ids = set(node_ids)
    gone = ids | set(away)
    held = {(c.index, c.shard) for c in snap.shards if c.node_id in ids}
    proven = {(c.index, c.shard) for c in snap.shards if c.state == "STARTED" and c.node_id not in gone and c.node_id}
    return sorted(f"[{i}][{s}]" for i, s in held - proven)


def replica_counts(snap: ClusterSnapshot) -> dict[str, int]:
    """Replicas per index, as the fewest copies of any of its shards, minus the primary."""
    copies = Counter((c.index, c.shard) for c in snap.shards)
    fewest: dict[str, int] = {}
    for (index, _), n in copies.items():
        fewest[index] = min(fewest.get(index, n), n)
    return {index: n - 1 for index, n in fewest.items()}


def accepted_unavailable(index: str, patterns: Iterable[str]) -> str | None:
    """The --allow-unavailable pattern that accepts ``index`` being unavailable, if any."""
    return next((p for p in patterns if fnmatchcase(index, p)), None)


def unavailability(snap: ClusterSnapshot, node_ids: list[str], label: str,
                   accepted: Iterable[str] = (), proof: bool = False,
                   away: Iterable[str] = ()) -> tuple[list[str], list[str]]:
    """(problems, acknowledgements): shards that stopping these nodes leaves with no started copy,
    as refusals with what to do, and, for indices matching an accepted pattern, as notes. With ``proof``
    (the last look), every shard these nodes hold must have a started copy elsewhere, and not on the
    nodes ``away`` (a window's) either."""
    window = tuple(away)
    lonely = (held_without_started_copy_elsewhere(snap, node_ids, window) if proof
              else shards_without_other_copy(snap, node_ids))
    if not lonely:
        return [], []
    patterns = tuple(accepted)
    by_index: dict[str, list[str]] = {}
    for shard in lonely:
        by_index.setdefault(shard.split("]")[0].lstrip("["), []).append(shard)
    acknowledged = {i: p for i in by_index if (p := accepted_unavailable(i, patterns)) is not None}
    notes = [f"{label}: index {i} will be unavailable while it restarts (accepted by --allow-unavailable {p!r})"
             for i, p in sorted(acknowledged.items())]
    refused = [s for i, shards in by_index.items() if i not in acknowledged for s in shards]
    if not refused:
        return [], notes
    indices = sorted({s.split("]")[0].lstrip("[") for s in refused})
    replicas = replica_counts(snap)
    no_replicas = [i for i in indices if replicas.get(i, 0) == 0]
    shown = ", ".join(refused[:5]) + (f" and {len(refused) - 5} more" if len(refused) > 5 else "")
    # Why no other copy is started: none exists, the other copies are away (a node down, a recovery not
    # done), or every copy sits in this batch (a placement awareness would have spread).
    not_started = {f"[{c.index}][{c.shard}]" for c in snap.shards if c.state != "STARTED"}
    waiting = [sh for sh in refused if sh in not_started]
    if no_replicas:
        hint = (f"index(es) {', '.join(no_replicas[:5])} have 0 replicas: add a replica "
                "(index.number_of_replicas: 1) before the restart, or accept it with --allow-unavailable PATTERN")
    elif proof and window:
        hint = ("their other started copies are on nodes of the window (away, or not yet recovered): it waits "
                "for them to recover")
    elif waiting:
        hint = ("their other copies are not started (unassigned or recovering: a node away, or a recovery not "
                "done): wait until the cluster is green, or bring the missing node back")
    else:
        hint = "every copy of these shards is in this batch: check allocation awareness"
    return [f"{label}: restarting it leaves shard(s) {shown} of index(es) {', '.join(indices[:10])} with no "
            f"started copy; {hint}."], notes


def batch_problems(snap: ClusterSnapshot, node_ids: list[str], label: str,
                   accepted: Iterable[str] = ()) -> list[str]:
    """Reasons restarting these nodes together is unsafe, with what to do about it."""
    return unavailability(snap, node_ids, label, accepted)[0] + quorum_problems(snap, node_ids, label)


def quorum_problems(snap: ClusterSnapshot, node_ids: list[str], label: str) -> list[str]:
    problems = []
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


def unassigned_beyond_accepted(unassigned: int, plan: Plan) -> int:
    """Unassigned shard copies beyond those accepted at the start of an --allow-yellow run."""
    return max(unassigned - plan.accepted_unassigned, 0)


def gate(snap: ClusterSnapshot, plan: Plan, nodes: list[str] | tuple[str, ...], options: RunOptions) -> list[str]:
    """Why the batch of ``nodes`` (inventory names) must not start now; empty when it may.

    With --allow-yellow (recorded in the run's options), a yellow cluster passes only while no more
    copies are unassigned than when the run started: the previous batch's copies are all back."""
    problems = cluster_problems(snap, options.allow_yellow, plan.node_ids.values())
    expected = len(plan.node_ids)
    if snap.health.number_of_nodes < expected:
        away = f" ({', '.join(snap.absent)} not in it)" if snap.absent else ""
        problems.append(f"only {snap.health.number_of_nodes} of {expected} nodes are in the cluster{away}")
    extra = unassigned_beyond_accepted(snap.health.unassigned_shards, plan)
    if options.allow_yellow and extra:
        accepted = plan.accepted_unassigned
        problems.append(f"{extra} shard copies are unassigned beyond the {accepted:.0f} accepted when the run "
                        "started: the previous batch has not recovered")
    return problems + batch_problems(snap, [plan.node_ids[n] for n in nodes], label_of(plan, nodes),
                                     options.allow_unavailable)


def stop_check(snap: ClusterSnapshot, plan: Plan, nodes: list[str] | tuple[str, ...], options: RunOptions) -> list[str]:
    """The last look before the batch stops: from the live routing table, data it would make unavailable."""
    problems, _ = unavailability(snap, [plan.node_ids[n] for n in nodes], label_of(plan, nodes),
                                 options.allow_unavailable, proof=True)
    return problems


def label_of(plan: Plan, nodes: list[str] | tuple[str, ...]) -> str:
    return next((b.label for b in plan.batches if list(b.nodes) == list(nodes)), ", ".join(nodes))
