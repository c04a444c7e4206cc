"""Explicit node phases of a restart and the transitions allowed between them."""

from __future__ import annotations

from enum import StrEnum

from orchestrator.errors import JournalError


class Phase(StrEnum):
    PENDING = "pending"
    STOPPING = "stopping"
    STOPPED = "stopped"
    TUNED = "tuned"
    STARTING = "starting"
    JOINED = "joined"
    RECOVERING = "recovering"
    DONE = "done"


ALLOWED: dict[Phase, set[Phase]] = {
    Phase.PENDING: {Phase.STOPPING},
    Phase.STOPPING: {Phase.STOPPING, Phase.STOPPED},
    Phase.STOPPED: {Phase.TUNED, Phase.STARTING},
    Phase.TUNED: {Phase.STARTING},
    Phase.STARTING: {Phase.STARTING, Phase.JOINED},
    Phase.JOINED: {Phase.RECOVERING, Phase.DONE},
    Phase.RECOVERING: {Phase.RECOVERING, Phase.DONE},
    Phase.DONE: set(),
}


ORDER = list(Phase)


def reached(current: Phase, phase: Phase) -> bool:
    """Whether a node in ``current`` has got at least as far as ``phase`` (for idempotent steps)."""
    return ORDER.index(current) >= ORDER.index(phase)


def check_transition(node: str, current: Phase, new: Phase) -> None:
    """Raise on an illegal move: it would mean the journal and the run disagree."""
    if new not in ALLOWED[current]:
        raise JournalError(f"{node}: illegal phase change {current} -> {new}; the journal does not match the run")
