"""`plan`, `restart`, `resume`, `status`, `unlock`, `report`: the rolling restart from the command line.

Each command parses its options, calls one function of `orchestrator.runs`, and renders.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from orchestrator.cli.output import confirm, emit_json, emit_summary, exit_fields, say, terminal, terminal_safe
from orchestrator.cli.render import RunView, plan_table, report_table, summary_line
from orchestrator.errors import ConfigError, JournalError, PreflightFailed, UnsafeToProceed
from orchestrator.paths import known_clusters
from orchestrator.restart.plan import Mode
from orchestrator.units import counted, human_duration

# What a command does is imported when it runs, inside its function: the shell runs `orchestrate` for each
# TAB of completion, which needs only the options (tests/unit/test_cli_help.py checks what it imports).
if TYPE_CHECKING:
    from orchestrator.restart.journal import Journal, RunOptions
    from orchestrator.restart.plan import Plan
    from orchestrator.runs.target import Target

ClusterOpt = typer.Option(None, "--cluster", "-c", help="Cluster name: configs/NAME.yaml, or clusters/NAME.yaml in "
                                                         "the user's config directory ('sandbox' after "
                                                         "`orchestrate sandbox up`).", autocompletion=known_clusters)
ConfigOpt = typer.Option(None, "--config", help="Inventory file, instead of --cluster.")
JsonOpt = typer.Option(False, "--json", help="JSON: one object per line, the last one the summary.")
ByOpt = typer.Option(Mode.NODE, "--by", help="Batch by `node` (one at a time) or `zone` (one awareness "
                                              "zone at a time).")
YellowOpt = typer.Option(False, "--allow-yellow", help="Accept any yellow with no shard initializing or relocating "
                                                       "where green is required, even one the allocation explain "
                                                       "API does not settle (a yellow it settles passes without "
                                                       "it): each batch then waits until no more copies are "
                                                       "unassigned than at the start. Recorded in the run, so "
                                                       "`resume` keeps it.")

UnavailableOpt = typer.Option(None, "--allow-unavailable", metavar="PATTERN",
                              help="Accept that indices matching PATTERN (shell-style: logs-*, may be repeated) "
                                   "have no started copy while their node restarts (0 replicas, say): their "
                                   "searches and writes fail meanwhile. Recorded in the run. Without it, such a "
                                   "batch is refused, in the plan and again just before its nodes stop.")

NodesOpt = typer.Option(None, "--nodes", metavar="PATTERN", help="Restart only the nodes whose inventory name "
                                                                 "matches (shell-style: es-data-*; repeated, or "
                                                                 "comma-separated); the batches keep their order.")
ExcludeOpt = typer.Option(None, "--exclude", metavar="PATTERN", help="Leave out the nodes whose name matches "
                                                                     "(may be repeated).")
CanaryOpt = typer.Option(False, "--canary", help="After the first batch, pause until `orchestrate continue` (check "
                                                 "the canary node first).")
PauseBetweenOpt = typer.Option(0.0, "--pause-between", metavar="SECONDS", help="Wait this long between batches.")
MetricsFileOpt = typer.Option(None, "--metrics-textfile", metavar="PATH",
                              help="Write the run's Prometheus metrics to PATH (node_exporter's textfile collector), "
                                   "after each batch and at the end; over the inventory's metrics.textfile.")
PushgatewayOpt = typer.Option(None, "--pushgateway", metavar="URL",
                              help="Push the run's Prometheus metrics to this Pushgateway (grouped by cluster); over "
                                   "the inventory's metrics.pushgateway.")
RebootOpt = typer.Option(False, "--reboot", help="Reboot each host instead of only restarting the service (host "
                                                "patching): the service stops, the tuning is applied, the host "
                                                "reboots (inventory service.reboot), the run waits for a new boot "
                                                "id, the boot starts the service, and the tuning is checked: a "
                                                "knob that did not survive is set again and reported NOT "
                                                "PERSISTED. Needs hosts reached over SSH.")
NoTuneOpt = typer.Option(False, "--no-tune", help="Leave the hosts' tuning alone: no tune_host step (which "
                                                 "otherwise changes kernel settings on each host persistently: "
                                                 "live, and in files that outlast a reboot; the plan names them). "
                                                 "Recorded in the journal: `resume` leaves it out too.")
MaxUnavailableOpt = typer.Option(None, "--max-unavailable", metavar="N|P%",
                                 help="The window's budget: at most N nodes (or P % of those in play) away at "
                                      "once, each admitted on a live per-shard proof; the window opens 1, 2, 4, ... "
                                      "up to it. Default: the inventory's max_unavailable, else 1 (one at a time). "
                                      "The plan shows how many could be away together and what limits it.")
PendingOpt = typer.Option(False, "--pending", help="Only the nodes that need a restart (`orchestrate pending`: a "
                                                  "new version installed, a configuration file changed, replaced "
                                                  "code, a host waiting for a reboot, whose host is then rebooted); "
                                                  "the plan says why each node restarts or is left alone.")
UntilOpt = typer.Option(None, "--until", metavar="TIME",
                        help="Begin no batch that would end after TIME (HH:MM on this machine's clock, or ISO 8601 "
                             "such as 2026-11-27T06:00+01:00): the run stops before it, every node back and every "
                             "setting restored (exit 12), and `orchestrate resume` goes on. With the inventory's "
                             "maintenance.windows, whichever closes first.")
LatencyBudgetOpt = typer.Option(None, "--search-latency-budget", metavar="BUDGET",
                                help="While recoveries run, keep the slowest node's search query time within BUDGET: "
                                     "2x (twice its baseline, measured before the first stop) or 50ms; over it, the "
                                     "recovery rate the run raised is halved (never below search.recovery_floor), "
                                     "within it raised again. Over the inventory's search.latency_budget; off: none.")
StopAfterOpt = typer.Option(0, "--stop-after", metavar="N", min=0, max=100_000,
                            help="Stop once N batches are done (every setting restored, exit 11); `orchestrate "
                                 "resume` goes on (with its own --stop-after). 0: all batches.")


def register(app: typer.Typer) -> None:
    app.command()(plan)
    app.command()(restart)
    app.command()(resume)
    app.command()(status)
    app.command()(unlock)
    app.command()(abandon)
    app.command()(pause)
    app.command("continue")(continue_run)
    app.command()(report)


def plan(cluster: str = ClusterOpt, config: Path = ConfigOpt, by: Mode = ByOpt, json_out: bool = JsonOpt,
         allow_yellow: bool = YellowOpt, allow_unavailable: list[str] = UnavailableOpt,
         nodes: list[str] = NodesOpt, exclude: list[str] = ExcludeOpt,
         snapshot: Path = typer.Option(None, "--snapshot", help="Plan from a saved cluster state (JSON, as written "
                                                                "by --save-snapshot) instead of the live cluster."),
         save_snapshot: Path = typer.Option(None, "--save-snapshot", help="Write the live cluster state used for "
                                                                          "this plan to a JSON file."),
         upgrade_to: str = typer.Option(None, "--upgrade-to", metavar="VERSION",
                                        help="Plan a rolling upgrade to VERSION instead (`orchestrate upgrade`): "
                                             "its order, version path and preflight."),
         no_snapshot_check: bool = typer.Option(False, "--no-snapshot-check",
                                                help="With --upgrade-to: do not require a recent snapshot."),
         no_tune: bool = NoTuneOpt, pending: bool = PendingOpt,
         max_unavailable: str = MaxUnavailableOpt, until: str = UntilOpt,
         search_latency_budget: str = LatencyBudgetOpt) -> None:
    """Dry run: what a rolling restart would do, in which order, how long, and whether it is safe.

    Reads the live cluster and changes nothing (no write call, nothing on any host).
    Exit 0 when the plan is safe, 6 when it is not (each reason is printed with what to do).
    """
    from orchestrator import products
    from orchestrator.runs import plans
    from orchestrator.runs.target import open_target, with_latency_budget, with_schedule

    control = replace(plans.control_options(nodes, exclude, False, 0), tune=not no_tune,
                      max_unavailable=plans.budget_option(max_unavailable))
    if upgrade_to is not None:
        control = plans.upgrade_options(control, upgrade_to, not no_snapshot_check)
    if pending and (snapshot is not None or upgrade_to is not None):
        raise ConfigError("--pending", ["reads the live cluster and its hosts for a restart: it goes with neither "
                                        "--snapshot nor --upgrade-to"])
    if snapshot is not None and (until is not None or search_latency_budget is not None):
        raise ConfigError("--snapshot", ["plans from a saved state with the inventory as written: give --until and "
                                         "--search-latency-budget to the live cluster's plan (the inventory's "
                                         "maintenance and search sections are said either way)"])
    if snapshot is not None:
        the_plan, steps = plans.plan_from_file(cluster, config, snapshot, by,
                                               plans.options_for(False, allow_yellow, allow_unavailable, control),
                                               terminal.held_until_exit)
        columns = products.get(the_plan.product).plan_columns
    else:
        opened = with_latency_budget(with_schedule(open_target(cluster, config, upgrade=upgrade_to is not None,
                                                              tune=not no_tune), until), search_latency_budget)
        target, budget = plans.windowed(opened, max_unavailable, by)
        control = replace(control, max_unavailable=budget)
        chosen = only_pending(target, control, json_out) if pending else (target, control, ())
        if chosen is None:
            return
        target, control, notes = chosen
        the_plan = plans.make_plan(target, by, options(target, allow_yellow, allow_unavailable, control),
                                   save_snapshot, terminal.held_until_exit)
        the_plan = replace(the_plan, notes=(*the_plan.notes, *notes))
        steps, columns = step_names(target), target.product.plan_columns
    exit_code = 0 if the_plan.safe else UnsafeToProceed.exit_code
    if json_out:  # one line, a summary as every command's last: what a pipeline reads whatever happened
        emit_summary({**summary_line({"result": "safe" if the_plan.safe else "unsafe", **the_plan.to_json()}),
                      **exit_fields(None, exit_code)})
    else:
        terminal.out.print(plan_table(the_plan, steps, columns))
    if exit_code:
        raise typer.Exit(exit_code)


def only_pending(target: Target, control: RunOptions,
                 json_out: bool) -> tuple[Target, RunOptions, tuple[str, ...]] | None:
    """`--pending`: the target and options for the pending nodes only, and the plan's notes of why; None, said,
    when no node is pending (the command then ends with 0)."""
    from orchestrator.runs.pending import (
        nothing_pending,
        pending_notes,
        pending_options,
        pending_problems,
        target_pending,
    )
    from orchestrator.runs.target import with_reboots

    report = target_pending(target)
    chosen = pending_options(report, control)
    if chosen is None:
        say(nothing_pending(report))
        if json_out:
            emit_summary({**summary_line(report.summary()), **exit_fields(None)})
        return None
    problems = pending_problems(report, chosen)
    if problems:
        raise PreflightFailed(problems)
    return (with_reboots(target) if chosen.reboot_nodes else target), chosen, pending_notes(report, chosen)


def options(target: Target, allow_yellow: bool, allow_unavailable: list[str] | None = None,
            control: RunOptions | None = None) -> RunOptions:
    from orchestrator.runs import plans

    return plans.options_for(target.inv.allow_yellow, allow_yellow, allow_unavailable, control)


def step_names(target: Target) -> list[str]:
    return [name for name, _ in target.procedure.batch]


def _finish(journal: Journal, json_out: bool, error: BaseException | None = None) -> None:
    from orchestrator import products
    from orchestrator.runs import reports
    from orchestrator.runs.status import summary as run_summary

    summary = run_summary(journal)
    terminal.err.print(report_table(summary, products.get(journal.product).report_columns))
    terminal.err.print(f"journal: {journal.path}", markup=False)
    page = reports.write_beside_journal(journal)
    if page is not None:
        summary["report"] = str(page)
        terminal.err.print(f"report: {page} (or `orchestrate report --cluster {journal.cluster} --run "
                          f"{journal.run_id}`)", markup=False)
    if json_out:
        emit_summary({**summary_line(summary), **exit_fields(error)})


def restart(cluster: str = ClusterOpt, config: Path = ConfigOpt, by: Mode = ByOpt,
            yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation."),
            json_out: bool = JsonOpt, allow_yellow: bool = YellowOpt,
            allow_unavailable: list[str] = UnavailableOpt, nodes: list[str] = NodesOpt,
            exclude: list[str] = ExcludeOpt, canary: bool = CanaryOpt,
            pause_between: float = PauseBetweenOpt, stop_after: int = StopAfterOpt, reboot: bool = RebootOpt,
            no_tune: bool = NoTuneOpt, metrics_textfile: Path = MetricsFileOpt,
            pushgateway: str = PushgatewayOpt, pending: bool = PendingOpt,
            max_unavailable: str = MaxUnavailableOpt, until: str = UntilOpt,
            search_latency_budget: str = LatencyBudgetOpt) -> None:
    """Rolling restart: shows the plan, asks to confirm (unless --yes), then runs it batch by batch.

    Preflight checks everything before the first change (safe plan, every node matched, SSH with
    verified host keys, no other run). Ctrl-C or SIGTERM stops at the next safe point (a stopped
    node is brought back first), restores every temporary setting and exits 130. A failure
    leaves allocation restricted and the journal says what is pending: `orchestrate resume`.
    """
    from orchestrator.runs import plans
    from orchestrator.runs.target import open_target, with_latency_budget, with_metrics, with_schedule

    opened = with_latency_budget(with_schedule(open_target(cluster, config, reboot=reboot, tune=not no_tune), until),
                                 search_latency_budget)
    target, budget = plans.windowed(with_metrics(opened, metrics_textfile, pushgateway), max_unavailable, by,
                                    pause_between)
    control = replace(plans.control_options(nodes, exclude, canary, pause_between), reboot=reboot, tune=not no_tune,
                      max_unavailable=budget)
    chosen = only_pending(target, control, json_out) if pending else (target, control, ())
    if chosen is None:
        return
    target, control, notes = chosen
    run_options = options(target, allow_yellow, allow_unavailable, control)
    question = ("Reboot the hosts of {batches} of {cluster}?" if reboot else
                f"Restart {{batches}} of {{cluster}}, rebooting the hosts of {', '.join(control.reboot_nodes)}?"
                if control.reboot_nodes else "Restart {batches} of {cluster}?")
    plan_confirm_and_run(target, by, run_options, json_out, yes, question, stop_after, notes)


def plan_confirm_and_run(target: Target, by: Mode, run_options: RunOptions, json_out: bool, yes: bool,
                         question: str, stop_after: int, notes: tuple[str, ...] = ()) -> None:
    """Plan, show, ask (``question`` with {batches} and {cluster}), then run and report: restart and upgrade.
    ``notes``: the plan's besides its own (why `--pending` chose its nodes)."""
    from orchestrator.runs import plans
    from orchestrator.runs import restart as runs

    with runs.hosts_checked_early(target.inv, begin=yes) as early:
        the_plan = plans.make_plan(target, by, run_options, host_transport=early.transport if early else None)
        the_plan = replace(the_plan, notes=(*the_plan.notes, *notes))
        show_and_confirm(target, the_plan, json_out, yes,
                         question.format(batches=counted(len(the_plan.batches), "batch"), cluster=target.name))
        nodes = [n for b in the_plan.batches for n in b.nodes]

        def action(view: RunView) -> Journal:
            return runs.start(target, the_plan, run_options, view, stop_after=stop_after, early=early)

        run_and_report(json_out, nodes, action)


def show_and_confirm(target: Target, the_plan: Plan, json_out: bool, yes: bool, question: str) -> None:
    """Show the plan, refuse an unsafe one, and ask (unless --yes; never silently off a terminal)."""
    from orchestrator.runs import restart as runs

    if not json_out:  # a refused plan's reasons are the error's, said once (not in the table too)
        terminal.out.print(plan_table(the_plan, step_names(target), target.product.plan_columns,
                                     problems=the_plan.safe))
    if not the_plan.safe:
        raise PreflightFailed(runs.other_runs(target) + the_plan.all_problems())
    confirm(yes, question, "restart")


def run_and_report(json_out: bool, nodes: list[str], action: Callable[[RunView], Journal]) -> None:
    from orchestrator.restart.journal import RunFailed

    with RunView(json_out, nodes) as view:
        try:
            journal = action(view)
        except RunFailed as exc:
            _finish(exc.journal, json_out, exc.cause)
            raise exc.cause from None
    _finish(journal, json_out)


def resume(cluster: str = ClusterOpt, config: Path = ConfigOpt, json_out: bool = JsonOpt,
           run_id: str = typer.Option(None, "--run", help="Run id (default: the latest run of the cluster)."),
           yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation. Asked only when the "
                                    "inventory changed since the run started: the changes are listed, and --yes "
                                    "goes on with the new inventory (the run's recorded procedure is kept); off a "
                                    "terminal without --yes, such a resume is refused."),
           allow_unavailable: list[str] = UnavailableOpt, stop_after: int = StopAfterOpt,
           metrics_textfile: Path = MetricsFileOpt, pushgateway: str = PushgatewayOpt,
           until: str = UntilOpt, search_latency_budget: str = LatencyBudgetOpt,
           take_over: bool = typer.Option(False, "--take-over", help="Continue the run the cluster holds a copy of, "
                                          "started on another machine (its journal is copied into the cluster "
                                          "beside the lock). Only once that run is not alive: it stopped, failed, or "
                                          "its lock is stale (timeouts.lock_stale_s without renewal). Its undo "
                                          "records are carried; its playbook must be this machine's.")) -> None:
    """Continue an interrupted or failed run from its journal. A node already restarted (it runs as a
    new process) is never restarted again; pending temporary settings are restored at the end. With
    --take-over, from another machine: the run's journal is read from the cluster's copy."""
    from orchestrator.runs import plans
    from orchestrator.runs import restart as runs
    from orchestrator.runs.target import open_target, with_latency_budget, with_metrics, with_schedule

    accepted = plans.patterns(allow_unavailable)
    opened = with_latency_budget(with_schedule(open_target(cluster, config), until), search_latency_budget)
    target = with_metrics(opened, metrics_textfile, pushgateway)
    changed = runs.inventory_changes_since(target, run_id)
    if changed and not yes and sys.stdin.isatty():
        say("the inventory changed since the run started:\n" + "\n".join(f"  - {c}" for c in changed[:20]))
        yes = typer.confirm("Resume with the new inventory (the run's recorded procedure is kept)?")
        if not yes:
            raise typer.Exit(1)

    def action(view: RunView) -> Journal:
        return runs.resume(target, view, run_id, accept_changes=yes, accept_unavailable=accepted,
                           stop_after=stop_after, take_over=take_over)

    run_and_report(json_out, [n.name for n in target.inv.nodes], action)


def shown_plainly(line: str) -> None:
    terminal.out.print(terminal_safe(line), markup=False)


def status(cluster: str = ClusterOpt, config: Path = ConfigOpt, json_out: bool = JsonOpt) -> None:
    """Cluster health, the run in progress or the last one, and every temporary setting still in force."""
    from orchestrator.restart.lock import LockHolder
    from orchestrator.runs.status import status as cluster_status
    from orchestrator.runs.target import open_target

    info = cluster_status(open_target(cluster, config))
    if json_out:
        emit_json(info)
        return
    # Stored messages and names (the cluster's, the journal's) are shown as they are: never read as rich markup,
    # their control characters (a terminal's escape sequences) shown as \xNN, each line bounded.
    shown_plainly(f"cluster {info['cluster']}: {info['health']['text']}")
    run = info["run"]
    if run is None:
        shown_plainly("no run recorded for this cluster")
    else:
        done = sum(1 for b in run["batches"] if b["state"] == "done")
        shown_plainly(f"run {run['run_id']}: {run['state']}, {done}/{counted(len(run['batches']), 'batch')} done"
                      + (f" - {run['message']}" if run["message"] else ""))
        shown_plainly(f"journal: {run['journal']}")
        if away := away_line(run["nodes"]):
            shown_plainly(away)
        for line in search_lines(run.get("search")):
            shown_plainly(line)
    if info["pause"]:
        shown_plainly(f"PAUSE asked ({str(info['pause'].get('reason'))[:300]}); `orchestrate continue --cluster "
                      f"{info['cluster']}` removes it")
    if info["lock"]:
        shown_plainly(f"lock held by {LockHolder.from_document(info['lock']).describe()}")
    for s in info["temporary_settings"]:
        shown_plainly(f"temporary setting still pending: {s['scope']} {s['key']}={s['live']} "
                      f"(restore to {s['restore_to'] if s['restore_to'] is not None else 'unset'})")


def away_line(nodes: dict[str, dict[str, Any]]) -> str:
    """The nodes between their stop and the end of their recovery, each with its phase (a window's several at
    once): what `status` says they wait for. Empty when none is."""
    away = [f"{name} ({node['phase']})" for name, node in nodes.items() if node["phase"] not in ("pending", "done")]
    return f"away now: {', '.join(away)}" if away else ""


def search_lines(search: dict[str, Any] | None) -> list[str]:
    """What searchers saw, as `status` says it: the baseline before the first stop and the last interval."""
    from orchestrator.restart.search_figures import SearchSample

    if not search:
        return []
    baseline, latest = search.get("baseline"), search.get("latest")
    lines = [f"searches before the first stop: {SearchSample.from_json(baseline).text()}" if baseline
             else "searches before the first stop: not measured (no search then, or the watch began later)"]
    if latest and not latest.get("baseline"):
        ago = human_duration(max(time.time() - float(latest["at"]), 0))
        lines.append(f"searches, {ago} ago: {SearchSample.from_json(latest).text()}")
    if search.get("window_closed"):
        lines.append(f"window closed: {search['window_closed']}; no node joins those away until searches are back "
                     "within budget")
    return lines


def unlock(cluster: str = ClusterOpt, config: Path = ConfigOpt,
           yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation."),
           force: bool = typer.Option(False, "--force", help="Remove it even if its run looks alive (renewed "
                                                             "recently) or failed and waiting for resume.")) -> None:
    """Remove the run lock of a dead run: one that stopped renewing it (stale after 300 s), or whose
    process on this machine is gone. A live run's lock, or a failed run's (it waits for `orchestrate
    resume`), is kept unless --force."""
    from orchestrator.restart.lock import LOCK_INDEX, RUN_DOC, read_holder
    from orchestrator.runs.target import open_target

    target = open_target(cluster, config)
    holder = read_holder(target.cluster)
    if holder is None:
        say("no lock is held")
        return
    keep = holder.why_keep()
    if keep is not None and not force:
        raise UnsafeToProceed(f"lock kept: {keep}. --force removes it anyway.")
    if not yes and not typer.confirm(f"Remove the lock of {holder.describe()}?"):
        raise typer.Exit(1)
    target.cluster.delete_lock(LOCK_INDEX, RUN_DOC)
    say(f"lock of run {holder.run_id} removed")


def abandon(cluster: str = ClusterOpt, config: Path = ConfigOpt,
            run_id: str = typer.Option(None, "--run", help="Run id (default: the latest run of the cluster)."),
            yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation."),
            json_out: bool = JsonOpt,
            take_over: bool = typer.Option(False, "--take-over", help="Give up the run the cluster holds a copy of, "
                                           "started on another machine (as `resume --take-over` takes it: only "
                                           "once that run is not alive).")) -> None:
    """Give up an aborted, stopped or failed run that you will not resume, so that a new run may start.

    Every temporary setting the run still holds in force (allocation, recovery limits, search weights,
    from its journal's undo records) is put back, the run is marked abandoned (`resume` then refuses it)
    and its lock released. Refused while the run is alive, here or on another machine. Host tuning stays
    (it is no temporary setting); a node the run stopped and did not bring back is named, not started."""
    from orchestrator.restart import journal as journals
    from orchestrator.runs import restart as runs
    from orchestrator.runs.target import open_target

    target = open_target(cluster, config)
    if take_over:
        from orchestrator.runs.take_over import take_over as take_over_run

        run_id, said = take_over_run(target, run_id)
        say(said)
    journal = journals.latest(target.name, run_id)
    if journal is None:
        raise JournalError(f"no run of cluster {target.name} to abandon")
    pending = len(journal.pending_undo())
    confirm(yes, f"Abandon run {journal.run_id} ({journal.state.value}) of {target.name}, putting back {pending} "
                 "temporary setting(s)?", "abandon a run")
    with RunView(json_out, list(journal.nodes)) as view:
        done = runs.abandon_run(journal, target.cluster, target.inv.cluster.name, view)
    _finish(done, json_out)


def pause(cluster: str = ClusterOpt, config: Path = ConfigOpt,
          reason: str = typer.Option("paused by an operator", "--reason",
                                     help="Said by the run and by `status`.")) -> None:
    """Ask the cluster's run to pause at its next batch boundary (every node up), from any machine.

    The request is kept in the cluster beside the run lock: a run started later, or resumed, pauses
    too. `orchestrate continue` removes it."""
    from orchestrator.runs import restart as runs
    from orchestrator.runs.target import open_target

    target = open_target(cluster, config)
    if not runs.request_pause(target, reason[:300]):
        say(f"a pause is already asked for {target.name}; `orchestrate continue` removes it")
        return
    say(f"pause asked: the run on {target.name} holds at its next batch boundary; `orchestrate continue "
        f"--cluster {target.name}` goes on")


def continue_run(cluster: str = ClusterOpt, config: Path = ConfigOpt) -> None:
    """Let a paused run (by `orchestrate pause` or --canary) go on with its next batch."""
    from orchestrator.runs import restart as runs
    from orchestrator.runs.target import open_target

    target = open_target(cluster, config)
    if not runs.clear_pause(target):
        say(f"no pause is asked for {target.name}; nothing to continue")
        return
    say(f"pause removed: the run on {target.name} goes on within a few seconds")


def report(cluster: str = ClusterOpt, config: Path = ConfigOpt,
           run_id: str = typer.Option(None, "--run", help="Run id (default: the latest run of the cluster)."),
           html_path: Path = typer.Option(None, "--html", help="Also write a self-contained HTML page with a "
                                                               "timeline chart (one row per node, a bar per phase)."),
           json_out: bool = JsonOpt) -> None:
    """Where the time of a finished or running run went: per node and phase, with recovery figures."""
    from orchestrator import products
    from orchestrator.config.inventory import load_inventory
    from orchestrator.restart.report import totals
    from orchestrator.runs import reports
    from orchestrator.runs.status import summary as run_summary

    inv, _ = load_inventory(cluster, config)
    journal = reports.find_run(inv.cluster.name, run_id)
    if json_out:
        emit_json({**run_summary(journal), "totals": totals(journal)})
    else:
        terminal.out.print(report_table(run_summary(journal), products.get(journal.product).report_columns))
        from orchestrator.units import human_bytes, human_duration

        t = totals(journal)
        terminal.out.print(f"copied from peers {human_bytes(t['bytes_from_peers'])}, reused from the nodes' disks "
                          f"{human_bytes(t['bytes_reused'])}, {t['cluster_calls']} calls to the cluster, planned "
                          f"{human_duration(t['plan_estimate_s'])}")
    if html_path is not None:
        reports.write_page(journal, html_path)
        say(f"report written to {html_path}")
