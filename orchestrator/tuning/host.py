"""A host as the knobs see it: run a shell command, read a file, and say precisely what failed.

Reads are batched: ``prefetch`` runs many read-only commands in one SSH round trip and keeps
their results, so an inspection costs a few round trips instead of one per file. A ``Host``
lives for one inspection; after changes, a new one reads afresh.
"""

from __future__ import annotations

import secrets
import shlex
from dataclasses import dataclass, field

from orchestrator.config.model import NodeEntry
from orchestrator.errors import HostError
from orchestrator.hosts.transport import CommandResult, Transport


def read_command(path: str) -> str:
    return f"cat {shlex.quote(path)}"


def batch_script(commands: list[str], token: str) -> str:
    """One shell script that runs each command (stdin closed) and prints, per command, a ``token``
    line, its exit code, its stdout, a token line, its stderr, a token line. Outputs go through
    files, so none can interleave; each output gets one newline added before its token."""
    lines = ["T=$(mktemp -d) || exit 97"]
    for i, cmd in enumerate(commands):
        lines.append(f'( {cmd}\n) >"$T/o{i}" 2>"$T/e{i}" </dev/null; echo $? >"$T/r{i}"')
    lines.append(f"for i in $(seq 0 {len(commands) - 1}); do printf '%s\\n' {token}; cat \"$T/r$i\" \"$T/o$i\"; "
                 f"printf '\\n%s\\n' {token}; cat \"$T/e$i\"; printf '\\n%s\\n' {token}; done")
    lines.append('rm -rf "$T"')
    return "\n".join(lines)


def parse_batch(out: str, count: int, token: str) -> list[CommandResult]:
    parts = out.split(f"{token}\n")
    if len(parts) != 3 * count + 1:
        raise HostError(f"batched commands: expected {count} results, the output does not match")
    results = []
    for i in range(count):
        head, err = parts[1 + 3 * i], parts[2 + 3 * i]
        rc_text, _, stdout = head.partition("\n")
        results.append(CommandResult(int(rc_text), stdout[:-1], err[:-1]))
    return results


@dataclass
class Host:
    transport: Transport
    node: NodeEntry
    cache: dict[str, CommandResult] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.node.name

    def run(self, command: str, timeout_s: float | None = None) -> CommandResult:
        if command in self.cache:
            return self.cache[command]
        return self.transport.run(self.node, command, timeout_s)  # None: the inventory's command timeout

    def prefetch(self, commands: list[str]) -> None:
        """Run the read-only ``commands`` not seen yet in one round trip; later ``run``s use their results."""
        todo = list(dict.fromkeys(c for c in commands if c not in self.cache))
        if len(todo) < 2:
            return  # one command: no gain
        token = f"@@orchestrator-{secrets.token_hex(8)}@@"
        result = self.transport.run(self.node, batch_script(todo, token))
        if not result.ok:
            return  # e.g. no mktemp: each command will run on its own
        self.cache.update(zip(todo, parse_batch(result.stdout, len(todo), token), strict=True))

    def read_many(self, paths: list[str]) -> None:
        self.prefetch([read_command(p) for p in paths])

    def read(self, path: str) -> tuple[str | None, str | None]:
        """(content, None), or (None, the reason it could not be read: missing, denied, ...)."""
        result = self.run(read_command(path))
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
