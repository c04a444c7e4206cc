"""Which indices to merge: a pure function over facts read from the cluster."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Verdict(StrEnum):
    MERGE = "merge"
    SKIP = "skip"  # already at or below the target
    REFUSE = "refuse"  # written to: merging it would make huge segments the merge policy never touches


@dataclass(frozen=True)
class IndexFacts:
    name: str
    max_segments_per_shard: int
    docs: int
    write_index_of: str | None = None  # alias or data stream whose write index this is
    recent_writes: int = 0  # documents indexed during the sampling window


@dataclass(frozen=True)
class Decision:
    index: str
    verdict: Verdict
    reason: str
    segments_before: int


def decide(facts: IndexFacts, max_segments: int, include_write_indices: bool) -> Decision:
    before = facts.max_segments_per_shard
    if not include_write_indices:
        if facts.write_index_of:
            return Decision(facts.name, Verdict.REFUSE, f"it is the write index of {facts.write_index_of}; merge it "
                            "after rollover, or pass --include-write-indices", before)
        if facts.recent_writes:
            return Decision(facts.name, Verdict.REFUSE, f"{facts.recent_writes} document(s) were indexed into it "
                            "just now; merge it when writes have stopped, or pass --include-write-indices", before)
    if before <= max_segments:
        return Decision(facts.name, Verdict.SKIP, f"already at {before} segment(s) per shard or fewer "
                        f"(target {max_segments})", before)
    return Decision(facts.name, Verdict.MERGE, f"{before} segments in its largest shard, target {max_segments}",
                    before)
