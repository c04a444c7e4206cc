"""The run report: where the time went, per node and phase, from the journal.

`timeline` turns the journal's wall-clock phase boundaries into bars, `model` gathers everything
the page shows (pure), and `html` renders it with a Jinja2 template that escapes every value: a
self-contained page (inline SVG and CSS, no script, nothing fetched).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from orchestrator.restart.journal import SERIES_FIELDS, Journal, NodeRecord, RunState, UndoRecord, UndoState
from orchestrator.restart.phases import Phase
from orchestrator.restart.product import Column
from orchestrator.restart.search_figures import held_ms
from orchestrator.units import human_bytes, human_duration

# (phase shown, key where it starts, key where it ends, colour)
PHASES = (
    ("stop", "stopping", "stopped", "#d9534f"),
    ("tune", "stopped", "tuned", "#9b59b6"),
    ("start", "starting", "start_issued", "#f0ad4e"),
    ("join", "start_issued", "joined", "#5bc0de"),
    ("recovery", "recovering", "done", "#5cb85c"),
)
FAILED_COLOUR = "#b00020"
TIMELINE_WIDTH, LABEL_WIDTH, ROW_HEIGHT = 860, 150, 26
LABEL_ROOM = 90  # pixels a state's label needs ("not reached", "recovering") at 12 px


@dataclass(frozen=True)
class Bar:
    node: str
    batch: int
    phase: str
    start: float
    end: float
    colour: str


def timeline(journal: Journal) -> list[Bar]:
    bars = []
    for rec in journal.nodes.values():
        marks = rec.started_at
        for phase, start_key, end_key, colour in PHASES:
            if start_key in marks and end_key in marks and marks[end_key] >= marks[start_key]:
                bars.append(Bar(rec.name, rec.batch, phase, marks[start_key], marks[end_key], colour))
    return sorted(bars, key=lambda b: (b.batch, b.node, b.start))


def totals(journal: Journal) -> dict[str, Any]:
    nodes = list(journal.nodes.values())
    peers = sum(r.recovery.get("bytes_from_peers", 0) for r in nodes)
    reused = sum(r.recovery.get("bytes_reused", 0) for r in nodes)
    end = journal.finished or journal.updated
    return {
        "run_id": journal.run_id, "cluster": journal.cluster, "state": journal.state.value, "mode": journal.mode,
        "duration_s": round(end - journal.created, 1), "batches": len(journal.batches),
        "nodes_restarted": sum(1 for r in nodes if r.restarted), "nodes": len(nodes),
        "bytes_from_peers": peers, "bytes_reused": reused,
        "reuse_ratio": round(reused / (peers + reused), 4) if peers + reused else None,
        "cluster_calls": journal.cluster_calls, "plan_estimate_s": journal.plan.estimate_s,
    }


def node_state(journal: Journal, rec: NodeRecord) -> str:
    """done, not reached, failed (the run failed with it under way), stopped (an abort while it was away),
    its phase when an abort found it back (joined, recovering: as the CLI says it), or in progress."""
    if rec.phase == Phase.DONE:
        return "done"
    if rec.phase == Phase.PENDING:
        return "not reached"
    if journal.state is RunState.FAILED:
        return "failed"
    if journal.state in (RunState.ABORTED, RunState.STOPPED, RunState.ABANDONED):
        # A node that came back before the run stopped is back: its phase, as the CLI says it.
        return str(rec.phase) if rec.phase in (Phase.JOINED, Phase.RECOVERING) else "stopped"
    return "in progress"


def wall_clock(at: float, tenths: bool = False) -> str:
    shown = time.strftime("%H:%M:%S", time.localtime(at))
    return f"{shown}.{int(at * 10) % 10}" if tenths else shown


TICK_STEPS = (0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200,
              86400)


def even_ticks(origin: float, span: float, most: int = 8) -> list[tuple[float, float]]:
    """(time, step) of each axis tick: a round step (1 s, 5 s, 1 min, 15 min, ...), on round times."""
    step = next((s for s in TICK_STEPS if span / s <= most), TICK_STEPS[-1] * (span // (TICK_STEPS[-1] * most) + 1))
    first = -(-origin // step) * step  # the first round time at or after the origin
    count = int((origin + span - first) // step) + 1
    return [(first + k * step, step) for k in range(max(count, 0))]


def time_zone(at: float) -> str:
    return time.strftime("%Z (UTC%z)", time.localtime(at))


def model(journal: Journal, columns: Sequence[Column] = ()) -> dict[str, Any]:
    """Everything the page shows, as plain values (pure)."""
    bars = timeline(journal)
    t = totals(journal)
    end = journal.finished or journal.updated
    origin = min([b.start for b in bars] + [journal.created])
    span = max([b.end for b in bars] + [end]) - origin or 1.0

    def x(at: float) -> float:
        return round(LABEL_WIDTH + (at - origin) / span * TIMELINE_WIDTH, 1)

    records = sorted(journal.nodes.values(), key=lambda r: (r.batch, r.name))
    rows = []
    for i, rec in enumerate(records):
        state = node_state(journal, rec)
        drawn = [{"x": x(b.start), "w": max(round((b.end - b.start) / span * TIMELINE_WIDTH, 1), 2.0),
                  "colour": b.colour, "title": f"{rec.name} {b.phase}: {human_duration(b.end - b.start, fine=True)} "
                                               f"({wall_clock(b.start)}-{wall_clock(b.end)})"}
                 for b in bars if b.node == rec.name]
        failure = None
        if state in ("failed", "stopped"):
            since = max(rec.started_at.values(), default=end)
            left, width = x(since), max(round((end - since) / span * TIMELINE_WIDTH, 1), 6.0)
            # Its label after the mark, or before it where it would run past the picture's edge.
            after = LABEL_WIDTH + TIMELINE_WIDTH + 40 - (left + width + 4) >= LABEL_ROOM
            failure = {"x": left, "w": width, "title": f"{rec.name} {state} here: {journal.said()}",
                       "label_x": left + width + 4 if after else left - 4, "anchor": "start" if after else "end"}
        rows.append({"name": rec.name, "batch": rec.batch, "state": state, "y": 30 + i * ROW_HEIGHT, "bars": drawn,
                     "failure": failure, "restarted": rec.restarted,
                     "phases": [human_duration(rec.phases[p], fine=True) if p in rec.phases else "-"
                                for p, *_ in PHASES],
                     "figures": [c.value(rec.recovery) for c in columns]})
    ticks = [{"x": x(at), "label": wall_clock(at, step < 1)} for at, step in even_ticks(origin, span)]
    # Where the run was interrupted (its end before a resume) and resumed: a dashed line across the timeline each.
    history = journal.history
    breaks = [{"x": x(h.at), "label": h.event, "title": f"{h.event} at {wall_clock(h.at)}: {h.message}"}
              for i, h in enumerate(history)
              if h.event == "resumed" or (i + 1 < len(history) and history[i + 1].event == "resumed")]
    peers_reused = [(r.name, r.recovery.get("bytes_from_peers", 0), r.recovery.get("bytes_reused", 0))
                    for r in records]
    most = max([p + u for _, p, u in peers_reused] + [1])
    recovery = [{"name": name, "y": 20 + i * ROW_HEIGHT, "peers_w": round(p / most * 600, 1),
                 "reused_w": round(u / most * 600, 1), "label": f"{human_bytes(p)} copied, {human_bytes(u)} reused"}
                for i, (name, p, u) in enumerate(peers_reused)]
    settings = settings_rows(journal)
    ratio = t["reuse_ratio"]
    summary = [
        ("result", journal.state.value),
        ("batches done", f"{sum(1 for b in journal.batches if b.state == 'done')} of {len(journal.batches)}"),
        ("nodes restarted", f"{t['nodes_restarted']} of {t['nodes']}"),
        ("duration", human_duration(t["duration_s"])),
        ("plan's estimate", human_duration(t["plan_estimate_s"])),
        ("copied from peers", human_bytes(t["bytes_from_peers"])),
        ("reused from the nodes' disks", human_bytes(t["bytes_reused"])
         + (f" ({ratio * 100:.0f}% of what recovered)" if ratio is not None else "")),
        ("settings changed", f"{len(settings)}, {sum(1 for s in settings if s['restored'])} restored"),
        ("requests to the cluster", str(t["cluster_calls"])),
    ]
    return {
        "journal": journal, "state": journal.state.value, "failed": journal.state is not RunState.SUCCEEDED,
        "started": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(journal.created)),
        "zone": time_zone(journal.created), "summary": summary, "rows": rows, "ticks": ticks, "breaks": breaks,
        "searches": search_plot(journal, x),
        "phases": [(p, c) for p, *_, c in PHASES], "columns": [c.header for c in columns],
        "recovery": recovery, "settings": settings, "failed_colour": FAILED_COLOUR,
        "not_persisted": not_persisted(journal),
        "history": [{"at": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(h.at)), "event": h.event,
                     "message": h.message} for h in journal.history],
        "width": LABEL_WIDTH + TIMELINE_WIDTH + 40, "height": 60 + len(rows) * ROW_HEIGHT,
        "recovery_height": 30 + len(recovery) * ROW_HEIGHT, "label_width": LABEL_WIDTH,
    }


PLOT_HEIGHT = 120  # the searches' plot, its drawing area in pixels


def search_plot(journal: Journal, x: Any) -> dict[str, Any] | None:
    """What searchers saw through the run, over the timeline's own time axis: the time the latency budget holds
    (the probe's where the run timed one, else the slowest node's query time) and its baseline, dashed, and the
    recovery rate where the latency budget moved it. None: not watched."""
    points = [dict(zip(SERIES_FIELDS, p, strict=False)) for p in journal.search.get("series", [])
              if isinstance(p, list) and p and isinstance(p[0], int | float)]
    by_probe = any(isinstance(p.get("probe_ms"), int | float) for p in points)
    latency = [(p["at"], ms) for p in points if isinstance(ms := held_ms(p, by_probe), int | float)]
    if not latency:
        return None
    base_ms = held_ms(journal.search.get("baseline") or {}, by_probe)
    top_ms = max([ms for _, ms in latency] + [base_ms or 0]) or 1.0
    rates = [(p["at"], p["rate"]) for p in points if isinstance(p.get("rate"), int) and p["rate"] > 0]
    top_rate = max([r for _, r in rates] + [1])

    def y(value: float, top: float) -> float:
        return round(10 + PLOT_HEIGHT * (1 - value / top), 1)

    return {"latency": " ".join(f"{x(at)},{y(ms, top_ms)}" for at, ms in latency),
            "rate": " ".join(f"{x(at)},{y(r, top_rate)}" for at, r in rates),
            "baseline_y": y(base_ms, top_ms) if isinstance(base_ms, int | float) else None,
            "top_ms": f"{top_ms:.1f} ms", "measure": "the probe's time" if by_probe else "slowest node's query time",
            "top_rate": f"{human_bytes(top_rate)}/s" if rates else "",
            "height": PLOT_HEIGHT + 40}


STATE_SAID = {"restored": "restored", "applied": "STILL SET", "intended": "maybe set"}


def settings_rows(journal: Journal) -> list[dict[str, Any]]:
    """One row per setting the run changed: a setting set again after a stop and a resume is one row (its first
    value before, its last state), and a setting of many objects (an undo key `OBJECT/KEY`, as an index's own
    setting) is one row that counts them."""
    groups: dict[tuple[str, str], list[UndoRecord]] = {}
    for u in journal.undo:
        owner, _, key = u.key.rpartition("/")
        groups.setdefault((key if owner else u.key, u.scope), []).append(u)
    rows = []
    for (key, scope), records in groups.items():
        owners = {u.key for u in records}
        first, last = records[0], records[-1]
        open_ = [u for u in records if u.state is not UndoState.RESTORED]
        state = open_[-1].state.value if open_ else "restored"
        rows.append({"key": key, "scope": scope if len(owners) == 1 else f"{scope} ({len(owners)})",
                     "before": "unset" if first.before is None else ("each its own" if len(owners) > 1
                                                                      else str(first.before)),
                     "during": str(last.applied), "batch": last.batch or "run", "restored": not open_,
                     "state": STATE_SAID[state] + (f" (set {len(records)} times)" if len(owners) == 1 < len(records)
                                                   else "")})
    return rows


def not_persisted(journal: Journal) -> list[dict[str, str]]:
    """Host knobs a reboot reverted (`restart --reboot`): the boot's value and what the run set again."""
    return [{"node": rec.name, "knob": c.knob, "booted": str(c.before.live),
             "fixed": str(c.after.live if c.after else None)}
            for rec in journal.nodes.values() for c in rec.host_changes if c.not_persisted]


def html(journal: Journal, columns: Sequence[Column] = ()) -> str:
    """The page; ``columns`` are the product's own figures per node (from each node's recovery record)."""
    from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

    env = Environment(loader=PackageLoader("orchestrator.restart", "templates"),
                      autoescape=select_autoescape(["html"]), undefined=StrictUndefined)
    return env.get_template("report.html").render(**model(journal, columns))
