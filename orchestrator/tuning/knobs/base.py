"""What every knob shares: its state as reported, the knob interface, and pure text helpers."""

from __future__ import annotations

import shlex
from abc import ABC, abstractmethod
from dataclasses import dataclass, field

from orchestrator.tuning.reads import Reads


@dataclass(frozen=True)
class KnobState:
    knob: str
    live: str | None
    persisted: str | None  # what a reboot gives; None when nothing makes it stick
    desired: str
    live_ok: bool
    persisted_ok: bool
    error: str | None = None
    note: str | None = None
    fix: tuple[Fix, ...] = field(default=(), compare=False)  # commands and file writes that would fix it

    @property
    def drift(self) -> bool:
        return self.error is not None or not (self.live_ok and self.persisted_ok)


class Knob(ABC):
    @abstractmethod
    def evaluate(self, reads: Reads) -> list[KnobState]:
        """The live and persisted values, and the commands that would correct them, from what the host
        said. Pure: asking ``reads`` for something not gathered yet only notes it as missing."""

    def probes(self) -> list[str]:
        """Read-only commands ``evaluate`` needs first: fetched for all knobs in one round trip."""
        return []


def unreadable(knob: str, desired: str, error: str) -> KnobState:
    return KnobState(knob, None, None, desired, False, False, error=error)


def selected(content: str) -> str:
    """The value of a kernel choice file: the bracketed word of 'always [madvise] never', or the word."""
    words = content.split()
    for w in words:
        if w.startswith("[") and w.endswith("]"):
            return w[1:-1]
    return words[0] if len(words) == 1 else content.strip()


def choices(content: str) -> list[str]:
    return [w.strip("[]") for w in content.split()]


@dataclass(frozen=True)
class FileWrite:
    """A file written on a host: its content goes on the command's standard input, never in its
    arguments (`ps` shows those; riak.conf holds the cluster's cookie). Written to an unpredictable
    temporary name in the same directory, then renamed, and only into a directory owned by root (or
    by the SSH user): a planted symlink in a directory another account can write is never followed."""

    path: str
    text: str
    mode: str = "0644"

    @property
    def data(self) -> bytes:
        return self.text.encode()

    def shell(self) -> str:
        """The command; it reads exactly the file's bytes from standard input."""
        directory, path = shlex.quote(self.path.rsplit("/", 1)[0] or "/"), shlex.quote(self.path)
        return (f"d={directory}; mkdir -p -- \"$d\" && o=$(stat -c %u -- \"$d\") && "
                f"{{ [ \"$o\" = 0 ] || [ \"$o\" = \"$(id -u)\" ] || {{ echo \"refusing to write into $d: it belongs "
                f"to uid $o, not root\" >&2; exit 1; }}; }} && t=$(mktemp -- \"$d/.orchestrator.XXXXXXXX\") && "
                f"{{ head -c {len(self.data)} > \"$t\" && chmod {self.mode} -- \"$t\" && mv -f -- \"$t\" {path} "
                f"|| {{ rm -f -- \"$t\"; exit 1; }}; }}")

    def __str__(self) -> str:  # what --dry-run shows: never the content
        return f"write {self.path} ({len(self.data)} bytes, mode {self.mode}, content on standard input)"


Fix = str | FileWrite


def write_file_command(path: str, text: str, mode: str = "0644") -> FileWrite:
    return FileWrite(path, text, mode)
