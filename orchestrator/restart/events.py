"""What a run reports as it goes: one event per decision or phase, rendered by the CLI."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Event:
    kind: str  # run, batch, phase, step, wait, warning, undo, summary
    message: str
    node: str | None = None
    batch: int | None = None
    phase: str | None = None
    eta_s: float | None = None
    data: dict[str, Any] = field(default_factory=dict)
    at: float = field(default_factory=time.time)

    @property
    def ends_run(self) -> bool:
        """The run's last event: it carries the result (succeeded, failed, aborted)."""
        return self.kind == "run" and "result" in self.data


EventSink = Callable[[Event], None]


def discard(_event: Event) -> None:
    pass
