"""The install step of an upgrade: the target version put in place on a node's host while its
service is stopped, by the inventory's method (config/upgrade.py). Product-neutral: what a product
adds after it (plugins, say) is its own step.

There is no undo: a node that has started on a newer version has rewritten its data for it and
cannot go back (docs/upgrade.md). So the step is journaled as done only once every command has
succeeded, and every method is idempotent, so that a resumed run may run it again.
"""

from __future__ import annotations

from orchestrator.config.model import Inventory, NodeEntry
from orchestrator.config.upgrade import check_command
from orchestrator.errors import HostError, OrchestratorError
from orchestrator.hosts.transport import Transport
from orchestrator.restart.context import RunContext
from orchestrator.restart.events import Event
from orchestrator.restart.journal import BatchRecord
from orchestrator.restart.phases import Phase, reached
from orchestrator.restart.steps import for_each_node, per_node

INSTALLED = "installed"  # the journal's mark of a node whose install finished


def target_version(ctx: RunContext) -> str:
    version = ctx.options.upgrade_to
    if not version:
        raise OrchestratorError("install_version is a step of an upgrade (`orchestrate upgrade --to VERSION`), "
                                "not of a restart; remove it from the playbook")
    return version


@per_node
def install_version(ctx: RunContext, batch: BatchRecord) -> None:
    version = target_version(ctx)
    method = ctx.inv.upgrade.install
    if method is None:
        raise OrchestratorError("upgrade.install is not set in the inventory (checked at preflight)")

    def install(name: str) -> None:
        rec = ctx.record(name)
        if INSTALLED in rec.started_at:
            return  # installed before an interruption
        if not reached(rec.phase, Phase.STOPPED) or reached(rec.phase, Phase.STARTING):
            raise OrchestratorError(f"{name}: install_version must come after stop_service and before "
                                    "start_service")
        started = ctx.clock.monotonic()
        node = ctx.node(name)
        for command in method.commands(version, name):
            result = ctx.transport.run(node, command, ctx.inv.ssh.command_timeout_s)
            if not result.ok:
                text = (result.stderr or result.stdout).strip()[-300:]
                raise HostError(f"{name}: installing {version} failed (exit {result.rc}) in `{command[:200]}`: "
                                f"{text}. The node is stopped on its old version; fix the host",
                                resume="installs again")
        ctx.timed(name, "install", ctx.clock.monotonic() - started)
        ctx.journal.mark(name, INSTALLED)
        ctx.emit(Event("step", f"{name}: installed {version} ({method.describe(version, name)}) in "
                               f"{ctx.clock.monotonic() - started:.1f} s", node=name, data={"version": version}))

    for_each_node(ctx, batch, install)


def install_problems(inv: Inventory, version: str, transport: Transport, nodes: list[NodeEntry]) -> list[str]:
    """Preflight: the install method is set, and each host shows that it can install the version."""
    method = inv.upgrade.install
    if method is None:
        return ["upgrade.install is not set in the inventory: say how a node's new version is installed "
                "(package, switch or commands; docs/upgrade.md)"]
    if method.method != "commands" and any(transport.exact_sudo(n) for n in nodes):
        return [f"upgrade.install method `{method.method}` installs as root, which ssh.sudo_rules `commands` "
                "does not allow yet: use the `commands` method with your own `sudo -n` commands (and rules "
                "for them), or ssh.sudo_rules `shell`"]
    problems = []
    for node in nodes:
        command = check_command(method, version, node.name)
        if command is None:
            continue
        try:
            result = transport.run(node, command, inv.ssh.command_timeout_s)
        except OrchestratorError as exc:
            problems.append(f"{node.name}: cannot check that {version} can be installed: {exc}")
            continue
        if not result.ok:
            problems.append(f"{node.name}: {version} cannot be installed ({method.describe(version, node.name)}): "
                            f"`{command[:200]}` "
                            f"exited {result.rc}{': ' + result.stderr.strip()[-200:] if result.stderr.strip() else ''}")
    return problems
