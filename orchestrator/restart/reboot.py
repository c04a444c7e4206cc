"""`restart --reboot`: host patching on the restart engine. Each node's host is rebooted (after its
service stopped gracefully and its tuning was applied and persisted); the run waits for a new boot
(the boot id changes and SSH answers again), lets the boot start the service (or starts it, with a
warning, where the boot does not), then checks that the tuning survived: a knob that reverted was not
persisted; it is fixed and reported. Product-neutral: every product's procedure gets the same steps.
"""

from __future__ import annotations

from orchestrator.config.model import DEFAULT_REBOOT, Inventory, NodeEntry
from orchestrator.config.playbook import Playbook
from orchestrator.errors import HostDidNotReturn, HostUnreachable, OrchestratorError, WaitTimeout
from orchestrator.hosts.actions import systemctl
from orchestrator.hosts.transport import Transport
from orchestrator.restart.context import RunContext
from orchestrator.restart.events import Event
from orchestrator.restart.journal import REBOOTED, BatchRecord
from orchestrator.restart.steps import for_each_node, per_node
from orchestrator.retry import Seen, wait_until

BOOT_ID = "/proc/sys/kernel/random/boot_id"
TUNING_CHECKED = "tuning_checked"
REBOOT_STEPS = ("reboot_host", "check_tuning")


def reboot_problems(inv: Inventory, transport: Transport, nodes: list[NodeEntry]) -> list[str]:
    """Preflight of `restart --reboot`: hosts reached over SSH (a local transport would reboot this very
    machine), each with a readable boot id."""
    if inv.ssh.transport != "ssh":
        return ["--reboot needs hosts reached over SSH: with ssh.transport local it would reboot this machine"]
    problems = []
    for node in nodes:
        try:
            result = transport.run(node, f"cat {BOOT_ID}", inv.ssh.connect_timeout_s + 5)
        except OrchestratorError as exc:
            problems.append(f"{node.name}: cannot read its boot id: {exc}")
            continue
        if not result.ok or not result.stdout.strip():
            problems.append(f"{node.name}: cannot read its boot id ({BOOT_ID}): needed to see the reboot happen")
    return problems


def with_reboot(playbook: Playbook) -> Playbook:
    """The procedure of `restart --reboot`: the playbook with reboot_host and check_tuning after the host's
    tuning (or after stop_service). A playbook that places reboot_host itself is kept as it is."""
    names = [s.name for s in playbook.steps()]
    if "reboot_host" in names:
        return playbook
    after = names.index("tune_host") if "tune_host" in names else names.index("stop_service")
    batch = [*playbook.batch[:after + 1], *REBOOT_STEPS, *playbook.batch[after + 1:]]
    return playbook.model_copy(update={"batch": batch})


def read_boot_id(ctx: RunContext, name: str, timeout_s: float) -> str | None:
    """The host's boot id, or None while it does not answer."""
    try:
        result = ctx.transport.run(ctx.node(name), f"cat {BOOT_ID}", timeout_s)
    except OrchestratorError:
        return None
    return result.stdout.strip() if result.ok and result.stdout.strip() else None


def reboot_command(inv: Inventory, transport: Transport, node: NodeEntry) -> str:
    """The inventory's reboot command; systemd's own, under exact sudo rules, as the rule names it."""
    if inv.service.reboot == DEFAULT_REBOOT and transport.exact_sudo(node):
        return systemctl("reboot").shell(sudo=True)
    return inv.service.reboot


@per_node
def reboot_host(ctx: RunContext, batch: BatchRecord) -> None:
    if not ctx.options.reboot and not ctx.options.reboot_nodes:
        raise OrchestratorError("reboot_host is a step of `orchestrate restart --reboot`; remove it from the "
                                "playbook or add --reboot")
    quick = ctx.inv.ssh.connect_timeout_s + 5

    def reboot(name: str) -> None:
        rec = ctx.record(name)
        if REBOOTED in rec.started_at or not ctx.options.reboots(name):
            return  # done; or, in a `--pending` run, a node whose host needs no reboot
        node = ctx.node(name)
        if rec.boot_before is None:
            before = read_boot_id(ctx, name, quick)
            if before is None:
                raise OrchestratorError(f"{name}: cannot read the boot id ({BOOT_ID}) before the reboot")
            ctx.journal.boot_id_before(name, before)
        before = rec.boot_before
        started = ctx.clock.monotonic()
        if read_boot_id(ctx, name, quick) == before:  # not rebooted yet (a resumed run may find it done)
            ctx.emit(Event("step", f"{name}: rebooting {node.host}", node=name))
            try:
                command = reboot_command(ctx.inv, ctx.transport, node)
                result = ctx.transport.run(node, command, quick)
                if not result.ok:
                    raise OrchestratorError(f"{name}: `{command}` failed (exit {result.rc}): "
                                            f"{(result.stderr or result.stdout).strip()[-300:]}")
            except HostUnreachable:
                pass  # the connection dropped under the command: that is what a reboot does

        def new_boot(seen: Seen[str]) -> str | None:
            now = read_boot_id(ctx, name, quick)
            seen.text = "SSH does not answer" if now is None else "the boot id has not changed yet"
            return now if now is not None and now != before else None

        try:
            after = wait_until(new_boot, what=f"{name}'s host to come back from its reboot",
                               timeout_s=ctx.inv.timeouts.reboot_s,
                               interval_s=max(ctx.inv.timeouts.poll_interval_s, 1), clock=ctx.clock,
                               hint=f"Check {node.host}'s console", resume="goes on once it is back")
        except WaitTimeout as exc:
            raise HostDidNotReturn(exc.what, resume=exc.resume) from None
        seconds = ctx.clock.monotonic() - started
        ctx.timed(name, "reboot", seconds)
        ctx.journal.mark(name, REBOOTED)
        ctx.emit(Event("step", f"{name}: host back in {seconds:.0f} s with a new boot id ({after[:8]})", node=name,
                       data={"boot_id_before": before, "boot_id_after": after}))
        let_the_boot_start(ctx, name)

    for_each_node(ctx, batch, reboot)


def let_the_boot_start(ctx: RunContext, name: str) -> None:
    """The boot starts an enabled service; one it does not start is started by start_service, said."""
    node = ctx.node(name)
    enabled = ctx.service.is_enabled(node)
    if enabled is False:
        ctx.emit(Event("warning", f"{name}: the service is not enabled at boot: the run starts it (enable it, or "
                                  "the next reboot leaves the node down)", node=name))
        return
    if enabled is None:
        return  # the service's own commands cannot tell: start_service starts it if it is not running

    def started(seen: Seen[bool]) -> bool | None:
        seen.text = "the service is not running yet"
        return True if ctx.service.is_active(node) else None

    try:
        wait_until(started, what=f"the boot to start the service on {name}", timeout_s=ctx.inv.timeouts.start_s,
                   interval_s=max(ctx.inv.timeouts.poll_interval_s, 1), clock=ctx.clock)
    except OrchestratorError:
        ctx.emit(Event("warning", f"{name}: the service is enabled but the boot did not start it within "
                                  f"{ctx.inv.timeouts.start_s:.0f} s: the run starts it", node=name))


@per_node
def check_tuning(ctx: RunContext, batch: BatchRecord) -> None:
    """After the reboot, the host's tuning as the boot left it: each knob that reverted was not persisted;
    it is set again (and persisted), recorded as `not_persisted`, and said."""

    def check(name: str) -> None:
        rec = ctx.record(name)
        if TUNING_CHECKED in rec.started_at or not ctx.options.reboots(name):
            return
        if ctx.tuner is None:
            ctx.emit(Event("step", f"{name}: no tuning profile, nothing to check after the reboot", node=name))
        else:
            changes = [c.reverted_by_reboot() for c in ctx.tuner(ctx.node(name)).changes]
            ctx.journal.host_changed(name, changes)
            if changes:
                knobs = ", ".join(c.knob for c in changes)
                ctx.emit(Event("warning", f"{name}: host tuning did not survive the reboot: {knobs} NOT PERSISTED; "
                                          "set again now", node=name, data={"changes": [c.to_json() for c in changes]}))
            else:
                ctx.emit(Event("step", f"{name}: host tuning survived the reboot", node=name))
        ctx.journal.mark(name, TUNING_CHECKED)

    for_each_node(ctx, batch, check)
