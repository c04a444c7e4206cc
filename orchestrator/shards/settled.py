"""Settled yellow: a yellow cluster that waiting will not make green, and that is safe to go on with.

A gate that only passes green waits forever on a cluster whose yellow is by design (an index with
more replicas than nodes), or that waits for something the run does not control (a node taken
away by someone else, a rolling upgrade's replicas that cannot go to an older node). A yellow is
*settled* when nothing is initializing or relocating, every expected node is present, and every
unassigned copy is a replica explained by the allocation explain API with a reason on the list
below. Anything else keeps the gate waiting, naming the copies that block it and why.

Pure: reads `UnassignedCopy` records that the adapter built from `_cluster/allocation/explain`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

# The documented reasons a copy may stay unassigned in a settled yellow (docs/safety.md).
SETTLED_REASONS = {
    "delayed": "delayed allocation: the node that held the copy left and Elasticsearch waits for it to return "
               "(index.unassigned.node_left.delayed_timeout); that node is not one this run restarts",
    "too_few_nodes": "more copies than the nodes present can hold (every node refuses by same_shard, awareness "
                     "or shards_limit): by design, or until a node away returns",
    "older_version": "a copy cannot go to a node of an older version (a rolling upgrade in progress)",
}
BY_DESIGN_DECIDERS = frozenset({"same_shard", "awareness", "shards_limit"})
VERSION_DECIDERS = frozenset({"node_version", "index_version"})  # 9.x says both
NODE_LEFT = re.compile(r"node_left\s*\[([^\]]+)\]")
MAX_EXPLAINED = 20  # explain calls per look: beyond that, the rest counts as unexplained


@dataclass(frozen=True)
class UnassignedCopy:
    """One unassigned shard copy, as the allocation explain API explains it."""

    index: str
    shard: int
    primary: bool
    can_allocate: str = ""  # allocation_delayed, no, throttled, yes, awaiting_info, no_valid_shard_copy, ...
    reason: str = ""  # unassigned_info.reason: NODE_LEFT, INDEX_CREATED, ALLOCATION_FAILED, ...
    left_node: str | None = None  # the node id in unassigned_info.details "node_left [ID]"
    refusals: tuple[tuple[str, ...], ...] = ()  # per node, the deciders that said NO
    explanation: str = ""  # the first NO explanation of a decider, or the API's own summary
    copies: int = 1  # how many unassigned copies of this shard (and role) this record stands for

    @property
    def shard_name(self) -> str:
        return f"[{self.index}][{self.shard}]{'p' if self.primary else 'r'}"

    @classmethod
    def from_explain(cls, raw: Mapping[str, Any], copies: int = 1) -> UnassignedCopy:
        info = raw.get("unassigned_info") or {}
        left = NODE_LEFT.search(str(info.get("details") or ""))
        refusals, first_no, blocking_no = [], "", ""
        for decision in raw.get("node_allocation_decisions") or ():
            said_no = [d for d in decision.get("deciders") or () if str(d.get("decision", "")).upper() == "NO"]
            refusals.append(tuple(sorted(str(d.get("decider")) for d in said_no)))
            if said_no and not first_no:
                first_no = f"{decision.get('node_name')}: {said_no[0].get('decider')}: {said_no[0].get('explanation')}"
            # The message names a NO that a settled yellow does not accept (disk_threshold, filter, ...), not
            # one it does (same_shard on the node holding the primary), when there is one.
            other = [d for d in said_no if str(d.get("decider")) not in BY_DESIGN_DECIDERS | VERSION_DECIDERS]
            if other and not blocking_no:
                blocking_no = f"{decision.get('node_name')}: {other[0].get('decider')}: {other[0].get('explanation')}"
        return cls(index=str(raw.get("index")), shard=int(raw.get("shard") or 0), primary=bool(raw.get("primary")),
                   can_allocate=str(raw.get("can_allocate") or ""), reason=str(info.get("reason") or ""),
                   left_node=left.group(1) if left else None, refusals=tuple(refusals),
                   explanation=blocking_no or first_no or str(raw.get("allocate_explanation") or ""),
                   copies=copies)

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> UnassignedCopy:
        return cls(**{**raw, "refusals": tuple(tuple(r) for r in raw.get("refusals", ()))})


def reason_for(copy: UnassignedCopy, planned_node_ids: Iterable[str]) -> str | None:
    """The documented reason this copy may stay unassigned, or None (it blocks)."""
    if copy.primary:
        return None  # an unassigned primary is a red cluster: never settled
    if copy.can_allocate == "allocation_delayed":
        # Waiting for a node this run restarts is not settled: that node's copies come back first.
        away = copy.left_node is not None and copy.left_node not in set(planned_node_ids)
        return "delayed" if away else None
    if copy.can_allocate != "no" or not copy.refusals:
        return None  # throttled, awaiting info, no valid copy, or nothing said: wait
    if all(set(r) & BY_DESIGN_DECIDERS for r in copy.refusals):
        return "too_few_nodes"
    if all(set(r) & (BY_DESIGN_DECIDERS | VERSION_DECIDERS) for r in copy.refusals):
        return "older_version"
    return None


@dataclass(frozen=True)
class Settlement:
    """Whether a yellow is settled: the accepted indices by reason, and what blocks otherwise."""

    accepted: dict[str, tuple[str, ...]] = field(default_factory=dict)  # reason -> indices
    blocking: tuple[str, ...] = ()

    @property
    def settled(self) -> bool:
        return not self.blocking

    def accepted_text(self) -> str:
        return "; ".join(f"index(es) {', '.join(indices)}: {SETTLED_REASONS[reason]}"
                         for reason, indices in sorted(self.accepted.items()))


def settle(unassigned_total: int, copies: Iterable[UnassignedCopy], planned_node_ids: Iterable[str]) -> Settlement:
    """Classify a yellow's unassigned copies. ``unassigned_total`` is the health's count: copies the
    adapter did not explain (beyond MAX_EXPLAINED, or unassigned since it looked) block."""
    planned = set(planned_node_ids)
    accepted: dict[str, set[str]] = {}
    blocking: list[str] = []
    explained = 0
    for copy in copies:
        explained += copy.copies
        reason = reason_for(copy, planned)
        if reason is None:
            blocking.append(f"{copy.shard_name} ({copy.reason or 'unassigned'}, {copy.can_allocate or '?'}): "
                            f"{copy.explanation[:300]}")
        else:
            accepted.setdefault(reason, set()).add(copy.index)
    if unassigned_total > explained:
        blocking.append(f"{unassigned_total - explained} unassigned copies not explained (the look stops at "
                        f"the first copy that blocks and at {MAX_EXPLAINED} shards, and copies change while looking)")
    if not accepted and not blocking:
        blocking.append("yellow, but no unassigned copy was found to explain (the cluster changed while looking)")
    return Settlement(accepted={r: tuple(sorted(i)) for r, i in accepted.items()}, blocking=tuple(blocking))


def blocking_text(settlement: Settlement, shown: int = 3) -> str:
    more = len(settlement.blocking) - shown
    return "; ".join(settlement.blocking[:shown]) + (f"; and {more} more" if more > 0 else "")
