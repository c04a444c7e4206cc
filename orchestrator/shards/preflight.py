"""Preflight findings: what someone or something left in the cluster that a rolling restart must not
walk into. Pure: read from the snapshot's `Preflight` part, each finding a sentence naming what it
found and what to do. Problems refuse the run (nothing is changed); warnings are said in the plan.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from orchestrator.shards.privileges import refusal
from orchestrator.units import parse_size

WATERMARK_LOW = "cluster.routing.allocation.disk.watermark.low"
WATERMARK_HIGH = "cluster.routing.allocation.disk.watermark.high"
THRESHOLD_ENABLED = "cluster.routing.allocation.disk.threshold_enabled"
PREFLIGHT_SETTINGS = (WATERMARK_LOW, WATERMARK_HIGH, THRESHOLD_ENABLED)
DEFAULT_WATERMARKS = {WATERMARK_LOW: "85%", WATERMARK_HIGH: "90%"}  # Elasticsearch's own defaults
ALLOCATION_FILTERS = re.compile(r"cluster\.routing\.allocation\.(exclude|include|require)\.(.+)")


@dataclass(frozen=True)
class DiskUsage:
    node: str  # node name
    used_percent: float
    available_bytes: int


@dataclass(frozen=True)
class Preflight:
    """What the plan reads besides nodes and shards (the gate does not need it)."""

    disk: tuple[DiskUsage, ...] = ()
    disk_settings: dict[str, str] = field(default_factory=dict)  # watermarks and threshold_enabled in force
    index_blocks: dict[str, tuple[str, ...]] = field(default_factory=dict)  # index -> block descriptions
    global_blocks: tuple[str, ...] = ()
    shutdowns: tuple[str, ...] = ()  # "node (type)" of every node shutdown record
    running_snapshots: tuple[str, ...] = ()  # "repository:snapshot (state)"
    # The privileges the connecting user lacks (shards/privileges.py); None: not checked (no security API).
    missing_privileges: tuple[str, ...] | None = ()

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> Preflight:
        """From a saved snapshot file: every field checked for its type (a file may be anything)."""
        disk = tuple(DiskUsage(**d) for d in raw.get("disk", ()))
        if not all(isinstance(d.node, str) and isinstance(d.used_percent, int | float)
                   and isinstance(d.available_bytes, int) for d in disk):
            raise TypeError("preflight.disk: node (text), used_percent and available_bytes (numbers)")
        texts = {key: tuple(raw.get(key, ())) for key in ("global_blocks", "shutdowns", "running_snapshots")}
        blocks = {k: tuple(v) for k, v in dict(raw.get("index_blocks", {})).items()}
        settings = dict(raw.get("disk_settings", {}))
        if not all(isinstance(v, str) for v in (*settings, *settings.values(), *blocks,
                                                 *(b for v in blocks.values() for b in v),
                                                 *(t for v in texts.values() for t in v))):
            raise TypeError("preflight: blocks, shutdowns, snapshots and disk settings must be text")
        privileges = raw.get("missing_privileges", ())
        missing = None if privileges is None else tuple(str(p) for p in privileges)
        return cls(disk=disk, disk_settings=settings, index_blocks=blocks, missing_privileges=missing, **texts)


def watermark_exceeded(watermark: str, used_percent: float, available_bytes: int) -> bool | None:
    """Whether a node is past a disk watermark given as a percentage, a ratio or free bytes (None:
    a value this tool cannot read)."""
    text = str(watermark).strip().lower()
    try:
        if text.endswith("%"):
            return used_percent >= float(text[:-1])
        if re.fullmatch(r"[0-9]*\.?[0-9]+", text):
            return used_percent >= float(text) * 100
        return available_bytes <= parse_size(text)
    except ValueError:
        return None


def disk_findings(pre: Preflight) -> tuple[list[str], list[str]]:
    problems: list[str] = []
    warnings: list[str] = []
    if str(pre.disk_settings.get(THRESHOLD_ENABLED, "true")).lower() == "false":
        return problems, warnings  # Elasticsearch itself ignores the watermarks
    marks = {**DEFAULT_WATERMARKS, **pre.disk_settings}
    for d in pre.disk:
        where = f"node {d.node} has {d.used_percent:.0f}% of its disk used ({d.available_bytes / 2**30:.1f} GiB free)"
        if watermark_exceeded(marks[WATERMARK_HIGH], d.used_percent, d.available_bytes):
            problems.append(f"{where}, past the high disk watermark ({marks[WATERMARK_HIGH]}): Elasticsearch moves "
                            "shards away from it and may not allocate its copies back after a restart. Free disk "
                            "space first.")
        elif watermark_exceeded(marks[WATERMARK_LOW], d.used_percent, d.available_bytes):
            warnings.append(f"{where}, past the low disk watermark ({marks[WATERMARK_LOW]}): no new replica is "
                            "allocated to it, so recoveries onto it may wait.")
    for key in (WATERMARK_LOW, WATERMARK_HIGH):
        if watermark_exceeded(marks[key], 0, 0) is None:
            warnings.append(f"the disk watermark {key}={marks[key]!r} could not be read; disk use was not checked "
                            "against it")
    return problems, warnings


def preflight_findings(pre: Preflight, settings: dict[str, object]) -> tuple[list[str], list[str]]:
    """(problems, warnings) for the whole cluster. ``settings``: persistent and transient, transient last."""
    problems, warnings = disk_findings(pre)
    if pre.global_blocks:
        problems.append(f"the cluster has a global block: {'; '.join(pre.global_blocks)}. Find why and lift it "
                        "first (a full disk sets one).")
    if pre.index_blocks:
        shown = "; ".join(f"{i} ({', '.join(b)})" for i, b in sorted(pre.index_blocks.items())[:5])
        more = f" and {len(pre.index_blocks) - 5} more" if len(pre.index_blocks) > 5 else ""
        warnings.append(f"index block(s) in place: {shown}{more}. Writes to them fail; a read-only-allow-delete "
                        "block usually means a disk passed the flood-stage watermark.")
    filters = sorted(f"{k}={v}" for k, v in settings.items() if ALLOCATION_FILTERS.fullmatch(k) and v not in ("", None))
    if filters:
        warnings.append(f"allocation filter(s) left in place: {', '.join(filters[:5])}. Shards keep moving as they "
                        "say during the run; remove them if nobody is draining a node on purpose.")
    if pre.shutdowns:
        problems.append(f"node shutdown record(s) left in place: {', '.join(pre.shutdowns[:5])}. They change how "
                        "Elasticsearch treats a leaving node; delete them (DELETE _nodes/NODE_ID/shutdown) or finish "
                        "what they were for first.")
    if pre.missing_privileges:
        problems.append(refusal(pre.missing_privileges))
    elif pre.missing_privileges is None:
        warnings.append("privileges not checked: the cluster has no security API (security off or not installed)")
    if pre.running_snapshots:
        problems.append(f"a snapshot is running: {', '.join(pre.running_snapshots[:5])}. Stopping a node fails "
                        "its shards' part of it; wait until it finishes.")
    return problems, warnings
