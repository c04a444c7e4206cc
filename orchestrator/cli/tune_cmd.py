"""`orchestrate tune`: audit or fix host tuning across a cluster's hosts."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from orchestrator.cli.output import confirm, emit_json, say, terminal
from orchestrator.cli.restart_cmd import ClusterOpt

if TYPE_CHECKING:  # what runs is imported when a command runs, not for `--help` or a TAB of completion
    from orchestrator.tuning.apply import NodeReport

EXIT_DRIFT = 1


NodesOpt = typer.Option(None, "--nodes", metavar="PATTERN", help="Only the nodes whose inventory name matches "
                                                                 "(shell-style: es-data-*; repeated, or "
                                                                 "comma-separated). Default: all.")


def tune(
    cluster: str = ClusterOpt,
    config: Path = typer.Option(None, "--config", help="Inventory file, instead of --cluster."),
    check: bool = typer.Option(False, "--check", help="Report drift only (the default)."),
    apply: bool = typer.Option(False, "--apply", help="Fix live values AND persist them, then check again."),
    dry_run: bool = typer.Option(False, "--dry-run", help="With --apply: print each host's commands, run none."),
    nodes: list[str] = NodesOpt,
    json_out: bool = typer.Option(False, "--json", help="One JSON object per node."),
    yes: bool = typer.Option(False, "--yes", "-y", help="With --apply: do not ask for confirmation (needed off a "
                                                      "terminal)."),
) -> None:
    """Check (default) or apply the inventory's tuning profile on every node's host.

    Per node and knob: the live value, the persisted value (what a reboot would give), the desired
    value, and whether it drifts. Exit 1 when any node drifts after the command, 0 when none does.
    --apply is idempotent: a second run changes nothing and says so.
    """
    from orchestrator.config.inventory import load_inventory
    from orchestrator.hosts.transport import make_transport
    from orchestrator.runs.plans import patterns
    from orchestrator.tuning.apply import fix_commands, for_nodes, run_all

    if check and apply:
        raise typer.BadParameter("give --check or --apply, not both")
    inv, _ = load_inventory(cluster, config)
    targets = for_nodes(inv, patterns(nodes, "--nodes"))
    if apply and not dry_run:
        confirm(yes, f"Change host tuning (live and persisted) on {len(targets)} host(s) of {inv.cluster.name}?",
                "change host tuning")
    transport = make_transport(inv)
    try:
        if apply and dry_run:
            reports = run_all(inv, transport, targets, apply=False)
            for r in reports:
                cmds = fix_commands(r)
                if json_out:
                    emit_json({"node": r.node, "host": r.host, "commands": [str(c) for c in cmds], "error": r.error})
                else:
                    terminal.out.print(f"# {r.node} ({r.host}): " + ("nothing to do" if not cmds else
                                                                     f"{len(cmds)} command(s)"), markup=False)
                    for c in cmds:
                        terminal.out.print(str(c), markup=False, highlight=False)
            return
        reports = run_all(inv, transport, targets, apply=apply)
    finally:
        transport.close()
    if json_out:
        for r in reports:
            emit_json(r.to_json())
    else:
        show(reports, applied=apply)
    if any(r.drift for r in reports):
        raise typer.Exit(EXIT_DRIFT)


def show(reports: list[NodeReport], applied: bool) -> None:
    from rich.table import Table
    from rich.text import Text

    table = Table(show_edge=False)
    for col in ("node", "knob", "live", "persisted", "desired", "drift"):
        table.add_column(col)
    for r in reports:
        if r.error:
            table.add_row(r.node, "-", "-", "-", "-", Text(f"ERROR: {r.error}"), style="red")
            continue
        for k in r.knobs:
            drift = "ERROR: " + k.error if k.error else ("yes" if k.drift else "no")
            if k.note and k.drift:
                drift += f" ({k.note})"
            persisted = "not persisted" if k.persisted is None else k.persisted
            cells = (r.node, k.knob, str(k.live), persisted, k.desired, drift)
            table.add_row(*(Text(c) for c in cells), style="red" if k.drift else None)
    terminal.out.print(table)
    if applied:
        for r in reports:
            said = f"{len(r.applied)} command(s) run" if r.applied else "nothing to change, already tuned"
            say(f"{r.node}: {said}")


# The user names the inventory accepts (ssh.user): the only words a sudoers line takes there.
SUDOERS_USER = re.compile(r"[a-z_][a-z0-9_-]{0,31}")

def sudoers(
    cluster: str = ClusterOpt,
    config: Path = typer.Option(None, "--config", help="Inventory file, instead of --cluster."),
    user: str = typer.Option(None, "--user", help="The SSH user the rules are for (default: the inventory's "
                                                  "ssh.user)."),
    nodes: list[str] = NodesOpt,
) -> None:
    """Print the exact sudo rules the tool needs on the hosts, for `ssh.sudo_rules: commands`.

    Every root action a restart, `restart --reboot` or `tune --apply` could take, read from the hosts
    (their THP directory and data disks), as a sudoers file: no shell, each command with its exact
    arguments, values on standard input. Install it on each host as /etc/sudoers.d/orchestrator (mode
    0440; check it with `visudo -cf FILE`), then set `ssh.sudo: true` and `ssh.sudo_rules: commands`.
    """
    from orchestrator import products
    from orchestrator.config.inventory import load_inventory
    from orchestrator.errors import ConfigError, HostError
    from orchestrator.hosts.actions import sudoers as render
    from orchestrator.hosts.transport import make_transport
    from orchestrator.runs.plans import patterns
    from orchestrator.tuning.apply import for_nodes
    from orchestrator.tuning.sudoers import cluster_rules

    if user is not None and not SUDOERS_USER.fullmatch(user):
        # Anything else (a newline, a space, a comma) would write rules of its own into the file.
        raise typer.BadParameter(f"{user[:40]!a} is not a user name (lower-case letters, digits, _ and -, "
                                 "starting with a letter or _, at most 32)", param_hint="--user")
    inv, _ = load_inventory(cluster, config)
    product = products.get(inv.cluster.product)
    if not product.exact_sudo_rules:
        raise ConfigError("inventory", [f"exact sudo rules are not available for {product.name} yet (its commands "
                                        "on the hosts need a root shell): keep ssh.sudo_rules `shell`"])
    targets = for_nodes(inv, patterns(nodes, "--nodes"))
    transport = make_transport(inv)
    try:
        rules, problems = cluster_rules(inv, transport, targets)
    finally:
        transport.close()
    if problems:
        raise HostError("cannot read every host, so the rules would be incomplete:\n  " + "\n  ".join(problems))
    who = user or inv.ssh.user
    typer.echo(render(who, rules, f"The commands orchestrator runs as root on the hosts of {inv.cluster.name}, "
                                  f"for {who}\n(`orchestrate sudoers`; `orchestrate docs privileges`). Install as "
                                  "/etc/sudoers.d/orchestrator, mode 0440."), nl=False)
