"""The run report: where the time went, per node and phase, from the journal. Pure functions.

`timeline` turns the journal's wall-clock phase boundaries into bars; `html` renders a
self-contained page (inline SVG, no script, no external file) with the chart and the summary.
"""

from __future__ import annotations

import html as htmllib
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from orchestrator.restart.journal import Journal
from orchestrator.restart.product import Column

# (phase shown, key where it starts, key where it ends, colour)
PHASES = (
    ("stop", "stopping", "stopped", "#d9534f"),
    ("tune", "stopped", "tuned", "#9b59b6"),
    ("start", "starting", "start_issued", "#f0ad4e"),
    ("join", "start_issued", "joined", "#5bc0de"),
    ("recovery", "recovering", "done", "#5cb85c"),
)


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


def html(journal: Journal, columns: Sequence[Column] = ()) -> str:
    """The page; ``columns`` are the product's own figures per node (from each node's recovery record)."""
    bars = timeline(journal)
    t = totals(journal)
    esc = htmllib.escape
    origin = min((b.start for b in bars), default=journal.created)
    span = max((b.end for b in bars), default=origin + 1) - origin or 1.0
    rows = sorted({(b.batch, b.node) for b in bars})
    width, label_w, row_h = 900, 110, 26
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width + label_w + 20}" '
           f'height="{row_h * len(rows) + 40}" font-family="sans-serif" font-size="12">']
    for i, (batch, node) in enumerate(rows):
        y = 10 + i * row_h
        svg.append(f'<text x="4" y="{y + 16}">{esc(node)} (b{batch})</text>')
        for b in (b for b in bars if b.node == node):
            x = label_w + (b.start - origin) / span * width
            w = max((b.end - b.start) / span * width, 1.5)
            svg.append(f'<rect x="{x:.1f}" y="{y + 3}" width="{w:.1f}" height="{row_h - 8}" fill="{b.colour}">'
                       f'<title>{esc(node)} {b.phase}: {b.end - b.start:.1f} s</title></rect>')
    axis_y = 10 + len(rows) * row_h + 14
    for k in range(6):
        x = label_w + k * width / 5
        svg.append(f'<text x="{x:.0f}" y="{axis_y}" text-anchor="middle">{span * k / 5:.0f} s</text>')
    svg.append("</svg>")
    legend = " ".join(f'<span style="background:{c};padding:2px 8px;color:#fff">{p}</span>' for p, *_, c in PHASES)
    table = ["<table><tr><th>node</th><th>batch</th><th>restarted</th>"
             + "".join(f"<th>{p} (s)</th>" for p, *_ in PHASES) + "".join(f"<th>{esc(c.header)}</th>" for c in columns)
             + "</tr>"]
    for r in sorted(journal.nodes.values(), key=lambda r: (r.batch, r.name)):
        cells = "".join(f"<td>{r.phases.get(p, '')}</td>" for p, *_ in PHASES)
        figures = "".join(f"<td>{esc(c.value(r.recovery))}</td>" for c in columns)
        table.append(f"<tr><td>{esc(r.name)}</td><td>{r.batch}</td><td>{'yes' if r.restarted else 'no'}</td>{cells}"
                     f"{figures}</tr>")
    table.append("</table>")
    summary = "".join(f"<tr><th>{esc(k)}</th><td>{esc(str(v))}</td></tr>" for k, v in t.items())
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(journal.created))
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>Run {esc(journal.run_id)}</title>"
            "<style>body{font-family:sans-serif;margin:24px}table{border-collapse:collapse;margin:12px 0}"
            "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}th{background:#f4f4f4}</style></head>"
            f"<body><h1>Rolling restart of {esc(journal.cluster)}: {esc(journal.state.value)}</h1>"
            f"<p>Run {esc(journal.run_id)}, {esc(journal.mode)} mode, started {started}. {esc(journal.message)}</p>"
            f"<h2>Timeline</h2><p>{legend}</p>{''.join(svg)}<h2>Nodes</h2>{''.join(table)}"
            f"<h2>Summary</h2><table>{summary}</table></body></html>")
