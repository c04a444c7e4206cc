"""Everything a step needs, in one place: the adapters, the journal, the clock, the abort flag."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from orchestrator.config.model import Inventory, NodeEntry
from orchestrator.hosts.service import ServiceControl
from orchestrator.hosts.transport import Transport
from orchestrator.restart.adapter import ClusterAdapter
from orchestrator.restart.events import Event, EventSink
from orchestrator.restart.journal import Journal, NodeRecord, RunOptions
from orchestrator.restart.phases import Phase
from orchestrator.retry import Clock


@dataclass
class AbortFlag:
    """Set by Ctrl-C, SIGTERM or a caller's cancel; the engine stops at the next safe point."""

    requested: bool = False
    reason: str = ""

    def request(self, reason: str) -> None:
        self.requested = True
        self.reason = reason


# A host tuner applies the inventory's tuning profile to one node's host and returns what it changed,
# one record per knob: {"knob", "before": {"live", "persisted"}, "after": {...}} (the tuning package
# provides it; the engine only calls it and journals the records).
Tuner = Callable[[NodeEntry], list[dict[str, Any]]]


@dataclass
class RunContext:
    inv: Inventory
    cluster: ClusterAdapter
    transport: Transport
    service: ServiceControl
    journal: Journal
    emit: EventSink
    tuner: Tuner | None = None
    clock: Clock = field(default_factory=Clock)
    abort: AbortFlag = field(default_factory=AbortFlag)

    @property
    def options(self) -> RunOptions:
        return self.journal.spec.options

    def node(self, name: str) -> NodeEntry:
        return self.inv.node(name)

    def record(self, name: str) -> NodeRecord:
        return self.journal.nodes[name]

    def set_phase(self, name: str, phase: Phase, message: str = "") -> None:
        rec = self.journal.set_phase(name, phase)
        self.emit(Event("phase", message or f"{name}: {phase.value}", node=name, batch=rec.batch, phase=phase.value))

    def timed(self, name: str, phase_key: str, seconds: float) -> None:
        self.journal.timed(name, phase_key, seconds)
