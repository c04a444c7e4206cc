"""`upgrade`: the rolling upgrade from the command line (the rolling restart's engine, journal and
lock, with the new version installed while each node is stopped)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import typer

from orchestrator.cli.restart_cmd import (
    ByOpt,
    CanaryOpt,
    ClusterOpt,
    ConfigOpt,
    ExcludeOpt,
    JsonOpt,
    LatencyBudgetOpt,
    MaxUnavailableOpt,
    MetricsFileOpt,
    NodesOpt,
    PauseBetweenOpt,
    PushgatewayOpt,
    StopAfterOpt,
    UnavailableOpt,
    UntilOpt,
    YellowOpt,
    options,
    plan_confirm_and_run,
)
from orchestrator.restart.plan import Mode

ToOpt = typer.Option(..., "--to", metavar="VERSION", help="The version every node ends on (major.minor.patch, "
                                                          "e.g. 9.5.3).")
NoSnapshotCheckOpt = typer.Option(False, "--no-snapshot-check",
                                  help="Go on without a successful snapshot newer than upgrade.snapshot_max_age_h "
                                       "(an upgraded node cannot go back; a snapshot is the way back). Recorded in "
                                       "the run.")


def register(app: typer.Typer) -> None:
    app.command()(upgrade)


def upgrade(to: str = ToOpt, cluster: str = ClusterOpt, config: Path = ConfigOpt, by: Mode = ByOpt,
            yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation."),
            json_out: bool = JsonOpt, no_snapshot_check: bool = NoSnapshotCheckOpt, allow_yellow: bool = YellowOpt,
            allow_unavailable: list[str] = UnavailableOpt, nodes: list[str] = NodesOpt,
            exclude: list[str] = ExcludeOpt, canary: bool = CanaryOpt, pause_between: float = PauseBetweenOpt,
            stop_after: int = StopAfterOpt, metrics_textfile: Path = MetricsFileOpt,
            pushgateway: str = PushgatewayOpt, max_unavailable: str = MaxUnavailableOpt,
            until: str = UntilOpt, search_latency_budget: str = LatencyBudgetOpt) -> None:
    """Rolling upgrade to VERSION: each node stopped, the version installed (the inventory's
    upgrade.install: package, switch or commands) with its plugins, started, checked to run VERSION.

    Preflight, before any change: a supported path (no downgrade, one major at a time from its last
    minor: 7.17 -> 8.x, 8.19 -> 9.x), a recent successful snapshot, no critical deprecation, each
    host able to install VERSION. Order: data tiers (frozen, cold, warm, hot), nodes without data,
    master-eligible nodes, the elected master last. A yellow left by version (a newer primary's
    replica cannot go to an older node) passes when the allocation explain API says so. Nodes
    already on VERSION are left out. `orchestrate resume` finishes an interrupted upgrade; see
    `orchestrate docs upgrade`.
    """
    from orchestrator.runs import plans
    from orchestrator.runs.target import open_target, with_latency_budget, with_metrics, with_schedule

    opened = with_latency_budget(with_schedule(open_target(cluster, config, upgrade=True), until),
                                 search_latency_budget)
    target, budget = plans.windowed(with_metrics(opened, metrics_textfile, pushgateway), max_unavailable, by,
                                    pause_between)
    control = replace(plans.control_options(nodes, exclude, canary, pause_between), max_unavailable=budget)
    run_options = plans.upgrade_options(options(target, allow_yellow, allow_unavailable, control), to,
                                        snapshot_check=not no_snapshot_check)
    plan_confirm_and_run(target, by, run_options, json_out, yes,
                         f"Upgrade {{batches}} of {{cluster}} to {to}?", stop_after)
