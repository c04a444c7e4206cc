"""Everything a step needs, in one place: the adapters, the journal, the clock, the abort flag."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Generic, Protocol

from orchestrator.config.model import Inventory, NodeEntry
from orchestrator.hosts.changes import HostChange
from orchestrator.hosts.service import ServiceControl
from orchestrator.hosts.transport import Transport
from orchestrator.restart.adapter import AdapterT_co
from orchestrator.restart.deferral import Deferral
from orchestrator.restart.events import Event, EventSink
from orchestrator.restart.journal import Journal, NodeRecord, RunOptions
from orchestrator.restart.phases import Phase
from orchestrator.retry import Clock


@dataclass
class AbortFlag:
    """Set by Ctrl-C, SIGTERM or a caller's cancel; the engine stops at the next safe point."""

    requested: bool = False
    reason: str = ""
    # The run is another process's now (its lock taken over from another machine): stop changing anything,
    # settings left as they are for the process that goes on with the run.
    hands_off: bool = False

    def request(self, reason: str, hands_off: bool = False) -> None:
        self.requested = True
        self.reason = reason
        self.hands_off = self.hands_off or hands_off

    def stopped(self) -> str:
        """Who stopped the run, for its message: the operator (Ctrl-C, SIGTERM, a caller's cancel), unless another
        process took it over, which the reason then says."""
        return f"stopped ({self.reason})" if self.hands_off else f"stopped by the operator ({self.reason})"


class Tuned(Protocol):
    """What a tuner did on one host: one record per fixed knob, and, when it read nothing then, the age of
    the earlier read it trusted."""

    changes: list[HostChange]
    read_ahead_s: float | None
    drift: list[str]  # what drifts and was left as it is (`tuning.mode: check`)


class Tuner(Protocol):
    """Applies the inventory's tuning profile to one node's host (the tuning package provides it; the
    engine only calls it and journals the records). ``look_ahead`` reads hosts whose turn is next, in
    the background; ``read_ahead_ok``: nothing but its node's stop has touched the host since such a
    read, so it stands (not so after a reboot)."""

    def __call__(self, node: NodeEntry, read_ahead_ok: bool = False) -> Tuned: ...

    def look_ahead(self, nodes: Sequence[NodeEntry]) -> None: ...


@dataclass
class RunContext(Generic[AdapterT_co]):
    """Generic over the product's adapter: a product's own step takes `RunContext[ItsAdapter]` and
    calls what only its adapter has, checked by mypy; a generic step takes a bare `RunContext`."""

    inv: Inventory
    cluster: AdapterT_co
    transport: Transport
    service: ServiceControl
    journal: Journal
    emit: EventSink
    tuner: Tuner | None = None
    clock: Clock = field(default_factory=Clock)
    abort: AbortFlag = field(default_factory=AbortFlag)
    deferral: Deferral | None = None  # set: long waits are left to a scheduler's trigger (restart/deferral.py)

    @property
    def options(self) -> RunOptions:
        return self.journal.spec.options

    def node(self, name: str) -> NodeEntry:
        return self.inv.node(name)

    def record(self, name: str) -> NodeRecord:
        return self.journal.nodes[name]

    def set_phase(self, name: str, phase: Phase, message: str = "") -> None:
        with self.phase_change(name, phase, message):
            pass

    @contextmanager
    def phase_change(self, name: str, phase: Phase, message: str = "") -> Iterator[None]:
        """The node moved to ``phase`` with the journal's changes made in the block (the time the phase before
        took, what it found), in one save; then said."""
        with self.journal.together():
            yield
            rec = self.journal.set_phase(name, phase)
        self.emit(Event("phase", message or f"{name}: {phase.value}", node=name, batch=rec.batch, phase=phase.value))

    def timed(self, name: str, phase_key: str, seconds: float) -> None:
        self.journal.timed(name, phase_key, seconds)
