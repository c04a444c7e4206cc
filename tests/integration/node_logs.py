"""What the sandbox's Elasticsearch nodes say of themselves in their own logs: when each was away (from its
"stopping ..." line to the "started" line after it), with the roles and zone it started with. Tests read "one
node away at a time" or "a master alone" here, not from the tool's journal: a wrong journal cannot hide it."""

from __future__ import annotations

import itertools
import re
from datetime import datetime
from pathlib import Path
from typing import Any, NamedTuple

STARTED = re.compile(r"\] started \{.*\}\{([a-z]+)\}\{\d+\.\d+\.\d+[^}]*\}(?:.*\{zone=([\w-]+)\})?")
STILL_AWAY = datetime.max


class Away(NamedTuple):
    node: str
    stopped: datetime
    started: datetime  # STILL_AWAY: no "started" line after the stop yet
    roles: str  # Elasticsearch's letters: "m" for master-eligible
    zone: str | None


def log_of(info: dict[str, Any], name: str) -> Path:
    return Path(info["inventory"]).parent / "hosts" / name / "node" / "logs" / "sandbox.log"


def marks(info: dict[str, Any]) -> dict[str, int]:
    """How many lines each node's log has now: a test's "before"."""
    return {n["name"]: len(log_of(info, n["name"]).read_text().splitlines()) for n in info["nodes"]}


def away_since(info: dict[str, Any], before: dict[str, int]) -> list[Away]:
    """Every time a node was away since ``before``, in the order they began."""
    out = []
    for name, mark in before.items():
        lines = log_of(info, name).read_text().splitlines()[mark:]
        for i, line in enumerate(lines):
            if not line.endswith("] stopping ..."):
                continue
            started = next((s for s in lines[i:] if "] started {" in s), None)
            found = STARTED.search(started) if started else None
            out.append(Away(name, logged_at(line), logged_at(started) if started else STILL_AWAY,
                            found.group(1) if found else "", found.group(2) if found else None))
    return sorted(out, key=lambda a: a.stopped)


def logged_at(line: str) -> datetime:
    return datetime.strptime(line[1:24], "%Y-%m-%dT%H:%M:%S,%f")


def overlapping(away: list[Away]) -> list[tuple[Away, Away]]:
    """The pairs of times away of two nodes that overlap."""
    return [(a, b) for a, b in itertools.combinations(away, 2)
            if a.node != b.node and a.stopped < b.started and b.stopped < a.started]


def assert_one_node_away_at_a_time(away: list[Away]) -> None:
    assert away, "no node was away"
    assert not overlapping(away), f"two nodes were down at once, by their own logs: {overlapping(away)}"
