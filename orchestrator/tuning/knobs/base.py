"""What every knob shares: its state as reported, the knob interface, and pure text helpers."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field

from orchestrator.hosts.actions import Action, FileWrite
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

    def possible_fixes(self, reads: Reads) -> list[Fix]:
        """Every action the knob could take on this host, whatever it finds drifting: what exact sudo
        rules must allow (`orchestrate sudoers`). Pure, like ``evaluate``."""
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


# A fix is a root action (hosts/actions.py); a plain string is a root shell command (tests, old callers).
Fix = Action | str


def write_file_command(path: str, text: str, mode: str = "0644") -> FileWrite:
    return FileWrite(path, text, mode)
