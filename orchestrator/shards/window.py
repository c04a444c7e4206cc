"""The window (issue 57): several nodes away at once, within a budget, each admitted on a live per-shard
proof. Pure: a snapshot of the candidate's shards in, a verdict out; the budget as the operator gives it.

The proof a node is admitted on is the last look's, widened to the window: every shard copy the candidate
holds must have a STARTED copy on a node that is neither the candidate nor in the window (down, restarting,
or recovering). Zones are hints, never proof: a node of another zone than the window's waits, but a node of
the window's zone is still proven shard by shard. A master-eligible node is admitted alone.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from orchestrator.config.model import Inventory, NodeEntry, Timeouts
from orchestrator.config.playbook import Playbook
from orchestrator.errors import ConfigError
from orchestrator.restart.budget import Budget
from orchestrator.restart.plan import Batch, Plan, SettingChange
from orchestrator.restart.records import RunOptions
from orchestrator.shards.plan import ALLOCATION_ENABLE
from orchestrator.shards.safety import cluster_red, held_without_started_copy_elsewhere, quorum_problems, unavailability
from orchestrator.shards.snapshot import ClusterSnapshot, ShardCopy


def unproven(snap: ClusterSnapshot, candidate: str, away: Collection[str]) -> list[str]:
    """The shards ``candidate`` (a node id) holds with no STARTED copy on a node outside ``away`` and the
    candidate: each would lose its last started copy were the candidate admitted. Empty: proven. The last
    look's proof (shards/safety.py), with the window's nodes gone too."""
    return held_without_started_copy_elsewhere(snap, [candidate], away)


def admission(snap: ClusterSnapshot, candidate: str, away: Collection[str], zone_of: Mapping[str, str | None],
              masters: Collection[str], room: int) -> list[str]:
    """Why ``candidate`` may not join the window of ``away`` now (empty: it may): no room, a master-eligible
    node beside others, another zone than the window's, or a shard it holds without a started copy
    elsewhere. Each reason says what it waits for."""
    if len(away) >= room:
        return [f"the window is full ({len(away)} of {room} away)"]
    beside = beside_the_window(candidate, away, zone_of, masters)
    if beside:
        return beside
    lonely = unproven(snap, candidate, away)
    if lonely:
        shown = ", ".join(lonely[:5]) + (f" and {len(lonely) - 5} more" if len(lonely) > 5 else "")
        return [f"shard(s) {shown} would have no started copy left: it waits for the window's nodes to recover"]
    return []


def beside_the_window(candidate: str, away: Collection[str], zone_of: Mapping[str, str | None],
                      masters: Collection[str]) -> list[str]:
    """Why ``candidate`` may not be away beside ``away`` whatever its shards: a master-eligible node is away
    alone, and the window holds one zone at a time (zones are hints, never proof: the shards still decide)."""
    if away and (candidate in masters or any(n in masters for n in away)):
        return ["a master-eligible node is restarted alone: it waits for the window to empty"]
    zones = {zone_of.get(n) for n in away}
    if away and zone_of.get(candidate) not in zones:
        return [f"the window holds zone {', '.join(sorted(str(z) for z in zones))}: one zone at a time"]
    return []


def zones_of(snap: ClusterSnapshot, plan: Plan, inv: Inventory,
             names: Iterable[str] | None = None) -> dict[str, str | None]:
    """Node id -> its zone: the inventory's, else the one the snapshot read of the node. Of the plan's nodes
    among ``names`` (inventory names) only, when given: a proof asks of the candidate and the window's nodes, not
    of every node of a cluster of thousands at each admission."""
    entries = inv.nodes if names is None else [entry for n in dict.fromkeys(names) if (entry := entry_of(inv, n))]
    return {plan.node_ids[e.name]: e.zone or (node.zone if (node := snap.node_by_id(plan.node_ids[e.name])) else None)
            for e in entries if e.name in plan.node_ids}


def entry_of(inv: Inventory, name: str) -> NodeEntry | None:
    try:
        return inv.node(name)
    except KeyError:  # a name the inventory no longer holds (a resumed run's): no zone known of it
        return None


def window_check(snap: ClusterSnapshot, plan: Plan, inv: Inventory, candidate: str, window: Collection[str],
                 options: RunOptions) -> list[str]:
    """Why ``candidate`` (an inventory name) may not join the window of ``window`` (inventory names, the nodes
    admitted and not yet recovered) now, from a live snapshot of its shards (`gate_snapshot(proof=True)`): a red
    cluster, a node outside the window missing, a master-eligible node beside others, another zone, the master
    quorum, or a shard it holds with no started copy on a node outside the window and itself (indices accepted
    by --allow-unavailable aside). Empty: it may. Pure; the last look before its stop asks it again."""
    ids = plan.node_ids
    node_id, away = ids[candidate], [ids[n] for n in window if n in ids and n != candidate]
    problems = cluster_red(snap)
    # Every node but the window's, the candidate too: its proof read its own stats, so it is in the cluster, and
    # a node missing beyond the window is never taken for the candidate stopping.
    outside = len(ids) - len(away)
    if snap.health.number_of_nodes < outside:
        missing = f" ({', '.join(snap.absent)} not in it)" if snap.absent else ""
        problems.append(f"only {snap.health.number_of_nodes} nodes are in the cluster, fewer than the {outside} "
                        f"outside the window{missing}")
    beside = beside_the_window(node_id, away, zones_of(snap, plan, inv, [candidate, *window]),
                               {n.id for n in snap.master_eligible})
    if beside:
        return problems + beside  # it waits for the window, whatever its shards say now
    problems += quorum_problems(snap, [*away, node_id], candidate)
    return problems + unavailability(snap, [node_id], candidate, options.allow_unavailable, proof=True, away=away)[0]


@dataclass(frozen=True)
class WindowReach:
    """What the plan says of a budget: how many nodes could be away together at most (a greedy window over
    the shard map, one zone at a time, masters alone), and what held it below the budget."""

    budget: int
    together: int
    limits: tuple[str, ...]


def reach(snap: ClusterSnapshot, order: Iterable[str], zone_of: Mapping[str, str | None],
          masters: Collection[str], budget: int) -> WindowReach:
    """Fill one window greedily in ``order`` (node ids, the plan's), as admission would from this snapshot. The
    snapshot's indexes of the shard map (each shard's started holders, each node's shards, built once for the
    plan) prove each candidate by its own copies, not by the whole map: a plan of 5,000 nodes and 1,000,000
    copies."""
    started, held = snap.started_holders, snap.shards_held
    away: list[str] = []
    gone: set[str] = set()
    held_back: Counter[str] = Counter()
    for node_id in order:
        if len(away) >= budget:
            break
        beside = beside_the_window(node_id, away, zone_of, masters)
        if beside:
            held_back[beside[0].split(":")[0]] += 1
            continue
        gone.add(node_id)
        if any(all(holder in gone for holder in started.get(key, ())) for key in held.get(node_id, ())):
            gone.discard(node_id)
            held_back["shards whose copies sit on few nodes"] += 1
            continue
        away.append(node_id)
    limits = tuple(f"{why} ({n} node(s))" for why, n in held_back.most_common(3)) if len(away) < budget else ()
    return WindowReach(budget, len(away), limits)


def window_notes(snap: ClusterSnapshot, plan: Plan, inv: Inventory, budget: Budget) -> list[str]:
    """What the plan says of a budget: the nodes it allows away, how many the shard map and the zones let be
    away together from this snapshot (and what held them back), and the estimate beside one at a time."""
    in_play = [n for b in plan.batches for n in b.nodes]
    room = budget.nodes(len(in_play))
    order = [plan.node_ids[n] for n in in_play if n in plan.node_ids]
    found = reach(snap, order, zones_of(snap, plan, inv), {n.id for n in snap.master_eligible}, room)
    each = plan.estimate_s / len(in_play) if in_play else 0.0
    windowed = each * max(len(in_play) / max(found.together, 1), 1)
    limits = f"; held below the budget by {', '.join(found.limits)}" if found.limits else ""
    return [f"--max-unavailable {budget}: at most {room} of the {len(in_play)} nodes away at once; from this "
            f"snapshot {found.together} could be away together{limits}",
            f"--max-unavailable {budget}: about {windowed / 60:.0f} min with the window, {plan.estimate_s / 60:.0f} "
            "min one node at a time (the window opens 1, 2, 4, ... up to the budget; docs/restart-procedure.md, "
            "\"The window\")"]


DELAYED_TIMEOUT = "index.unassigned.node_left.delayed_timeout"
WINDOW_DELAY_MARGIN_S = 300.0  # beyond a node's own stop, start and rejoin timeouts: a slow node still finds its copies


def window_delay_s(timeouts: Timeouts, reboots: bool) -> int:
    """How long each index waits for a node of the window before copying its copies elsewhere: as long as a node
    may take to stop, (reboot,) start and rejoin, and a margin."""
    t = timeouts
    return int(t.stop_s + t.start_s + t.join_s + (t.reboot_s if reboots else 0) + WINDOW_DELAY_MARGIN_S)


def planned_for_a_window(plan: Plan, snap: ClusterSnapshot, inv: Inventory, reboots: bool,
                         keep_order: bool = False) -> Plan:
    """The plan of a window's run: its nodes grouped by zone, the smallest first (the window holds one zone at a
    time, so the next nodes in order are of the zone in it), the master-eligible nodes where the plan put them
    (last, the elected one last); allocation left enabled, each index's delayed_timeout raised for the run
    instead. ``keep_order``: an upgrade's (data tiers, then the rest, the masters last) is kept as it is."""
    zone_of = zones_of(snap, plan, inv)
    masters = {n.id for n in snap.master_eligible}
    zone_sizes = Counter(zone_of.get(plan.node_ids.get(b.nodes[0], "")) for b in plan.batches
                         if plan.node_ids.get(b.nodes[0], "") not in masters)
    first_seen = {zone: i for i, zone in enumerate(zone_sizes)}  # Counter keeps the order zones were first seen

    def place(b: Batch) -> tuple[int, int, int]:
        # The smallest zone first: the ramp's first node alone costs the least there, and the larger zones then
        # fill the opened window; zones of one size in the plan's order, each whole.
        node_id = plan.node_ids.get(b.nodes[0], "")
        zone = zone_of.get(node_id)
        return (1, 0, 0) if node_id in masters else (0, zone_sizes[zone], first_seen[zone])

    # Stable: the plan's order within a zone, and among the masters.
    ordered = list(plan.batches) if keep_order else sorted(plan.batches, key=place)
    delay = window_delay_s(inv.timeouts, reboots)
    settings = [c for c in plan.settings if c.key != ALLOCATION_ENABLE]
    settings.insert(0, SettingChange(DELAYED_TIMEOUT, "each index", "its own", f"{delay}s", "for the run, by index",
                                     "allocation stays enabled so that a node back recovers while others are away; "
                                     "each index waits this long for a node away before copying its copies elsewhere"))
    return replace(plan, batches=tuple(replace(b, number=i) for i, b in enumerate(ordered, 1)),
                   settings=tuple(settings))


# What a batch's steps become with other nodes away beside it: allocation stays enabled (each index waits for the
# nodes away instead: delay_allocation), and a node leaves the window once its own copies are back.
WINDOW_DROPS = ("restrict_allocation", "restore_allocation")


def windowed(playbook: Playbook) -> Playbook:
    """The playbook of a window's run (`--max-unavailable` above 1), shown by `plan` and journaled by the run:
    restrict_allocation and restore_allocation left out (another node's restore would let the copies of the nodes
    still away be copied elsewhere; `delay_allocation`, for the run, makes them wait instead), remember_copies
    just before stop_service, and wait_for_own_recovery for wait_for_recovery (the cluster stays yellow while
    other nodes are away: the node's own copies say when it may leave the window)."""
    names = [s.name for s in playbook.steps()]
    if "wait_for_recovery" not in names and "wait_for_own_recovery" not in names:
        raise ConfigError(f"playbook {playbook.name}", ["--max-unavailable above 1 needs wait_for_recovery in the "
                                                        "batch: a node leaves the window once its copies recovered"])
    batch: list[Any] = []
    for entry in playbook.batch:
        if entry in WINDOW_DROPS:
            continue
        if entry == "stop_service" and "remember_copies" not in names:
            batch.append("remember_copies")
        batch.append("wait_for_own_recovery" if entry == "wait_for_recovery" else entry)
    before_run = [*playbook.before_run, *([] if "delay_allocation" in playbook.before_run else ["delay_allocation"])]
    return playbook.model_copy(update={"batch": batch, "before_run": before_run})


def copy_key(index: str, shard: int) -> str:
    """A copy as a window's journal names it: an index name never holds a slash."""
    return f"{index}/{shard}"


def shard_of(key: str) -> tuple[str, int]:
    index, _, shard = key.rpartition("/")
    return index, int(shard)


def own_copies_waiting(copies: Iterable[ShardCopy], node_id: str, held: Iterable[str]) -> list[str]:
    """Of the shards ``node_id`` held before its stop (``held``, as `copy_key` names them), those it has not
    recovered: no STARTED copy on it again, and a copy of the shard still unassigned or recovering (the cluster
    has not placed it elsewhere either). Empty: the node may leave the window. ``copies``: every copy of those
    shards' indices, from the routing table. A shard whose index is gone waits for nothing."""
    by_shard: dict[tuple[str, int], list[ShardCopy]] = {}
    for c in copies:
        by_shard.setdefault((c.index, c.shard), []).append(c)
    waiting = []
    for key in held:
        mine = by_shard.get(shard_of(key), [])
        back = any(c.node_id == node_id and c.state == "STARTED" for c in mine)
        if mine and not back and not all(c.state == "STARTED" for c in mine):
            waiting.append("[{}][{}]".format(*shard_of(key)))
    return sorted(waiting)
