"""The window (issue 57): several nodes away at once, within a budget, each admitted on a live per-shard
proof. Pure: a snapshot of the candidate's shards in, a verdict out; the budget as the operator gives it.

The proof a node is admitted on is the last look's, widened to the window: every shard copy the candidate
holds must have a STARTED copy on a node that is neither the candidate nor in the window (down, restarting,
or recovering). Zones are hints, never proof: a node of another zone than the window's waits, but a node of
the window's zone is still proven shard by shard. A master-eligible node is admitted alone.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

from orchestrator.config.model import Inventory
from orchestrator.errors import ConfigError
from orchestrator.restart.plan import Plan
from orchestrator.shards.safety import held_without_started_copy_elsewhere
from orchestrator.shards.snapshot import ClusterSnapshot

BUDGET = re.compile(r"([1-9][0-9]{0,5})(%?)")


@dataclass(frozen=True)
class Budget:
    """At most ``count`` nodes (or ``percent`` % of the nodes in play, at least 1) away or not yet recovered."""

    count: int = 1
    percent: bool = False

    @classmethod
    def parse(cls, text: str, where: str = "--max-unavailable") -> Budget:
        found = BUDGET.fullmatch(text.strip())
        if not found or (found[2] and int(found[1]) > 100):
            raise ConfigError(where, [f"{text[:40]!r}: give a number of nodes (4) or a percentage of them (5%)"])
        return cls(int(found[1]), bool(found[2]))

    def nodes(self, in_play: int) -> int:
        """How many nodes may be away at once, of ``in_play``."""
        return max(1, in_play * self.count // 100) if self.percent else max(1, min(self.count, in_play))

    def __str__(self) -> str:
        return f"{self.count}%" if self.percent else str(self.count)


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
    if away and (candidate in masters or any(n in masters for n in away)):
        return ["a master-eligible node is restarted alone: it waits for the window to empty"]
    zones = {zone_of.get(n) for n in away}
    if away and zone_of.get(candidate) not in zones:
        return [f"the window holds zone {', '.join(sorted(str(z) for z in zones))}: one zone at a time"]
    lonely = unproven(snap, candidate, away)
    if lonely:
        shown = ", ".join(lonely[:5]) + (f" and {len(lonely) - 5} more" if len(lonely) > 5 else "")
        return [f"shard(s) {shown} would have no started copy left: it waits for the window's nodes to recover"]
    return []


@dataclass(frozen=True)
class WindowReach:
    """What the plan says of a budget: how many nodes could be away together at most (a greedy window over
    the shard map, one zone at a time, masters alone), and what held it below the budget."""

    budget: int
    together: int
    limits: tuple[str, ...]


def reach(snap: ClusterSnapshot, order: Iterable[str], zone_of: Mapping[str, str | None],
          masters: Collection[str], budget: int) -> WindowReach:
    """Fill one window greedily in ``order`` (node ids, the plan's), as admission would from this snapshot."""
    away: list[str] = []
    held_back: Counter[str] = Counter()
    for node_id in order:
        problems = admission(snap, node_id, away, zone_of, masters, budget)
        if not problems:
            away.append(node_id)
        elif not problems[0].startswith("the window is full"):
            held_back[problems[0].split(":")[0].split(" would")[0]
                      if not problems[0].startswith("shard") else "shards whose copies sit on few nodes"] += 1
    limits = tuple(f"{why} ({n} node(s))" for why, n in held_back.most_common(3)) if len(away) < budget else ()
    return WindowReach(budget, len(away), limits)


def window_notes(snap: ClusterSnapshot, plan: Plan, inv: Inventory, budget: Budget) -> list[str]:
    """What the plan says of a budget: the nodes it allows away, how many the shard map and the zones let be
    away together from this snapshot (and what held them back), and the estimate beside one at a time."""
    in_play = [n for b in plan.batches for n in b.nodes]
    room = budget.nodes(len(in_play))
    order = [plan.node_ids[n] for n in in_play if n in plan.node_ids]
    zone_of = {plan.node_ids[e.name]: e.zone or (node.zone if (node := snap.node_by_id(plan.node_ids[e.name]))
                                                 else None) for e in inv.nodes if e.name in plan.node_ids}
    found = reach(snap, order, zone_of, {n.id for n in snap.master_eligible}, room)
    each = plan.estimate_s / len(in_play) if in_play else 0.0
    windowed = each * max(len(in_play) / max(found.together, 1), 1)
    limits = f"; held below the budget by {', '.join(found.limits)}" if found.limits else ""
    return [f"--max-unavailable {budget}: at most {room} of the {len(in_play)} nodes away at once; from this "
            f"snapshot {found.together} could be away together{limits}",
            f"--max-unavailable {budget}: about {windowed / 60:.0f} min with the window, {plan.estimate_s / 60:.0f} "
            "min one node at a time; this version plans the window but runs one node at a time "
            "(`restart --max-unavailable` above 1 is refused; docs/restart-procedure.md, \"The window\")"]
