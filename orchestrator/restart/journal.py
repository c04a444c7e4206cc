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

import json
import re
import secrets
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from orchestrator.errors import RESUME_HERE, JournalError, OrchestratorError, with_next_try
from orchestrator.hosts.changes import HostChange
from orchestrator.paths import existing_private_dir, private_dir, state_root
from orchestrator.restart import journal_file
from orchestrator.restart.deferral import Wait
from orchestrator.restart.journal_copy import JournalCopy
from orchestrator.restart.phases import Phase, check_transition
from orchestrator.restart.plan import Plan

# The journal's records, imported from here by the rest of the tool.
from orchestrator.restart.records import REBOOTED as REBOOTED
from orchestrator.restart.records import BatchRecord as BatchRecord
from orchestrator.restart.records import BatchState as BatchState
from orchestrator.restart.records import HistoryEntry as HistoryEntry
from orchestrator.restart.records import NodeRecord as NodeRecord
from orchestrator.restart.records import RunOptions as RunOptions
from orchestrator.restart.records import RunSpec as RunSpec
from orchestrator.restart.records import RunState as RunState
from orchestrator.restart.records import UndoRecord as UndoRecord
from orchestrator.restart.records import UndoState as UndoState
from orchestrator.restart.records import check_field_types

FORMAT_VERSION = 3  # 3: a base and a log of changes (journal_file.py); 2 (a single file) is still read
READS_FORMATS = (2, 3)
# The search series a journal keeps for the report's plot: each point as a short list (a save writes the search
# section whole, every interval), at most SERIES_POINTS of them (40 min at the default 10 s, then coarser).
SERIES_FIELDS = ("at", "worst_ms", "mean_ms", "rate", "probe_ms")
SERIES_POINTS = 240
RUN_ID = re.compile(r"\d{8}T\d{6}-[0-9a-f]{6}")
RESUME_CHANGES_SHOWN = 10  # a resume's history line names this many of the inventory's changes, then counts the rest


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
    resume: str = ""  # what the run's next try does (errors.py: an error's ``resume``), said apart from ``message``
    run_setup_done: bool = False
    preludes_done: list[str] = field(default_factory=list)
    prelude_reports: dict[str, Any] = field(default_factory=dict)
    cluster_calls: int = 0
    paused: str | None = None  # why the run is holding at a batch boundary, while it is
    hook_values: dict[str, str] = field(default_factory=dict)  # saved by hooks for later ones (a silence id)
    history: list[HistoryEntry] = field(default_factory=list)  # each end and each resume, oldest first
    waiting: dict[str, Any] | None = None  # while deferred: the wait left to the trigger (deferral.Wait)
    origin: str = ""  # who started the run, when a scheduler did: its task's key (finds the run on a retry)
    # What searchers see (restart/search_watch.py): {"baseline": sample or None, "latest": sample}, as JSON
    search: dict[str, Any] = field(default_factory=dict)
    format: int = FORMAT_VERSION
    path: Path | None = field(default=None, compare=False)
    # The cluster's copy (journal_copy.py), kept by the run that holds the lock: each save goes there too.
    copy: JournalCopy | None = field(default=None, compare=False, repr=False)
    _lock: threading.RLock = field(default_factory=threading.RLock, compare=False, repr=False)
    _depth: int = field(default=0, compare=False, repr=False)  # how deep this thread holds _lock (`_held`)
    # The spec as saved, kept: it is most of a large cluster's journal, and the same at each save.
    _spec_text: tuple[RunSpec, str] | None = field(default=None, compare=False, repr=False)
    # Each node's and batch's record as last encoded (by the record's identity): a base is written from them,
    # a record encoded again only once a transition changed it (`change`).
    _texts: dict[int, tuple[object, str]] = field(default_factory=dict, compare=False, repr=False)
    # What the next line of the log holds (journal_file.py): the records changed since the last save, by id.
    _changed: dict[int, NodeRecord | BatchRecord | UndoRecord] = field(default_factory=dict, compare=False,
                                                                         repr=False)
    _reports_changed: bool = field(default=False, compare=False, repr=False)
    _spec_saved: RunSpec | None = field(default=None, compare=False, repr=False)
    _history_saved: int = field(default=0, compare=False, repr=False)
    _seq: int = field(default=0, compare=False, repr=False)  # the changes saved, base and log
    _together: bool = field(default=False, compare=False, repr=False)  # in `together`: its end saves
    _lines: int | None = field(default=None, compare=False, repr=False)  # in the log; None: no base written yet

    # --- reading ------------------------------------------------------------------------------
    @property
    def plan(self) -> Plan:
        return self.spec.plan

    @property
    def changes_saved(self) -> int:
        """How many changes the journal has saved (its change number): of two copies of a run's journal, the
        newer has more."""
        return self._seq

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

    def undo_by_key(self) -> dict[tuple[str, str], tuple[UndoRecord, UndoRecord | None]]:
        """(key, scope) -> (its first undo record, whose ``before`` is the original; its first still pending, or
        None): what `original_value` and `pending_undo` say of each key, for many keys in one pass."""
        found: dict[tuple[str, str], tuple[UndoRecord, UndoRecord | None]] = {}
        for u in self.undo:
            first, pending = found.get((u.key, u.scope), (u, None))
            found[(u.key, u.scope)] = (first, pending or (u if u.state is not UndoState.RESTORED else None))
        return found

    # --- the transitions: each changes state and saves it, under the lock ----------------------
    @contextmanager
    def _held(self) -> Iterator[None]:
        """The journal's lock. Let go of last, the saves made meanwhile are written to the cluster's copy before
        the caller goes on (write-ahead, as the local file), outside the lock: other threads' saves go on
        meanwhile, and those queued while a write is under way go together in the next (journal_copy.py)."""
        with self._lock:
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
            saved = self._seq if self._depth == 0 else None
        if saved is not None and self.copy is not None:
            self.copy.flush(saved)

    @contextmanager
    def change(self, *records: NodeRecord | BatchRecord | UndoRecord) -> Iterator[None]:
        """Change the journal and save it; the one way state is written (also for a step's own records).
        ``records``: the node, batch and undo records the change touches (the run's own fields are always
        saved); a record changed but not named would be missed by the save's line."""
        with self._held():
            yield
            for record in records:
                self._changed[id(record)] = record
                self._texts.pop(id(record), None)
            if not self._together:
                self.save()

    @contextmanager
    def together(self) -> Iterator[None]:
        """The changes made in the block saved once, at its end: one line of the log, one write of the cluster's
        copy (each save is a request to the cluster). For changes that make one step of a node's, with nothing done
        between them: its new phase with the time the last one took and what it found. Under the lock, so no other
        thread's change falls between them; a block left by an error saves nothing (the changes go with the next
        save), as a process killed there would not have. Nested, the outermost block saves."""
        with self._held():
            if self._together:
                yield
                return
            self._together = True
            try:
                yield
            finally:
                self._together = False
            self.save()

    def said(self, next_try: str | None = RESUME_HERE) -> str:
        """How the run ended or stands, with what its next try does, said as ``next_try`` names that try."""
        return with_next_try(self.message, self.resume, next_try)

    def set_state(self, state: RunState, message: str = "", resume: str = "") -> None:
        """The run's state, with what happened and what its next try does (errors.py: an error's ``resume``)."""
        with self.change():
            self.state = state
            self.message = message
            self.resume = resume
            self.finished = None if state in (RunState.RUNNING, RunState.DEFERRED) else time.time()
            if state is not RunState.DEFERRED:
                self.waiting = None
            if state is not RunState.RUNNING:
                self.history = [*self.history, HistoryEntry(self.finished or time.time(), state.value,
                                                            with_next_try(message, resume))]

    def resumed(self, changes: list[str]) -> None:
        """A resume begins (``changes``: what it accepted of a changed inventory)."""
        shown = changes[:RESUME_CHANGES_SHOWN]
        more = f"; and {len(changes) - len(shown)} more" if len(changes) > len(shown) else ""
        said = f"resumed from {self.state.value}" + (f"; inventory changed: {'; '.join(shown)}{more}" if changes
                                                     else "")
        with self.change():
            self.history = [*self.history, HistoryEntry(time.time(), "resumed", said)]

    def defer(self, wait: Wait) -> None:
        """The run leaves ``wait`` to its trigger: said in the journal, for the trigger and for `status`."""
        with self._held():  # one save: set_state keeps the wait of a deferred run
            self.waiting = wait.to_json()
            self.set_state(RunState.DEFERRED, f"waiting for {wait.what} (deferred to the scheduler's trigger)")

    @property
    def deferred_wait(self) -> Wait | None:
        return Wait.from_json(self.waiting) if self.state is RunState.DEFERRED and self.waiting else None

    def save_hook_values(self, values: dict[str, str]) -> None:
        with self.change():
            self.hook_values.update(values)

    def record_search(self, latest: dict[str, Any], baseline: dict[str, Any] | None, rate: int | None = None) -> None:
        """An interval's figures (``rate``: the recovery rate in force after it, where the latency budget moves it);
        each also a point of the run's series, for the report's plot, at most SERIES_POINTS kept (every other
        point dropped when full: the whole run stays drawn, more coarsely)."""
        point = [latest.get("at"), latest.get("worst_ms"), latest.get("mean_ms"), rate,
                 latest.get("probe_ms")]  # SERIES_FIELDS
        series = [*self.search.get("series", []), point]
        if len(series) > SERIES_POINTS:
            series = series[::2]
        with self.change():
            self.search = {**self.search, "baseline": baseline, "latest": latest, "series": series}

    def record_search_gate(self, breach: str | None) -> None:
        """The window closed by searches over budget (``breach`` says how), or open again (None)."""
        with self.change():
            self.search = {**self.search, "window_closed": breach}

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
            self._reports_changed = True

    def begin_batch(self, batch: BatchRecord) -> None:
        with self.change(batch):
            batch.state = BatchState.RUNNING
            batch.started = time.time()

    def reopen_batch(self, batch: BatchRecord) -> None:
        """A batch refused at its last check, before any of its nodes stopped: it starts over."""
        with self.change(batch):
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
        with self.change(batch):
            batch.steps_done.append(step)

    def end_batch(self, batch: BatchRecord) -> None:
        with self.change(batch):
            batch.state = BatchState.DONE
            batch.finished = time.time()

    def record_undo(self, key: str, scope: str, before: Any, applied: Any, batch: int | None) -> UndoRecord:
        """Write the undo record of a change about to be made (state: intended)."""
        return self.record_undos([(key, scope, before, applied)], batch)[0]

    def record_undos(self, changes: list[tuple[str, str, Any, Any]], batch: int | None) -> list[UndoRecord]:
        """The undo records of several changes about to be made, each (key, scope, before, applied), in one save:
        a window's delay is a change of every index (thousands), and each save is copied into the cluster."""
        with self._held():  # numbered under the lock: a window's nodes record theirs from threads of their own
            first = len(self.undo) + 1
            records = [UndoRecord(id=first + i, key=key, scope=scope, before=before, applied=applied, batch=batch)
                       for i, (key, scope, before, applied) in enumerate(changes)]
            with self.change(*records):
                self.undo.extend(records)
        return records

    def undo_states(self, records: list[UndoRecord], state: UndoState) -> None:
        """Several undo records moved to ``state`` together, in one save."""
        with self.change(*records):
            for record in records:
                record.state = state

    def set_phase(self, node: str, phase: Phase) -> NodeRecord:
        """Move a node to ``phase``; an illegal move raises (the journal and the run would disagree)."""
        rec = self.nodes[node]
        with self.change(rec):
            check_transition(node, rec.phase, phase)
            if rec.phase != phase:
                rec.started_at[phase.value] = time.time()
            rec.phase = phase
        return rec

    def mark(self, node: str, key: str) -> None:
        """Note the wall-clock time of a moment in the node's restart (e.g. the start command issued)."""
        with self.change(self.nodes[node]):
            self.nodes[node].started_at[key] = time.time()

    def timed(self, node: str, phase_key: str, seconds: float) -> None:
        with self.change(self.nodes[node]):
            self.nodes[node].phases[phase_key] = round(seconds, 2)

    def process_before(self, node: str, identity: str | None) -> None:
        with self.change(self.nodes[node]):
            self.nodes[node].process_before = identity

    def restarted(self, node: str, identity: str) -> None:
        with self.change(self.nodes[node]):
            self.nodes[node].process_after = identity
            self.nodes[node].restarted = True

    def recovered(self, node: str, figures: dict[str, int]) -> None:
        """Merge the node's recovery figures (bytes copied and reused, handoffs) into its record."""
        with self.change(self.nodes[node]):
            self.nodes[node].recovery = {**self.nodes[node].recovery, **figures}

    def held_before_stop(self, node: str, copies: Sequence[str]) -> None:
        """What the node held just before its stop, as its product names its copies: what a window waits to see
        recovered before the node leaves it (restart/window_run.py)."""
        with self.change(self.nodes[node]):
            self.nodes[node].held = sorted(copies)

    def host_changed(self, node: str, changes: Sequence[HostChange]) -> None:
        """Record what was changed on the node's host (appended: a resumed tune adds, never replaces)."""
        if changes:
            with self.change(self.nodes[node]):
                self.nodes[node].host_changes = [*self.nodes[node].host_changes, *changes]

    def boot_id_before(self, node: str, boot_id: str) -> None:
        with self.change(self.nodes[node]):
            self.nodes[node].boot_before = boot_id

    def calls(self, count: int) -> None:
        with self.change():
            self.cluster_calls = count

    def copied_to(self, copy: JournalCopy) -> None:
        """From now on each save goes to ``copy`` (the cluster's) too; written whole at once, so that the
        run is seen from another machine before its first change."""
        with self._held():
            self.copy = copy
            copy.queue(self._seq, None, self.to_text)

    # --- persistence --------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {"spec": self.spec.to_json(), **self._state_dict(asdict)}

    def _state_dict(self, record: Callable[[Any], dict[str, Any]]) -> dict[str, Any]:
        """Everything but the spec; each record through ``record`` (a copy, or for a save its fields as
        they are: a record holds no other but a node's host changes, which `encoded` writes)."""
        return {
            "format": self.format, "run_id": self.run_id, "cluster": self.cluster, **self._run_fields(),
            "prelude_reports": self.prelude_reports, "history": [record(h) for h in self.history],
            "batches": [record(b) for b in self.batches], "nodes": {k: record(v) for k, v in self.nodes.items()},
            "undo": [record(u) for u in self.undo],
        }

    def _run_fields(self) -> dict[str, Any]:
        """The run's own fields that a transition may change (each line of the log holds them): a few values."""
        return {"state": self.state.value, "created": self.created, "updated": self.updated, "finished": self.finished,
                "message": self.message, "resume": self.resume, "run_setup_done": self.run_setup_done,
                "preludes_done": self.preludes_done,
                "cluster_calls": self.cluster_calls, "paused": self.paused, "hook_values": self.hook_values,
                "waiting": self.waiting, "origin": self.origin, "search": self.search}

    def to_text(self) -> str:
        """The whole journal, as its base file holds it. The spec, most of it, is encoded once (again only
        when it is replaced); a node's, batch's or undo record only once a transition changed it (`change`): a
        window's run holds an undo record per index (a cluster of 3,000 nodes, about 120,000), written whole at
        each compaction and each base of the cluster's copy. The encoding is compact (json's C encoder: an
        indented one is Python's own, 2.7 times slower)."""
        if self._spec_text is None or self._spec_text[0] is not self.spec:
            self._spec_text = (self.spec, json.dumps(self.spec.to_json(), default=str))
        state = {"format": self.format, "run_id": self.run_id, "cluster": self.cluster, **self._run_fields(),
                 "prelude_reports": self.prelude_reports, "history": [vars(h) for h in self.history]}
        undo = ",".join(self._record_text(u) for u in self.undo)
        batches = ",".join(self._record_text(b) for b in self.batches)
        nodes = ",".join(f"{json.dumps(name)}:{self._record_text(rec)}" for name, rec in self.nodes.items())
        return (f'{{"spec":{self._spec_text[1]},"seq":{self._seq},{json.dumps(state, default=str)[1:-1]},'
                f'"undo":[{undo}],"batches":[{batches}],"nodes":{{{nodes}}}}}')

    def _record_text(self, record: NodeRecord | BatchRecord | UndoRecord) -> str:
        key = id(record)
        kept = self._texts.get(key)
        if kept is None or kept[0] is not record:
            kept = self._texts[key] = (record, json.dumps(vars(record), default=encoded))
        return kept[1]

    def _change_line(self) -> str:
        """What changed since the last save, as a line of the log (journal_file.py)."""
        line: dict[str, Any] = {"seq": self._seq, "run": self._run_fields()}
        if self._spec_saved is not self.spec:
            line["spec"] = self.spec.to_json()
        if self._reports_changed:
            line["prelude_reports"] = self.prelude_reports
        if len(self.history) > self._history_saved:
            line["history"] = [vars(h) for h in self.history[self._history_saved:]]
        for record in self._changed.values():
            kind, key = (("nodes", record.name) if isinstance(record, NodeRecord) else
                         ("batches", str(record.number)) if isinstance(record, BatchRecord) else
                         ("undo", str(record.id)))
            line.setdefault(kind, {})[key] = vars(record)
        return json.dumps(line, default=encoded)

    def save(self) -> None:
        """Save the change just made: a line appended to the log, or the base written again (the first
        save, every `COMPACT_AFTER` lines, and whenever the run is not running: it stopped, ended or waits)."""
        if self.path is None:
            raise JournalError("journal has no path")
        with self._held():
            self.updated = time.time()
            self._seq += 1
            line: str | None = None
            if self._lines is None or self._lines >= journal_file.COMPACT_AFTER or self.state is not RunState.RUNNING:
                text = self.to_text()
                journal_file.write_base(self.path, text)
                self._lines = 0
            else:
                line = self._change_line()
                journal_file.append(self.path, line)
                self._lines += 1
            if self.copy is not None:
                self.copy.queue(self._seq, line, self.to_text if line is not None else lambda: text)
            self._changed.clear()
            self._reports_changed = False
            self._spec_saved = self.spec
            self._history_saved = len(self.history)

    @classmethod
    def load(cls, path: Path) -> Journal:
        """The journal saved at ``path``, which must be this user's own file, writable by no one else
        and named after the run it holds: `resume` runs what a journal records (its hooks, its
        commands) and `abandon` writes its undo records, so a planted or renamed one is refused."""
        raw, lines = journal_file.read(path)
        journal = cls.from_raw(raw, f"journal {path}")
        if journal.run_id != path.stem:
            raise JournalError(f"journal {path} is damaged (it holds run {str(journal.run_id)[:40]!r}, not the run "
                               "its name says); it was not written by this tool or was changed since")
        journal.path = path
        # A journal of the single-file format goes on in this one: its next save writes a base of this format.
        journal._lines = lines if raw["format"] == FORMAT_VERSION else None
        return journal

    @classmethod
    def from_raw(cls, raw: Any, what: str) -> Journal:
        """A journal from its fields as saved (a file's, or the cluster's copy's), each checked; ``what``
        names it in a message."""
        if not isinstance(raw, dict) or raw.get("format") not in READS_FORMATS:
            found = raw.get("format") if isinstance(raw, dict) else "unknown"
            raise JournalError(f"{what} has format {found!r}; this version of orchestrator reads formats "
                               f"{' and '.join(map(str, READS_FORMATS))} only. Use the version that wrote it.")
        try:
            journal = cls(
                run_id=raw["run_id"], cluster=raw["cluster"], spec=RunSpec.from_json(raw["spec"]),
                batches=[BatchRecord(**{**b, "state": BatchState(b["state"])}) for b in raw["batches"]],
                nodes={k: node_record(v) for k, v in raw["nodes"].items()},
                state=RunState(raw["state"]), undo=[UndoRecord(**{**u, "state": UndoState(u["state"])})
                                                    for u in raw["undo"]],
                created=raw["created"], updated=raw["updated"], finished=raw["finished"], message=raw["message"],
                resume=str(raw.get("resume") or ""), run_setup_done=raw["run_setup_done"],
                preludes_done=raw["preludes_done"],
                prelude_reports=raw["prelude_reports"], cluster_calls=raw["cluster_calls"],
                paused=None if raw.get("paused") is None else str(raw["paused"]),
                hook_values={str(k): str(v) for k, v in dict(raw.get("hook_values", {})).items()},
                history=[HistoryEntry(**h) for h in raw.get("history", [])],
                waiting=None if raw.get("waiting") is None else Wait.from_json(raw["waiting"]).to_json(),
                origin=str(raw.get("origin") or ""),
                search={k: v for k, v in dict(raw.get("search") or {}).items()
                        if k in ("baseline", "latest", "window_closed", "series")})
            journal.check_consistent()
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise JournalError(f"{what} is damaged ({str(exc)[:200]}); it was not written by this tool "
                               "or was changed since") from None
        seq = raw.get("seq", 0)
        journal._seq = seq if isinstance(seq, int) and not isinstance(seq, bool) else 0
        journal._spec_saved, journal._history_saved = journal.spec, len(journal.history)
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
        # A record's state of no known kind is refused before this, when it is read as its enum.


class RunFailed(OrchestratorError):
    """A run that had started failed: the cause, and the journal of the run (for its report)."""

    def __init__(self, cause: OrchestratorError, journal: Journal) -> None:
        super().__init__(cause.what, resume=cause.resume)
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


def node_record(raw: dict[str, Any]) -> NodeRecord:
    """A node's record as the journal holds it: its phase and host changes read back as what they are."""
    return NodeRecord(**{**raw, "phase": Phase(raw.get("phase", Phase.PENDING)),
                         "host_changes": [HostChange.from_json(c) for c in raw.get("host_changes", [])]})


def encoded(value: object) -> object:
    """What json cannot write itself: a record's own JSON (a host change), else its text."""
    to_json = getattr(value, "to_json", None)
    return to_json() if callable(to_json) else str(value)
