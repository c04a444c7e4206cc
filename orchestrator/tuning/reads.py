"""What a host said, gathered before any decision: the knobs' evaluations read only this.

A knob's ``evaluate`` asks ``Reads`` for command results and file contents. Nothing here does
I/O: a result not gathered yet is noted as missing (and answered as empty), the gathering loop
(tuning/host.py) fetches every missing one in one round trip, and evaluates again. The last
evaluation, with nothing missing, is a pure function of what was read.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field

from orchestrator.hosts.transport import CommandResult

NOT_GATHERED = CommandResult(-1, "", "not read yet")


def read_command(path: str) -> str:
    return f"cat {shlex.quote(path)}"


@dataclass
class Reads:
    results: Mapping[str, CommandResult]
    missing: list[str] = field(default_factory=list)

    def run(self, command: str) -> CommandResult:
        """The result of a read-only command the host ran."""
        if command in self.results:
            return self.results[command]
        if command not in self.missing:
            self.missing.append(command)
        return NOT_GATHERED

    def read(self, path: str) -> tuple[str | None, str | None]:
        """(content, None), or (None, the reason it could not be read: missing, denied, ...)."""
        result = self.run(read_command(path))
        if result.ok:
            return result.stdout, None
        reason = result.stderr.strip().split(": ")[-1] or f"exit {result.rc}"
        return None, f"cannot read {path}: {reason}"

    def need(self, paths: list[str]) -> None:
        """Ask for several files at once (so they come in one round trip, not one per pass)."""
        for path in paths:
            self.run(read_command(path))
