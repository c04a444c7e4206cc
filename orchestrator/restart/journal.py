"""The run journal: the persisted state of a run, with an undo record for every change.

The journal is the only writer of run state: every transition is a method here that changes the
state and saves it atomically (temporary file, then rename) under the journal's own lock, so
steps running in parallel for a zone's nodes never interleave a save. The file is readable only
by its owner and stamped with a format version that a reader refuses when it does not know it.

It holds the run's spec (what `resume` runs again: mode, options, the resolved playbook, the
inventory as it was, the plan) and its progress (batches, nodes, undo records). An undo record
is written *before* its change is made; `resume` and the end of a run restore every record not
yet restored, in reverse order.
"""

from __future__ import annotations

import functools
import json
import re
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields, is_dataclass, replace
from enum import StrEnum
from pathlib import Path
from typing import Any, get_type_hints

from orchestrator.config.loader import read_bytes_of, strict_json
from orchestrator.errors import ConfigError, JournalError, OrchestratorError
from orchestrator.paths import existing_private_dir, private_dir, state_root, write_atomically
from orchestrator.restart.deferral import Wait
from orchestrator.restart.phases import Phase, check_transition
from orchestrator.restart.plan import Mode, Plan

FORMAT_VERSION = 2
MAX_JOURNAL_BYTES = 256_000_000
RUN_ID = re.compile(r"\d{8}T\d{6}-[0-9a-f]{6}")

REBOOTED = "rebooted"  # the mark (NodeRecord.started_at) of a host back from its reboot


class RunState(StrEnum):
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    ABORTED = "aborted"  # stopped by an operator (Ctrl-C, SIGTERM, a hook's abort); `resume` goes on
    STOPPED = "stopped"  # stopped as asked, after --stop-after's batches; `resume` goes on
    ABANDONED = "abandoned"  # given up by `orchestrate abandon`: its settings put back, never resumed
    DEFERRED = "deferred"  # a long wait left to a scheduler's trigger (restart/deferral.py); resumed after it

    @property
    def finished(self) -> bool:
        """Whether the run is over for good: nothing to resume, and a new run may start."""
        return self in (RunState.SUCCEEDED, RunState.ABANDONED)


class UndoState(StrEnum):
    INTENDED = "intended"  # written before the change; the change may or may not have been made
    APPLIED = "applied"
    RESTORED = "restored"


@dataclass(frozen=True)
class RunOptions:
    """Every option that changes how a run behaves; recorded, so `resume` behaves the same."""

    allow_yellow: bool = False
    # Index patterns (shell-style) the operator accepted to be unavailable while their node restarts.
    allow_unavailable: tuple[str, ...] = ()
    canary: bool = False  # after the first batch, pause until `orchestrate continue`
    pause_between_s: float = 0.0  # a wait between batches
    nodes: tuple[str, ...] = ()  # the subset restarted (--nodes), as patterns; empty: all
    exclude: tuple[str, ...] = ()  # nodes left out (--exclude), as patterns
    upgrade_to: str = ""  # an upgrade run's target version (`orchestrate upgrade --to`); empty: a restart
    snapshot_check: bool = True  # an upgrade's check for a recent snapshot (off: --no-snapshot-check)
    reboot: bool = False  # `restart --reboot`: each host is rebooted, not only the service restarted

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> RunOptions:
        def texts(key: str) -> tuple[str, ...]:
            return tuple(str(p) for p in raw.get(key, ()))

        return cls(allow_yellow=bool(raw.get("allow_yellow", False)), allow_unavailable=texts("allow_unavailable"),
                   canary=bool(raw.get("canary", False)), pause_between_s=float(raw.get("pause_between_s", 0)),
                   nodes=texts("nodes"), exclude=texts("exclude"), upgrade_to=str(raw.get("upgrade_to", "")),
                   snapshot_check=bool(raw.get("snapshot_check", True)), reboot=bool(raw.get("reboot", False)))


@dataclass(frozen=True)
class RunSpec:
    """What the run is: recorded when it starts, run again as it is by `resume`."""

    mode: Mode
    options: RunOptions
    playbook: dict[str, Any]  # the resolved playbook, as it was loaded
    inventory_path: str
    inventory: dict[str, Any]  # the validated inventory as it was (secrets are only references)
    plan: Plan
    prelude: dict[str, dict[str, Any]] = field(default_factory=dict)  # e.g. a force-merge before batch 1

    def to_json(self) -> dict[str, Any]:
        return {"mode": self.mode.value, "options": asdict(self.options), "playbook": self.playbook,
                "inventory_path": self.inventory_path, "inventory": self.inventory, "plan": self.plan.to_json(),
                "prelude": self.prelude}

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> RunSpec:
        return cls(mode=Mode(raw["mode"]), options=RunOptions.from_json(raw["options"]), playbook=raw["playbook"],
                   inventory_path=raw["inventory_path"], inventory=raw["inventory"],
                   plan=Plan.from_json(raw["plan"]), prelude=raw.get("prelude", {}))


@dataclass
class UndoRecord:
    id: int
    key: str
    scope: str
    before: Any
    applied: Any
    state: UndoState = UndoState.INTENDED
    batch: int | None = None


@dataclass(frozen=True)
class HistoryEntry:
    """A turn in a run's life, for its report: how it ended each time, and each resume."""

    at: float
    event: str  # a RunState's value, or "resumed"
    message: str


@dataclass
class NodeRecord:
    name: str
    batch: int
    phase: str = "pending"
    process_before: str | None = None
    process_after: str | None = None
    restarted: bool = False
    phases: dict[str, float] = field(default_factory=dict)  # phase -> seconds
    started_at: dict[str, float] = field(default_factory=dict)  # phase -> wall clock start
    recovery: dict[str, int] = field(default_factory=dict)
    # Each change made to the node's host (tuning): {"knob", "before": {...}, "after": {...}}.
    host_changes: list[dict[str, Any]] = field(default_factory=list)
    boot_before: str | None = None  # `restart --reboot`: the host's boot id before its reboot


def check_field_types(record: object) -> None:
    """Each plain field (numbers, text, flags, lists of text, maps of numbers) holds what its type says."""
    if not is_dataclass(record) or isinstance(record, type):
        return
    hints = type_hints(type(record))
    for f in fields(record):
        value, hint = getattr(record, f.name), hints[f.name]
        allowed = PLAIN_TYPES.get(hint)
        if allowed is not None and not allowed(value):
            raise ValueError(f"its field {f.name} holds {type(value).__name__}, not {hint}")


@functools.cache
def type_hints(kind: type) -> dict[str, Any]:
    return get_type_hints(kind)


def _number(v: object) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


PLAIN_TYPES: dict[object, Callable[[object], bool]] = {
    float: _number, float | None: lambda v: v is None or _number(v),
    int: lambda v: isinstance(v, int) and not isinstance(v, bool), str: lambda v: isinstance(v, str),
    str | None: lambda v: v is None or isinstance(v, str), bool: lambda v: isinstance(v, bool),
    list[str]: lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v),
    dict[str, float]: lambda v: isinstance(v, dict) and all(_number(x) for x in v.values()),
    dict[str, int]: lambda v: isinstance(v, dict) and all(_number(x) for x in v.values()),
    dict[str, str]: lambda v: isinstance(v, dict) and all(isinstance(x, str) for x in v.values()),
}


class BatchState(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    DONE = "done"


@dataclass
class BatchRecord:
    number: int
    label: str
    nodes: list[str]
    state: BatchState = BatchState.PENDING
    steps_done: list[str] = field(default_factory=list)
    started: float | None = None
    finished: float | None = None


@dataclass
class Journal:
    run_id: str
    cluster: str
    spec: RunSpec
    batches: list[BatchRecord]
    nodes: dict[str, NodeRecord]
    state: RunState = RunState.RUNNING
    undo: list[UndoRecord] = field(default_factory=list)
    created: float = field(default_factory=time.time)
    updated: float = field(default_factory=time.time)
    finished: float | None = None
    message: str = ""
    run_setup_done: bool = False
    preludes_done: list[str] = field(default_factory=list)
    prelude_reports: dict[str, Any] = field(default_factory=dict)
    cluster_calls: int = 0
    paused: str | None = None  # why the run is holding at a batch boundary, while it is
    hook_values: dict[str, str] = field(default_factory=dict)  # saved by hooks for later ones (a silence id)
    history: list[HistoryEntry] = field(default_factory=list)  # each end and each resume, oldest first
    waiting: dict[str, Any] | None = None  # while deferred: the wait left to the trigger (deferral.Wait)
    origin: str = ""  # who started the run, when a scheduler did: its task's key (finds the run on a retry)
    format: int = FORMAT_VERSION
    path: Path | None = field(default=None, compare=False)
    _lock: threading.RLock = field(default_factory=threading.RLock, compare=False, repr=False)
    # The spec as saved, kept: it is most of a large cluster's journal, and the same at each save.
    _spec_text: tuple[RunSpec, str] | None = field(default=None, compare=False, repr=False)

    # --- reading ------------------------------------------------------------------------------
    @property
    def plan(self) -> Plan:
        return self.spec.plan

    @property
    def mode(self) -> str:
        return self.spec.mode.value

    @property
    def product(self) -> str:
        return self.spec.plan.product

    def pending_undo(self) -> list[UndoRecord]:
        return [u for u in self.undo if u.state is not UndoState.RESTORED]

    def original_value(self, key: str, scope: str) -> tuple[bool, Any]:
        """The value a key had before this run first changed it, if it did."""
        for u in self.undo:
            if u.key == key and u.scope == scope:
                return True, u.before
        return False, None

    # --- the transitions: each changes state and saves it, under the lock ----------------------
    @contextmanager
    def change(self) -> Iterator[None]:
        """Change the journal and save it; the one way state is written (also for a step's own records)."""
        with self._lock:
            yield
            self.save()

    def set_state(self, state: RunState, message: str = "") -> None:
        with self.change():
            self.state = state
            self.message = message
            self.finished = None if state in (RunState.RUNNING, RunState.DEFERRED) else time.time()
            if state is not RunState.DEFERRED:
                self.waiting = None
            if state is not RunState.RUNNING:
                self.history = [*self.history, HistoryEntry(self.finished or time.time(), state.value, message)]

    def resumed(self, changes: list[str]) -> None:
        """A resume begins (``changes``: what it accepted of a changed inventory)."""
        said = f"resumed from {self.state.value}" + (f"; inventory changed: {'; '.join(changes[:10])}" if changes
                                                     else "")
        with self.change():
            self.history = [*self.history, HistoryEntry(time.time(), "resumed", said)]

    def defer(self, wait: Wait) -> None:
        """The run leaves ``wait`` to its trigger: said in the journal, for the trigger and for `status`."""
        with self._lock:  # one save: set_state keeps the wait of a deferred run
            self.waiting = wait.to_json()
            self.set_state(RunState.DEFERRED, f"waiting for {wait.what} (deferred to the scheduler's trigger)")

    @property
    def deferred_wait(self) -> Wait | None:
        return Wait.from_json(self.waiting) if self.state is RunState.DEFERRED and self.waiting else None

    def save_hook_values(self, values: dict[str, str]) -> None:
        with self.change():
            self.hook_values.update(values)

    def set_paused(self, reason: str | None) -> None:
        with self.change():
            self.paused = reason

    def setup_done(self) -> None:
        with self.change():
            self.run_setup_done = True

    def setup_undone(self) -> None:
        """The run's settings were restored before its end (a stop): a resume makes them again."""
        with self.change():
            self.run_setup_done = False

    def prelude_done(self, name: str, report: Any) -> None:
        with self.change():
            self.preludes_done.append(name)
            self.prelude_reports[name] = report

    def begin_batch(self, batch: BatchRecord) -> None:
        with self.change():
            batch.state = BatchState.RUNNING
            batch.started = time.time()

    def reopen_batch(self, batch: BatchRecord) -> None:
        """A batch refused at its last check, before any of its nodes stopped: it starts over."""
        with self.change():
            batch.state = BatchState.PENDING
            batch.steps_done.clear()
            batch.started = None

    def accept_unavailable(self, patterns: tuple[str, ...]) -> None:
        """Patterns given to `resume --allow-unavailable`: from now on part of the run's options."""
        with self.change():
            known = self.spec.options.allow_unavailable
            options = replace(self.spec.options, allow_unavailable=known + tuple(p for p in patterns if p not in known))
            self.spec = replace(self.spec, options=options)

    def step_done(self, batch: BatchRecord, step: str) -> None:
        with self.change():
            batch.steps_done.append(step)

    def end_batch(self, batch: BatchRecord) -> None:
        with self.change():
            batch.state = BatchState.DONE
            batch.finished = time.time()

    def record_undo(self, key: str, scope: str, before: Any, applied: Any, batch: int | None) -> UndoRecord:
        """Write the undo record of a change about to be made (state: intended)."""
        with self.change():
            record = UndoRecord(id=len(self.undo) + 1, key=key, scope=scope, before=before, applied=applied,
                                batch=batch)
            self.undo.append(record)
        return record

    def undo_state(self, record: UndoRecord, state: UndoState) -> None:
        with self.change():
            record.state = state

    def set_phase(self, node: str, phase: Phase) -> NodeRecord:
        """Move a node to ``phase``; an illegal move raises (the journal and the run would disagree)."""
        with self.change():
            rec = self.nodes[node]
            check_transition(node, rec.phase, phase)
            if rec.phase != phase:
                rec.started_at[phase.value] = time.time()
            rec.phase = phase.value
        return rec

    def mark(self, node: str, key: str) -> None:
        """Note the wall-clock time of a moment in the node's restart (e.g. the start command issued)."""
        with self.change():
            self.nodes[node].started_at[key] = time.time()

    def timed(self, node: str, phase_key: str, seconds: float) -> None:
        with self.change():
            self.nodes[node].phases[phase_key] = round(seconds, 2)

    def process_before(self, node: str, identity: str | None) -> None:
        with self.change():
            self.nodes[node].process_before = identity

    def restarted(self, node: str, identity: str) -> None:
        with self.change():
            self.nodes[node].process_after = identity
            self.nodes[node].restarted = True

    def recovered(self, node: str, figures: dict[str, int]) -> None:
        """Merge the node's recovery figures (bytes copied and reused, handoffs) into its record."""
        with self.change():
            self.nodes[node].recovery = {**self.nodes[node].recovery, **figures}

    def host_changed(self, node: str, changes: list[dict[str, Any]]) -> None:
        """Record what was changed on the node's host (appended: a resumed tune adds, never replaces)."""
        if changes:
            with self.change():
                self.nodes[node].host_changes = [*self.nodes[node].host_changes, *changes]

    def boot_id_before(self, node: str, boot_id: str) -> None:
        with self.change():
            self.nodes[node].boot_before = boot_id

    def calls(self, count: int) -> None:
        with self.change():
            self.cluster_calls = count

    # --- persistence --------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {"spec": self.spec.to_json(), **self._state_dict(asdict)}

    def _state_dict(self, record: Callable[[Any], dict[str, Any]]) -> dict[str, Any]:
        """Everything but the spec; each record through ``record`` (a copy, or for a save its fields as
        they are: no record holds another)."""
        return {
            "format": self.format, "run_id": self.run_id, "cluster": self.cluster,
            "state": self.state.value, "created": self.created, "updated": self.updated, "finished": self.finished,
            "message": self.message, "run_setup_done": self.run_setup_done, "preludes_done": self.preludes_done,
            "prelude_reports": self.prelude_reports, "cluster_calls": self.cluster_calls, "paused": self.paused,
            "hook_values": self.hook_values, "history": [record(h) for h in self.history],
            "waiting": self.waiting, "origin": self.origin,
            "batches": [record(b) for b in self.batches], "nodes": {k: record(v) for k, v in self.nodes.items()},
            "undo": [record(u) for u in self.undo],
        }

    def to_text(self) -> str:
        """The journal as saved. A run saves it some 40 times per batch, so for a cluster of 5,000 nodes
        (a 4 MB journal) this took 240 ms each: the spec, most of it, is encoded once (again only when it
        is replaced), the records are not copied, and the encoding is compact (json's C encoder: an
        indented one is Python's own, 2.7 times slower)."""
        if self._spec_text is None or self._spec_text[0] is not self.spec:
            self._spec_text = (self.spec, json.dumps(self.spec.to_json(), default=str))
        state = json.dumps(self._state_dict(vars), default=str)
        return f'{{"spec":{self._spec_text[1]},{state[1:]}'

    def save(self) -> None:
        if self.path is None:
            raise JournalError("journal has no path")
        with self._lock:
            self.updated = time.time()
            write_atomically(self.path, self.to_text(), mode=0o600)

    @classmethod
    def load(cls, path: Path) -> Journal:
        """The journal saved at ``path``, which must be this user's own file, writable by no one else
        and named after the run it holds: `resume` runs what a journal records (its hooks, its
        commands) and `abandon` writes its undo records, so a planted or renamed one is refused."""
        try:
            raw = strict_json(read_bytes_of(path, limit=MAX_JOURNAL_BYTES, private=True))
        except ConfigError as exc:
            raise JournalError(f"cannot read journal {path}: {'; '.join(exc.problems)}") from None
        except (ValueError, RecursionError) as exc:
            raise JournalError(f"cannot read journal {path}: not JSON written by this tool "
                               f"({str(exc)[:200]})") from None
        if not isinstance(raw, dict) or raw.get("format") != FORMAT_VERSION:
            found = raw.get("format") if isinstance(raw, dict) else "unknown"
            raise JournalError(f"journal {path} has format {found!r}; this version of orchestrator reads format "
                               f"{FORMAT_VERSION} only. Use the version that wrote it.")
        try:
            journal = cls(
                run_id=raw["run_id"], cluster=raw["cluster"], spec=RunSpec.from_json(raw["spec"]),
                batches=[BatchRecord(**{**b, "state": BatchState(b["state"])}) for b in raw["batches"]],
                nodes={k: NodeRecord(**v) for k, v in raw["nodes"].items()},
                state=RunState(raw["state"]), undo=[UndoRecord(**{**u, "state": UndoState(u["state"])})
                                                    for u in raw["undo"]],
                created=raw["created"], updated=raw["updated"], finished=raw["finished"], message=raw["message"],
                run_setup_done=raw["run_setup_done"], preludes_done=raw["preludes_done"],
                prelude_reports=raw["prelude_reports"], cluster_calls=raw["cluster_calls"],
                paused=None if raw.get("paused") is None else str(raw["paused"]),
                hook_values={str(k): str(v) for k, v in dict(raw.get("hook_values", {})).items()},
                history=[HistoryEntry(**h) for h in raw.get("history", [])],
                waiting=None if raw.get("waiting") is None else Wait.from_json(raw["waiting"]).to_json(),
                origin=str(raw.get("origin") or ""))
            journal.check_consistent()
            if journal.run_id != path.stem:
                raise ValueError(f"it holds run {str(journal.run_id)[:40]!r}, not the run its name says")
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise JournalError(f"journal {path} is damaged ({str(exc)[:200]}); it was not written by this tool "
                               "or was changed since") from None
        journal.path = path
        return journal

    def check_consistent(self) -> None:
        """Progress that matches the plan: the same batches of the same nodes, a record per node, each
        field of the type it is written with (a timestamp that is text would crash a report later)."""
        for record in (self, *self.batches, *self.nodes.values(), *self.history):
            check_field_types(record)
        planned = [(b.number, list(b.nodes)) for b in self.spec.plan.batches]
        if [(b.number, b.nodes) for b in self.batches] != planned:
            raise ValueError("its batches do not match its plan")
        if set(self.nodes) != {n for _, nodes in planned for n in nodes}:
            raise ValueError("its node records do not match its plan")
        if any(u.state not in UndoState for u in self.undo) or any(b.state not in ("pending", "running", "done")
                                                                   for b in self.batches):
            raise ValueError("a record has an unknown state")


class RunFailed(OrchestratorError):
    """A run that had started failed: the cause, and the journal of the run (for its report)."""

    def __init__(self, cause: OrchestratorError, journal: Journal) -> None:
        super().__init__(str(cause))
        self.cause = cause
        self.journal = journal
        self.exit_code = cause.exit_code


def runs_dir(cluster: str) -> Path:
    return state_root() / "runs" / cluster


def new_run_id() -> str:
    return time.strftime("%Y%m%dT%H%M%S", time.gmtime()) + "-" + secrets.token_hex(3)


def create(journal: Journal) -> Journal:
    directory = private_dir(runs_dir(journal.cluster))
    journal.path = directory / f"{journal.run_id}.json"
    journal.save()
    return journal


def journal_paths(cluster: str) -> list[Path]:
    """The journals of ``cluster``'s runs, oldest first: only files named after a run id, in a directory
    only this user can change (refused otherwise: see ``paths.check_private_dir``)."""
    directory = existing_private_dir(runs_dir(cluster))
    if directory is None:
        return []
    return sorted(p for p in directory.glob("*.json") if RUN_ID.fullmatch(p.stem))


def load_run(cluster: str, path: Path) -> Journal:
    """The journal at ``path`` of a run of ``cluster`` (one that says it is another cluster's is refused)."""
    journal = Journal.load(path)
    if journal.cluster != cluster:
        raise JournalError(f"journal {path} is of cluster {str(journal.cluster)[:80]!r}, not {cluster!r}; it was "
                           "moved or changed since it was written")
    return journal


def latest(cluster: str, run_id: str | None = None) -> Journal | None:
    if run_id:
        if not RUN_ID.fullmatch(run_id):
            raise JournalError(f"--run {run_id[:80]!r} is not a run id (such as 20261122T013500-a1b2c3; "
                               "`orchestrate status` shows the latest)")
        path = runs_dir(cluster) / f"{run_id}.json"
        if path not in journal_paths(cluster):
            raise JournalError(f"no run {run_id} for cluster {cluster} in {runs_dir(cluster)}")
        return load_run(cluster, path)
    paths = journal_paths(cluster)
    return load_run(cluster, paths[-1]) if paths else None


def newest_first(cluster: str, look_back: int = 50) -> Iterator[Journal]:
    """The cluster's last ``look_back`` runs that can be read, newest first."""
    for path in reversed(journal_paths(cluster)[-look_back:]):
        try:
            yield load_run(cluster, path)
        except JournalError:
            continue


def started_by(cluster: str, origin: str) -> Journal | None:
    """The newest recent run that ``origin`` (a scheduler's task) started."""
    return next((j for j in newest_first(cluster) if origin and j.origin == origin), None)


def last_success(cluster: str) -> float | None:
    """When the newest succeeded run of ``cluster`` finished (among its recent runs)."""
    return next((j.finished for j in newest_first(cluster) if j.state is RunState.SUCCEEDED and j.finished), None)


def measured_batch_seconds(cluster: str, mode: str, before: str, look_back: int = 5) -> float | None:
    """Mean batch duration of the newest succeeded run of ``cluster`` in ``mode`` older than run
    ``before``: the first ETA of a run, before any of its own batches is measured."""
    paths = [p for p in journal_paths(cluster) if p.stem < before]
    for path in reversed(paths[-look_back:]):
        try:
            journal = load_run(cluster, path)
        except JournalError:
            continue
        durations = [b.finished - b.started for b in journal.batches if b.started and b.finished]
        if journal.state is RunState.SUCCEEDED and journal.mode == mode and durations:
            return sum(durations) / len(durations)
    return None
