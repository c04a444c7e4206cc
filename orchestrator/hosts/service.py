"""Stopping, starting and asking about the database service on a node's host."""

from __future__ import annotations

import shlex

from orchestrator.config.model import NodeEntry, ServiceSection
from orchestrator.errors import HostError
from orchestrator.hosts.actions import systemctl
from orchestrator.hosts.transport import Transport


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

    def stop(self, node: NodeEntry) -> None:
        self._act("stop", node)

    def start(self, node: NodeEntry) -> None:
        self._act("start", node)

    def _act(self, action: str, node: NodeEntry) -> None:
        result = self.transport.run(node, self._command(action, node), self.timeout_s)
        if not result.ok:
            said = (result.stderr or result.stdout).strip()[-500:]
            raise HostError(f"{node.name}: `{self._command(action, node)}` failed (exit {result.rc}): {said}")
