"""Everything a step needs, in one place: the adapters, the journal, the clock, the abort flag."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from orchestrator.config.model import Inventory, NodeEntry
from orchestrator.config.playbook import Playbook
from orchestrator.hosts.service import ServiceControl
from orchestrator.hosts.transport import Transport
from orchestrator.restart.adapter import ClusterAdapter
from orchestrator.restart.events import Event, EventSink
from orchestrator.restart.journal import Journal, NodeRecord
from orchestrator.restart.phases import Phase, check_transition
from orchestrator.retry import Clock

if TYPE_CHECKING:
    from orchestrator.es.adapter import ElasticsearchAdapter
    from orchestrator.riak.adapter import RiakAdapter


@dataclass
class AbortFlag:
    """Set by Ctrl-C or SIGTERM; the engine stops at the next safe point."""

    requested: bool = False
    reason: str = ""

    def request(self, reason: str) -> None:
        self.requested = True
        self.reason = reason


# A host tuner applies the inventory's tuning profile to one node's host (the tuning module).
Tuner = Callable[[NodeEntry], list[str]]


@dataclass
class RunContext:
    inv: Inventory
    playbook: Playbook
    cluster: ClusterAdapter
    transport: Transport
    service: ServiceControl
    journal: Journal
    emit: EventSink
    tuner: Tuner | None = None
    clock: Clock = field(default_factory=Clock)
    abort: AbortFlag = field(default_factory=AbortFlag)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def es(self) -> ElasticsearchAdapter:
        """The Elasticsearch adapter, for the Elasticsearch steps (a playbook is checked against its product)."""
        from orchestrator.es.adapter import ElasticsearchAdapter

        assert isinstance(self.cluster, ElasticsearchAdapter), "an Elasticsearch step in a run of another product"
        return self.cluster

    @property
    def riak(self) -> RiakAdapter:
        from orchestrator.riak.adapter import RiakAdapter

        assert isinstance(self.cluster, RiakAdapter), "a Riak step in a run of another product"
        return self.cluster

    def node(self, name: str) -> NodeEntry:
        return self.inv.node(name)

    def record(self, name: str) -> NodeRecord:
        return self.journal.nodes[name]

    def set_phase(self, name: str, phase: Phase, message: str = "") -> None:
        with self.lock:
            rec = self.record(name)
            check_transition(name, rec.phase, phase)
            if rec.phase != phase:
                rec.started_at[phase.value] = self.clock_wall()
            rec.phase = phase.value
            self.journal.save()
        self.emit(Event("phase", message or f"{name}: {phase.value}", node=name, batch=rec.batch, phase=phase.value))

    def timed(self, name: str, phase_key: str, seconds: float) -> None:
        with self.lock:
            self.record(name).phases[phase_key] = round(seconds, 2)
            self.journal.save()

    @staticmethod
    def clock_wall() -> float:
        return time.time()
