"""Deferral: a run that leaves its long waits to a scheduler's trigger instead of holding a worker.

A run started with a `Deferral` (the Airflow provider's, orchestrator/airflow_provider) looks once at
each long wait: the rejoin of a batch's nodes, their recovery, the gate before a batch, a pause. When
the wait is not over, it raises `Deferred` instead of polling: the engine journals the run as
deferred (nothing restored: the run goes on later), its lock says so, and the caller hands the wait
to a watcher (runs/watch.py) that looks from outside. When the watcher says the wait is over (or its
time is up), the run is resumed from its journal; the wait it came back for is then waited in the
worker, with what is left of its timeout, so a watcher that was early costs a little polling, never
a loop of deferrals. Timeouts count from the moment a wait first began, across deferrals.

A window's run (restart/window_run.py) admits its nodes in the worker, since each admission is a live proof,
and defers once, when nothing is left to admit: its nodes' waits then defer each at its next look
(`Deferral.draining`), and the run leaves their rejoin to the trigger as one wait (`drained`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, Literal, TypeVar

from orchestrator.retry import Clock, Seen, wait_until

WaitKind = Literal["gate", "pause", "join", "recovery"]
KINDS: tuple[WaitKind, ...] = ("gate", "pause", "join", "recovery")
T = TypeVar("T")


@dataclass(frozen=True)
class Wait:
    """What a deferred run waits for: the watcher's whole brief, kept in the journal."""

    kind: WaitKind
    batch: int
    nodes: tuple[str, ...]
    what: str  # for people: "es-2 to rejoin the cluster as a new process"
    since: float  # wall clock: when the wait first began
    timeout_s: float
    seen: str = ""  # what the run's own look saw before it deferred

    @property
    def deadline(self) -> float:
        return self.since + self.timeout_s

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "nodes": list(self.nodes)}

    @classmethod
    def from_json(cls, raw: Any) -> Wait:
        """Read back from a journal (or a trigger's arguments): every field checked, since both are files
        and messages another process wrote."""
        if not isinstance(raw, dict) or raw.get("kind") not in KINDS:
            raise ValueError(f"not a wait: {str(raw)[:100]}")
        nodes = raw.get("nodes")
        if not isinstance(nodes, list | tuple) or not all(isinstance(n, str) for n in nodes):
            raise ValueError("a wait's nodes must be a list of names")
        batch, since, timeout_s = raw.get("batch"), raw.get("since"), raw.get("timeout_s")
        if not isinstance(batch, int) or isinstance(batch, bool) or not isinstance(since, int | float) \
                or not isinstance(timeout_s, int | float) or isinstance(since, bool) or isinstance(timeout_s, bool):
            raise ValueError("a wait's batch, since and timeout_s must be numbers")
        return cls(kind=raw["kind"], batch=batch, nodes=tuple(nodes), what=str(raw.get("what", "")),
                   since=float(since), timeout_s=float(timeout_s), seen=str(raw.get("seen", "")))


class Deferred(Exception):
    """Raised at a wait a deferring run leaves to its watcher. Not an OrchestratorError: nothing failed,
    and nothing is restored."""

    def __init__(self, wait: Wait) -> None:
        super().__init__(f"deferred: waiting for {wait.what}")
        self.wait = wait


@dataclass(frozen=True)
class Deferral:
    """A run's deferral policy. ``back_for``: the wait the watcher handed back (over, or out of time),
    waited in the worker for what is left of its timeout."""

    back_for: Wait | None = None
    # A window's: set once nothing is left to admit (the window drains); until then its waits are held in the
    # worker, and from then each defers at its next look, not only its first.
    draining: threading.Event | None = None

    def defers_now(self) -> bool:
        return self.draining is None or self.draining.is_set()

    def waiting_since(self, kind: WaitKind, batch: int) -> float | None:
        held = self.back_for
        return held.since if held is not None and (held.kind, held.batch) == (kind, batch) else None


def defers(deferral: Deferral | None, kind: WaitKind, batch: int) -> bool:
    """Whether a first look that finds this wait not over defers it: a deferring run's, unless this is the
    wait it came back for."""
    return deferral is not None and deferral.waiting_since(kind, batch) is None and deferral.defers_now()


def waited_before_s(deferral: Deferral | None, kind: WaitKind, batch: int) -> float:
    """How long this wait went on before the run deferred it (0: a wait begun now)."""
    began = deferral.waiting_since(kind, batch) if deferral is not None else None
    return time.time() - began if began is not None else 0.0


def merged(waits: list[Wait]) -> Wait:
    """The nodes of a zone batch defer each at its own wait: one wait for all of them (the earliest)."""
    first = min(waits, key=lambda w: (KINDS.index(w.kind), w.since))
    nodes = tuple(dict.fromkeys(n for w in waits if (w.kind, w.batch) == (first.kind, first.batch) for n in w.nodes))
    return Wait(first.kind, first.batch, nodes, first.what if len(nodes) == 1 else f"{', '.join(nodes)} ({first.kind})",
                first.since, first.timeout_s, first.seen)


def drained(waits: list[Wait]) -> Wait:
    """A window's nodes deferred each at its own wait: one wait for all of them, the earliest kind (a rejoin
    before a recovery: the watcher passes over the nodes already back), up to the earliest deadline."""
    first = min(waits, key=lambda w: (KINDS.index(w.kind), w.since))
    nodes = tuple(dict.fromkeys(n for w in waits for n in w.nodes))
    since = min(w.since for w in waits)
    deadline = min(w.deadline for w in waits)
    return Wait(first.kind, first.batch, nodes, f"{', '.join(nodes)} to rejoin and recover (the window draining)",
                since, deadline - since, "; ".join(w.seen for w in waits if w.seen))


def deferrable_wait(deferral: Deferral | None, kind: WaitKind, batch: int, nodes: tuple[str, ...],
                    probe: Callable[[Seen[T]], T | None], *, what: str, timeout_s: float, interval_s: float,
                    clock: Clock | None = None, hint: str = "", resume: str = "",
                    should_stop: Callable[[], bool] | None = None) -> T:
    """`wait_until`, for a run that may defer: without a deferral, exactly it. With one, the first look
    that finds the wait not over raises `Deferred`, unless this is the wait the run came back for:
    then it is waited here, for what is left of its timeout (counted from when it first began). A draining
    window's wait defers at its first look after the window began to drain."""
    waited = waited_before_s(deferral, kind, batch)
    since = time.time()

    def defer(seen: str) -> None:
        if defers(deferral, kind, batch):
            raise Deferred(Wait(kind, batch, nodes, what, since, timeout_s, seen))

    return wait_until(probe, what=what, timeout_s=max(timeout_s - waited, 0.0), interval_s=interval_s, clock=clock,
                      hint=hint, resume=resume, should_stop=should_stop, waited_before_s=min(waited, timeout_s),
                      on_miss=defer if deferral is not None else None)
