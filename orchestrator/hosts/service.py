"""Stopping, starting and asking about the database service on a node's host."""

from __future__ import annotations

import re
import shlex

from orchestrator.config.model import NodeEntry, ServiceSection
from orchestrator.errors import HostError
from orchestrator.hosts.actions import systemctl
from orchestrator.hosts.transport import Transport

JOURNAL_LINES = 15  # of a failed unit's journal, in the error that stops the run
STACK_FRAME = re.compile(r"\s*(at \S+\(|\.\.\. \d+ more)")


def render(template: str, node: NodeEntry) -> str:
    """Fill {node} and {host} in an operator's command, quoted so a name cannot inject commands."""
    return template.replace("{node}", shlex.quote(node.name)).replace("{host}", shlex.quote(node.host))


class ServiceControl:
    def __init__(self, transport: Transport, cfg: ServiceSection, timeout_s: float) -> None:
        self.transport = transport
        self.cfg = cfg
        self.timeout_s = timeout_s
        # systemd's stop and start are no-ops on a unit already stopped or started; commands may not be.
        self.idempotent = cfg.manager == "systemd"

    def _command(self, action: str, node: NodeEntry) -> str:
        if self.cfg.manager == "systemd":
            if action == "status":  # asking needs no root
                return f"systemctl is-active {shlex.quote(self.cfg.unit)}"
            return systemctl(action, self.cfg.unit).shell(self.transport.exact_sudo(node))
        template = {"stop": self.cfg.stop, "start": self.cfg.start, "status": self.cfg.status}[action]
        assert template is not None  # validated with the inventory
        return render(template, node)

    def is_active(self, node: NodeEntry) -> bool:
        return self.transport.run(node, self._command("status", node), 60).ok

    def is_enabled(self, node: NodeEntry) -> bool | None:
        """Whether the host's boot starts the service; None when the manager cannot tell (commands)."""
        if self.cfg.manager != "systemd":
            return None
        return self.transport.run(node, f"systemctl is-enabled {shlex.quote(self.cfg.unit)}", 60).ok

    def stop(self, node: NodeEntry) -> bool:
        """Stop the service; False when systemd had to kill it (its stop ran past TimeoutStopSec)."""
        if self.cfg.manager != "systemd":
            self._act("stop", node)
            return True
        # The stop's result read in the same round trip: `timeout` is a stop systemd ended with SIGKILL.
        result = self._act("stop", node, f" && systemctl show -p Result --value {shlex.quote(self.cfg.unit)}")
        return result.strip().splitlines()[-1:] != ["timeout"]

    def failure(self, node: NodeEntry) -> str | None:
        """How a unit that systemd reports failed failed, with the last lines of its journal (None: it has
        not failed, or the manager cannot tell)."""
        if self.cfg.manager != "systemd":
            return None
        unit = shlex.quote(self.cfg.unit)
        shown = self.transport.run(node, f"systemctl show -p ActiveState -p Result -p ExecMainStatus {unit}", 60)
        state = dict(line.split("=", 1) for line in shown.stdout.splitlines() if "=" in line)
        if state.get("ActiveState") != "failed":
            return None
        journal = self.transport.run(node, f"journalctl -u {unit} -n {JOURNAL_LINES * 20} --no-pager -o cat 2>&1", 60)
        # A JVM's stack frames would fill the lines and push out what it said: the frames are left out.
        said = [line[:300] for line in journal.stdout.strip().splitlines() if not STACK_FRAME.match(line)]
        lines = said[-JOURNAL_LINES:]
        return (f"unit {self.cfg.unit} failed (result {state.get('Result', '?')}, exit status "
                f"{state.get('ExecMainStatus', '?')}); the last lines of its journal:\n  " + "\n  ".join(lines))

    def start(self, node: NodeEntry) -> None:
        self._act("start", node)

    def _act(self, action: str, node: NodeEntry, then: str = "") -> str:
        result = self.transport.run(node, self._command(action, node) + then, self.timeout_s)
        if not result.ok:
            said = (result.stderr or result.stdout).strip()[-500:]
            failed = self.failure(node) if action == "start" else None
            raise HostError(f"{node.name}: `{self._command(action, node)}` failed (exit {result.rc}): {said}"
                            + (f"\n{failed}" if failed else ""))
        return result.stdout
