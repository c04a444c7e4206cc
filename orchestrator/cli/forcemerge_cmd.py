"""`orchestrate forcemerge`: merge indices no longer written to, optionally followed by a rolling restart."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from orchestrator.cli.output import confirm, emit_json, emit_summary, exit_fields, say, terminal
from orchestrator.cli.render import RunView, summary_line
from orchestrator.cli.restart_cmd import ClusterOpt, run_and_report, show_and_confirm
from orchestrator.forcemerge.decide import Decision, Verdict
from orchestrator.restart.plan import Mode

if TYPE_CHECKING:  # what runs is imported when a command runs, not for `--help` or a TAB of completion
    from orchestrator.forcemerge.run import MergeReport
    from orchestrator.restart.journal import Journal
    from orchestrator.runs.target import Target

EXIT = {"success": 0, "partial": 10, "failure": 1}


def forcemerge(
    cluster: str = ClusterOpt,
    config: Path = typer.Option(None, "--config", help="Inventory file, instead of --cluster."),
    indices: str = typer.Option(..., "--indices", "-i", help="Index pattern, e.g. 'logs-2026.11.*'."),
    max_segments: int = typer.Option(5, "--max-segments", min=1, max=100, help="Target segments per shard."),
    concurrency: int = typer.Option(2, "--concurrency", min=1, max=16, help="Merges running at once."),
    include_write_indices: bool = typer.Option(False, "--include-write-indices",
                                               help="Also merge indices that are being written to."),
    then_restart: bool = typer.Option(False, "--then-restart", help="Then a rolling restart, in the same "
                                                                    "journaled (resumable) run."),
    by: Mode = typer.Option(Mode.NODE, "--by", help="With --then-restart: batch by node or zone."),
    dry_run: bool = typer.Option(False, "--dry-run", help="List what would be merged and skipped; change nothing."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation (needed off a terminal)."),
    json_out: bool = typer.Option(False, "--json", help="JSON lines, the last one the summary."),
) -> None:
    """Force-merge indices that are no longer written to, down to --max-segments per shard.

    Skips indices already at or below the target and refuses write indices (of an alias or data
    stream) and indices that receive writes, saying why. Each merge runs as a task in the cluster
    and is polled, so a long merge never hits a client or proxy timeout. Exit 0 success, 10
    partial (some merges failed), 1 failure.
    """
    from orchestrator.forcemerge.cluster import shard_cluster
    from orchestrator.forcemerge.run import plan_merges, run_merges
    from orchestrator.runs.target import open_target

    target = open_target(cluster, config)
    es = shard_cluster(target.cluster, target.name, target.product.name)
    decisions = plan_merges(es, indices, max_segments, include_write_indices)
    if dry_run:
        _show_decisions(decisions, json_out)
        return
    if then_restart:
        _merge_then_restart(target, decisions, indices, max_segments, concurrency, include_write_indices, by, yes,
                            json_out)
        return
    merging = [d for d in decisions if d.verdict == Verdict.MERGE]
    if merging:
        if not json_out:
            _show_decisions(decisions, False)
        confirm(yes, f"Force-merge {len(merging)} index(es) of {target.name}?", "force-merge")
    with RunView(json_out) as view:
        report = run_merges(es, decisions, max_segments, concurrency, view)
    _show_report(report, json_out)
    raise typer.Exit(EXIT[report.outcome])


def _merge_then_restart(target: Target, decisions: list[Decision], pattern: str, max_segments: int,
                        concurrency: int, include_write: bool, by: Mode, yes: bool, json_out: bool) -> None:
    from orchestrator.forcemerge import prelude
    from orchestrator.runs import plans
    from orchestrator.runs import restart as runs

    run_options = plans.options_for(target.inv.allow_yellow, False)
    the_plan = plans.make_plan(target, by, run_options)
    if not json_out:
        _show_decisions(decisions, False)
    show_and_confirm(target, the_plan, json_out, yes, "Force-merge, then restart?")
    merge = prelude.prelude_of(prelude.MergeRequest(pattern, max_segments, concurrency, include_write))

    def action(view: RunView) -> Journal:
        return runs.start(target, the_plan, run_options, view, merge)

    run_and_report(json_out, [n for b in the_plan.batches for n in b.nodes], action)


def _show_decisions(decisions: list[Decision], json_out: bool) -> None:
    from rich.table import Table
    from rich.text import Text

    if json_out:
        for d in decisions:
            emit_json({"index": d.index, "verdict": d.verdict.value, "reason": d.reason,
                       "segments_before": d.segments_before})
        return
    table = Table(show_edge=False, title="Force-merge plan", title_justify="left")
    for col in ("index", "segments/shard", "action", "why"):
        table.add_column(col)
    for d in decisions:
        table.add_row(*(Text(c) for c in (d.index, str(d.segments_before), d.verdict.value, d.reason)))
    terminal.out.print(table)


def _show_report(report: MergeReport, json_out: bool) -> None:
    from rich.table import Table
    from rich.text import Text

    table = Table(show_edge=False, title=f"Force-merge: {report.outcome.upper()}", title_justify="left")
    for col in ("index", "action", "before", "after", "time", "note"):
        table.add_column(col)
    for r in report.results:
        table.add_row(*(Text(c) for c in (r.index, r.verdict, str(r.segments_before),
                                         "-" if r.segments_after is None else str(r.segments_after),
                                         "-" if r.seconds is None else f"{r.seconds:.1f}s",
                                         r.error or (r.reason if r.verdict != Verdict.MERGE else ""))))
    terminal.err.print(table)
    if json_out:
        emit_summary({**summary_line(report.to_json()), **exit_fields(None, EXIT[report.outcome])})
    elif report.outcome != "success":
        say(f"force-merge {report.outcome}: {report.failures()}")
