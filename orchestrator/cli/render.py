"""Showing a run: a live view on a terminal, one line per event otherwise, JSON lines with --json."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from orchestrator.cli.output import emit_json, terminal, terminal_safe
from orchestrator.units import counted, human_duration

# rich is imported where a table or view is made, and the rest are types only: a TAB of shell completion
# imports this module, and must pay neither for rich nor for a product.
if TYPE_CHECKING:
    from rich.console import Group
    from rich.live import Live
    from rich.table import Table

    from orchestrator.restart.events import Event
    from orchestrator.restart.plan import Plan
    from orchestrator.restart.product import Column


def plan_table(plan: Plan, steps: list[str], columns: Sequence[Column], problems: bool = True) -> Group:
    """The plan as `plan` shows it. ``problems``: its UNSAFE lines too (a refusal says them itself, once)."""
    from rich.console import Group, RenderableType
    from rich.table import Table
    from rich.text import Text

    verdict = Text("SAFE", style="bold green") if plan.safe else Text("UNSAFE", style="bold red")
    batches = counted(len(plan.batches), "batch")
    head = Text.assemble(f"Plan for cluster {plan.cluster} ({plan.mode.value} mode): {batches}, "
                         f"estimated {human_duration(plan.estimate_s)}  ", verdict)
    table = Table(show_edge=False, pad_edge=False)
    for col in ("#", "batch", "nodes", *(c.header for c in columns), "estimate"):
        table.add_column(col, justify="left" if col in ("batch", "nodes") else "right")
    for b in plan.batches:
        shown = (c.value(b.figures) for c in columns)
        cells = (str(b.number), b.label, ", ".join(b.nodes), *shown, human_duration(b.estimate_s))
        table.add_row(*(Text(terminal_safe(c)) for c in cells), style="red" if b.problems else None)
    lines: list[RenderableType] = [head, table, Text("Steps of each batch: " + " -> ".join(steps)),
             Text("Settings changed, and restored exactly afterwards:")]
    for s in plan.settings:
        before = "unset" if s.before is None else str(s.before)
        lines.append(Text(terminal_safe(f"  {s.key} ({s.scope}): {before} -> {s.during}, {s.when}")))
        if s.why:
            lines.append(Text(terminal_safe(f"      {s.why}"), style="dim"))
    lines.append(Text("Host tuning: " + "; ".join(plan.tuning)))
    if plan.gate is not None:
        lines.append(Text(f"Before each batch: {plan.gate.stable_samples} healthy sample(s) in a row; "
                          f"the run stops after {human_duration(plan.gate.unhealthy_s)} unhealthy"))
    # A node's, index's or plugin's name comes from the cluster: its control characters are shown, not sent.
    lines += [Text(terminal_safe(f"Note: {n}")) for n in plan.notes]
    for p in plan.all_problems() if problems else ():
        lines.append(Text(terminal_safe(f"UNSAFE: {p}"), style="red"))
    return Group(*lines)


# The JSON lines of `--json` (docs/events.schema.json): bumped when a field changes meaning or goes.
EVENT_SCHEMA = 1


def event_line(event: Event, run_id: str | None) -> dict[str, Any]:
    """One event as a `--json` line: `event` names its type, empty fields are left out."""
    fields = {k: v for k, v in asdict(event).items() if k != "kind" and v not in (None, {}, "")}
    return {"schema": EVENT_SCHEMA, "event": event.kind, **({"run_id": run_id} if run_id else {}), **fields}


def summary_line(summary: dict[str, Any]) -> dict[str, Any]:
    return {"schema": EVENT_SCHEMA, "event": "summary", **summary}


class RunView:
    """Receives the engine's events and shows them in the mode that fits where output goes."""

    def __init__(self, as_json: bool, nodes: list[str] | None = None) -> None:
        self.as_json = as_json
        self.live_mode = not as_json and sys.stderr.isatty() and not terminal.quiet
        self.nodes: dict[str, dict[str, Any]] = {n: {"phase": "pending", "since": None, "batch": None}
                                                 for n in (nodes or [])}
        self.eta_s: float | None = None
        self.eta_at = 0.0  # when eta_s was said: the ETA shown counts down from it until the next one
        self.last_message = ""
        self.started = time.monotonic()
        self.live: Live | None = None
        self.lock = threading.Lock()
        self.waiting = ""
        self.searches = ""  # what searchers see now (restart/search_watch.py), in the title
        self.run_id: str | None = None  # from the run's first event, stamped on every line after it

    def __enter__(self) -> RunView:
        if self.live_mode:
            from rich.live import Live

            # Transient: at the end the report's table (`_finish`) takes its place, not a second table under it.
            self.live = Live(get_renderable=self.render, console=terminal.err, refresh_per_second=2, transient=True)
            self.live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.live is not None:
            self.live.__exit__(None, None, None)

    def __call__(self, event: Event) -> None:
        with self.lock:
            if event.node:
                state = self.nodes.setdefault(event.node, {"phase": "pending", "since": None, "batch": None})
                if event.phase:
                    state["phase"], state["since"], state["batch"] = event.phase, time.monotonic(), event.batch
                    state["detail"] = ""
                elif event.kind == "wait":  # what the node's phase waits on (recovery progress, say)
                    state["detail"] = event.message.removeprefix(f"{event.node}: ")
            if event.eta_s is not None:
                self.eta_s, self.eta_at = event.eta_s, time.monotonic()
            self.last_message = event.message
            # What the run waits for (blocking shards and why), shown under the table until it moves on.
            if event.kind == "search":
                self.searches = event.message
            elif event.kind == "wait":
                self.waiting = event.message
            elif event.kind in ("phase", "batch", "step", "run"):
                self.waiting = ""
        if self.as_json:
            self.run_id = str(event.data.get("run_id") or self.run_id or "") or None
            emit_json(event_line(event, self.run_id), result=False)
        elif terminal.quiet:
            if event.kind in ("warning", "undo") or event.ends_run:
                terminal.err.print(terminal_safe(event.message), markup=False)
        elif not self.live_mode:
            stamp = time.strftime("%H:%M:%S", time.localtime(event.at))
            terminal.err.print(f"{stamp} {event.kind:<7} {terminal_safe(event.message)}", markup=False, highlight=False)
        elif event.kind in ("warning", "run", "batch", "undo") and not self.said_by_the_command(event):
            terminal.err.print(terminal_safe(event.message), markup=False)

    @staticmethod
    def said_by_the_command(event: Event) -> bool:
        """A run that ends otherwise than succeeded is said once, by the command's own last line (`aborted: ...`,
        `error: ...`), not also as the event that ended it."""
        return event.ends_run and event.data.get("result") not in ("succeeded", "deferred")

    def eta_now(self) -> float | None:
        """The last ETA said, less the time since (never below zero): it moves between batches' ends."""
        return None if self.eta_s is None else max(self.eta_s - (time.monotonic() - self.eta_at), 0.0)

    def render(self) -> Table:
        from rich.table import Table
        from rich.text import Text

        table = Table(title=f"elapsed {human_duration(time.monotonic() - self.started)}  ETA "
                            f"{human_duration(self.eta_now())}" + (f"  {self.searches}" if self.searches else ""),
                      title_justify="left", show_edge=False,
                      caption=Text(self.waiting[:500]) if self.waiting else None, caption_justify="left")
        for col in ("node", "batch", "phase", "in phase", "waiting on"):
            table.add_column(col)
        with self.lock:
            for name, st in self.nodes.items():
                since = human_duration(time.monotonic() - st["since"]) if st["since"] else "-"
                style = "green" if st["phase"] == "done" else ("yellow" if st["phase"] != "pending" else None)
                table.add_row(Text(name), str(st["batch"] or "-"), st["phase"], since, Text(st.get("detail", "")),
                              style=style)
        return table


def report_table(summary: dict[str, Any], columns: Sequence[Column]) -> Table:
    from rich.table import Table
    from rich.text import Text

    # Text, never markup: a run id or a name read from a journal or a cluster is shown as it is.
    table = Table(title=Text(f"Run {summary['run_id']} on {summary['cluster']}: {summary['result'].upper()} in "
                             f"{human_duration(summary['duration_s'])}"), title_justify="left", show_edge=False)
    # An upgrade's install and a host's reboot get their own columns, when a node has them.
    phases = [p for p in ("stop", "install", "reboot", "start", "join", "recovery")
              if p not in ("install", "reboot") or any(p in n["phases"] for n in summary["nodes"])]
    for col in ("node", "restarted", *phases, *(c.header for c in columns)):
        table.add_column(col, justify="left" if col == "node" else "right")
    for n in summary["nodes"]:
        p = n["phases"]
        shown = (c.value(n["recovery"]) for c in columns)
        table.add_row(Text(str(n["name"])), "yes" if n["restarted"] else "no",
                      *(human_duration(p.get(k), fine=True) if k in p else "-" for k in phases), *shown)
    return table
