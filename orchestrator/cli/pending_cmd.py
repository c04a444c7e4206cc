"""`orchestrate pending`: which nodes need a restart, and why (read-only; for cron and monitoring)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from orchestrator.cli.output import emit_json, emit_summary, exit_fields, terminal, terminal_safe
from orchestrator.cli.render import summary_line
from orchestrator.cli.restart_cmd import ClusterOpt, ConfigOpt, JsonOpt
from orchestrator.cli.tune_cmd import NodesOpt

if TYPE_CHECKING:  # what runs is imported when a command runs, not for `--help` or a TAB of completion
    from orchestrator.runs.pending import PendingReport


def pending(cluster: str = ClusterOpt, config: Path = ConfigOpt, json_out: bool = JsonOpt,
            nodes: list[str] = NodesOpt,
            textfile: Path = typer.Option(None, "--metrics-textfile", metavar="PATH",
                                          help="Also write orchestrator_node_restart_pending{cluster,node,reason} "
                                               "there, for node_exporter's textfile collector "
                                               "(docs/metrics.md has an alert rule).")) -> None:
    """Which nodes run something other than what is installed and configured, and why: read-only.

    For each node, each reason with its evidence: **version** (the installed package, or the home's
    jar, differs from what the node runs), **configuration** (a file it reads at start changed after it
    started; for its settings file, the settings that differ), **replaced code** (the process maps a
    library or jar since deleted or replaced; needrestart's verdict where it is installed), **reboot**
    (/run/reboot-required, or a newer kernel installed than the running one). What cannot be read is
    said as unknown, never as clean. `orchestrate docs pending` says how each is read.

    Exit 0 when no node needs a restart and every node was read; 1 when a node needs one; 9 when none is
    known to but some could not be read. `plan --pending` and `restart --pending` restart only the
    pending nodes.
    """
    from orchestrator.config.inventory import load_inventory
    from orchestrator.runs.pending import pending_of, write_textfile
    from orchestrator.runs.plans import patterns
    from orchestrator.tuning.apply import for_nodes

    inv, _ = load_inventory(cluster, config)
    names = [n.name for n in for_nodes(inv, patterns(nodes, "--nodes"))] if nodes else None
    report = pending_of(inv, names)
    if textfile is not None:
        write_textfile(report, textfile)
    if json_out:
        for node in report.nodes:
            emit_json(node.to_json())
        emit_summary({**summary_line(report.summary()), **exit_fields(None, report.exit_code)})
    else:
        show(report)
    if report.exit_code:
        raise typer.Exit(report.exit_code)


def show(report: PendingReport) -> None:
    from rich.table import Table
    from rich.text import Text

    table = Table(show_edge=False)
    for col in ("node", "state", "why"):
        table.add_column(col)
    styles = {"pending": "yellow", "unknown": "red", "clean": None}
    for node in report.nodes:
        why = [str(r) for r in node.reasons] + [f"unknown: {u}" for u in node.unknown]
        table.add_row(Text(node.node), Text(node.state), Text(terminal_safe("\n".join(why) or "-")),
                      style=styles[node.state])
    terminal.out.print(table)
    pending, unknown = report.pending, report.unknown
    terminal.out.print(Text(terminal_safe(
        (f"{len(pending)} of {len(report.nodes)} node(s) need a restart: `orchestrate restart --pending "
         f"--cluster {report.cluster}`" if pending else f"no node of {report.cluster} needs a restart")
        + (f"; {len(unknown)} could not be read" if unknown else ""))))
