"""`orchestrate fleet`: several clusters, a canary then waves (orchestrator/fleet.py; the fleet file's form is
config/fleet.py's, shared with the Airflow fleet DAG)."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from orchestrator.cli.output import confirm, emit_json, emit_summary, exit_fields, terminal
from orchestrator.cli.render import EVENT_SCHEMA, event_line, summary_line
from orchestrator.cli.restart_cmd import ByOpt, JsonOpt
from orchestrator.restart.plan import Mode

if TYPE_CHECKING:
    from orchestrator.fleet import FleetResult
    from orchestrator.restart.events import Event

app = typer.Typer(help="Restart a fleet of clusters: a canary cluster, then waves of clusters, at most "
                       "`concurrency` of a wave at once, stopping at the first failure (docs/pipelines.md, "
                       "\"Fleets\").", no_args_is_help=True)

FleetFileArg = typer.Argument(..., metavar="FLEET_FILE", help="The fleet: canary, waves (lists of inventory names, "
                                                            "as --cluster NAME) and concurrency, in YAML.")


@app.command("restart")
def restart(fleet_file: Path = FleetFileArg, by: Mode = ByOpt, json_out: bool = JsonOpt,
            yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation.")) -> None:
    """Restart every cluster of the fleet: the canary alone, then each wave once every cluster before it
    succeeded. Each cluster's run is `orchestrate restart --yes` with its own lock, journal and preflight
    (a cluster whose plan is unsafe fails, and the fleet stops there). Exit 0 when every cluster succeeded, else
    the first failure's code; `orchestrate fleet resume FLEET_FILE` goes on."""
    from orchestrator.config.fleet import load_fleet
    from orchestrator.fleet import new_fleet_id

    fleet = load_fleet(fleet_file)
    stages = " then ".join(", ".join(stage) for stage in fleet.stages())
    confirm(yes, f"Restart {len(fleet.clusters())} clusters, {stages}?", "restart a fleet")
    run(fleet_file, new_fleet_id(fleet_file), by, json_out)


@app.command("resume")
def resume(fleet_file: Path = FleetFileArg, by: Mode = ByOpt, json_out: bool = JsonOpt) -> None:
    """Go on with the fleet's last run: a cluster whose run succeeded is left alone, one whose run stopped or
    failed is resumed (`orchestrate resume`), one never begun is begun."""
    from orchestrator.fleet import last_fleet_id

    run(fleet_file, last_fleet_id(fleet_file), by, json_out)


def run(fleet_file: Path, fleet_id: str, by: Mode, json_out: bool) -> None:
    from orchestrator import api
    from orchestrator.config.fleet import load_fleet
    from orchestrator.fleet import restart_fleet

    fleet = load_fleet(fleet_file)
    cancel = api.Cancel()

    def said(cluster: str, event: Event) -> None:
        if json_out:
            emit_json({**event_line(event, None), "cluster": cluster}, result=False)
        elif event.kind in ("run", "batch", "warning", "undo"):
            terminal.err.print(f"{cluster}: {event.message}", markup=False, highlight=False)

    # Ctrl-C or SIGTERM: each cluster's run stops at its next safe point, and no cluster more is begun.
    previous = {s: signal.signal(s, lambda *_: cancel.cancel("stopped by the operator")) for s in
                (signal.SIGINT, signal.SIGTERM)}
    try:
        result = restart_fleet(fleet, fleet_id, on_event=said, by=by.value, cancel=cancel)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    show(result, json_out)
    if result.exit_code:
        raise typer.Exit(result.exit_code)


def show(result: FleetResult, json_out: bool) -> None:
    from rich.table import Table
    from rich.text import Text

    if json_out:
        emit_summary({**summary_line(result.to_json()), **exit_fields(None, result.exit_code),
                      "schema": EVENT_SCHEMA})
        return
    table = Table(title=Text(f"Fleet run {result.fleet_id}: {'SUCCEEDED' if result.succeeded else 'FAILED'}"),
                  title_justify="left", show_edge=False)
    for column in ("cluster", "result", "run", "said"):
        table.add_column(column)
    for c in result.clusters:
        table.add_row(Text(c.cluster), c.result, Text(c.run_id or "-"), Text(c.message[:300] or "-"),
                      style="green" if "succeeded" in c.result else "red" if c.result == "failed" else None)
    terminal.err.print(table)
