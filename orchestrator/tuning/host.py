"""A host as the knobs see it: run a shell command, read a file, and say precisely what failed."""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from orchestrator.config.model import NodeEntry
from orchestrator.hosts.transport import CommandResult, Transport


@dataclass
class Host:
    transport: Transport
    node: NodeEntry

    @property
    def name(self) -> str:
        return self.node.name

    def run(self, command: str, timeout_s: float | None = None) -> CommandResult:
        return self.transport.run(self.node, command, timeout_s)  # None: the inventory's command timeout

    def read(self, path: str) -> tuple[str | None, str | None]:
        """(content, None), or (None, the reason it could not be read: missing, denied, ...)."""
        result = self.run(f"cat {shlex.quote(path)}")
        if result.ok:
            return result.stdout, None
        reason = result.stderr.strip().split(": ")[-1] or f"exit {result.rc}"
        return None, f"cannot read {path}: {reason}"


def selected(content: str) -> str:
    """The value of a kernel choice file: the bracketed word of 'always [madvise] never', or the word."""
    words = content.split()
    for w in words:
        if w.startswith("[") and w.endswith("]"):
            return w[1:-1]
    return words[0] if len(words) == 1 else content.strip()


def choices(content: str) -> list[str]:
    return [w.strip("[]") for w in content.split()]


def write_file_command(path: str, text: str, mode: str = "0644") -> str:
    """A shell command that writes ``text`` to ``path`` atomically (temp file, then rename)."""
    tmp = f"{path}.orchestrator-tmp"
    return (f"mkdir -p {shlex.quote(path.rsplit('/', 1)[0])} && printf '%s' {shlex.quote(text)} > {shlex.quote(tmp)}"
            f" && chmod {mode} {shlex.quote(tmp)} && mv -f {shlex.quote(tmp)} {shlex.quote(path)}")
