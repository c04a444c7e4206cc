"""A host transport for the fake Elasticsearch: `systemctl stop/start/is-active` on a node's host stop and
start that node of the fake cluster (through its server's `/_fake/` controls); any other command fails
as a command the host does not have (host reads then say unknown, as they do for a host that cannot
tell). Implements `hosts.transport.Transport`."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import quote

from orchestrator.config.model import NodeEntry
from orchestrator.hosts.transport import CommandResult


class FakeHostTransport:
    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")
        self.commands: list[tuple[str, str]] = []  # (node, command), in order

    def _control(self, method: str, what: str) -> Any:
        request = urllib.request.Request(f"{self.url}/_fake/{what}", method=method)
        with urllib.request.urlopen(request, timeout=30) as answer:  # 127.0.0.1: the fake's own server
            return json.loads(answer.read())

    def run(self, node: NodeEntry, command: str, timeout_s: float | None = None,
            stdin: bytes | None = None) -> CommandResult:
        self.commands.append((node.name, command))
        name = quote(node.name, safe="")
        if "systemctl stop" in command:
            self._control("POST", f"stop/{name}")
            return CommandResult(0, "success\n", "")
        if "systemctl start" in command:
            self._control("POST", f"start/{name}")
            return CommandResult(0, "", "")
        if "systemctl is-active" in command:
            active = self._control("GET", f"active/{name}")["active"]
            return CommandResult(0 if active else 3, "active\n" if active else "inactive\n", "")
        if "systemctl is-enabled" in command:
            return CommandResult(0, "enabled\n", "")
        if "systemctl show" in command:
            return CommandResult(0, "ActiveState=active\nResult=success\nExecMainStatus=0\n", "")
        return CommandResult(127, "", f"{command.split()[0] if command.split() else command}: not on a fake host")

    def check(self, node: NodeEntry) -> None:
        return None

    def exact_sudo(self, node: NodeEntry) -> bool:
        return False

    def close(self) -> None:
        return None


class AnsweringHosts:
    """The SSH preflight's answer, as `runs.restart.start` takes it (``early``): the fake hosts, all answering."""

    def __init__(self, transport: FakeHostTransport) -> None:
        self.transport = transport

    def result(self) -> tuple[FakeHostTransport, list[str]]:
        return self.transport, []


def fake_inventory(path: Path, url: str, names_and_ips: list[tuple[str, str]], **more: Any) -> Path:
    """An inventory of the fake Elasticsearch at ``url`` (its hosts fake: SSH is never opened), written to
    ``path``; ``more``: further top-level sections."""
    import yaml

    path.write_text(yaml.safe_dump({
        "cluster": {"name": path.stem, "endpoints": [url]}, "ssh": {"user": "root", "known_hosts": "/dev/null"},
        "nodes": [{"name": n, "host": ip} for n, ip in names_and_ips],
        "timeouts": {"poll_interval_s": 0.05}, **more}))
    return path
