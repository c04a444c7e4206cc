"""The run journal: the persisted state of a restart, with an undo record for every change.

Written atomically (temporary file, then rename) after every transition, readable only by its
owner, and stamped with a format version that a reader refuses when it does not know it. An
undo record is written *before* its change is made; `resume` and the end of a run restore every
record not yet restored, in reverse order.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from orchestrator.errors import JournalError
from orchestrator.paths import state_root, write_atomically

FORMAT_VERSION = 1


class RunState(StrEnum):
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    ABORTED = "aborted"


class UndoState(StrEnum):
    INTENDED = "intended"  # written before the change; the change may or may not have been made
    APPLIED = "applied"
    RESTORED = "restored"


@dataclass
class UndoRecord:
    id: int
    key: str
    scope: str
    before: Any
    applied: Any
    state: UndoState = UndoState.INTENDED
    batch: int | None = None


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


@dataclass
class BatchRecord:
    number: int
    label: str
    nodes: list[str]
    state: str = "pending"  # pending, running, done
    steps_done: list[str] = field(default_factory=list)
    started: float | None = None
    finished: float | None = None


@dataclass
class Journal:
    run_id: str
    cluster: str
    inventory: str
    mode: str
    playbook: str
    plan: dict[str, Any]
    batches: list[BatchRecord]
    nodes: dict[str, NodeRecord]
    state: RunState = RunState.RUNNING
    undo: list[UndoRecord] = field(default_factory=list)
    created: float = field(default_factory=time.time)
    updated: float = field(default_factory=time.time)
    finished: float | None = None
    message: str = ""
    run_setup_done: bool = False
    prelude: dict[str, Any] = field(default_factory=dict)  # e.g. a force-merge that runs before batch 1
    es_calls: int = 0
    format: int = FORMAT_VERSION
    path: Path | None = field(default=None, compare=False)

    # --- undo records -------------------------------------------------------------------------
    def pending_undo(self) -> list[UndoRecord]:
        return [u for u in self.undo if u.state is not UndoState.RESTORED]

    def original_value(self, key: str, scope: str) -> tuple[bool, Any]:
        """The value a key had before this run first changed it, if it did."""
        for u in self.undo:
            if u.key == key and u.scope == scope:
                return True, u.before
        return False, None

    def add_undo(self, key: str, scope: str, before: Any, applied: Any, batch: int | None) -> UndoRecord:
        record = UndoRecord(id=len(self.undo) + 1, key=key, scope=scope, before=before, applied=applied, batch=batch)
        self.undo.append(record)
        self.save()
        return record

    # --- persistence --------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        raw = asdict(self)
        raw.pop("path")
        return raw

    def save(self) -> None:
        if self.path is None:
            raise JournalError("journal has no path")
        self.updated = time.time()
        write_atomically(self.path, json.dumps(self.to_dict(), indent=1, default=str), mode=0o600)

    @classmethod
    def load(cls, path: Path) -> Journal:
        try:
            raw = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise JournalError(f"cannot read journal {path}: {exc}") from exc
        if raw.get("format") != FORMAT_VERSION:
            raise JournalError(f"journal {path} has format {raw.get('format')!r}; this version of orchestrator "
                               f"reads format {FORMAT_VERSION} only. Use the version that wrote it.")
        try:
            raw["batches"] = [BatchRecord(**b) for b in raw["batches"]]
            raw["nodes"] = {k: NodeRecord(**v) for k, v in raw["nodes"].items()}
            raw["undo"] = [UndoRecord(**{**u, "state": UndoState(u["state"])}) for u in raw["undo"]]
            raw["state"] = RunState(raw["state"])
            journal = cls(**raw)
        except (KeyError, TypeError, ValueError) as exc:
            raise JournalError(f"journal {path} is damaged ({exc}); it was not written by this tool") from exc
        journal.path = path
        return journal


def runs_dir(cluster: str) -> Path:
    return state_root() / "runs" / cluster


def new_run_id() -> str:
    return time.strftime("%Y%m%dT%H%M%S", time.gmtime()) + "-" + secrets.token_hex(3)


def create(journal: Journal) -> Journal:
    directory = runs_dir(journal.cluster)
    directory.mkdir(parents=True, exist_ok=True)
    os.chmod(directory, 0o700)
    journal.path = directory / f"{journal.run_id}.json"
    journal.save()
    return journal


def latest(cluster: str, run_id: str | None = None) -> Journal | None:
    directory = runs_dir(cluster)
    if not directory.is_dir():
        return None
    if run_id:
        path = directory / f"{run_id}.json"
        if not path.exists():
            raise JournalError(f"no run {run_id} for cluster {cluster} in {directory}")
        return Journal.load(path)
    paths = sorted(directory.glob("*.json"))
    return Journal.load(paths[-1]) if paths else None


def measured_batch_seconds(cluster: str, mode: str, before: str, look_back: int = 5) -> float | None:
    """Mean batch duration of the newest succeeded run of ``cluster`` in ``mode`` older than run
    ``before``: the first ETA of a run, before any of its own batches is measured."""
    directory = runs_dir(cluster)
    paths = sorted(p for p in directory.glob("*.json") if p.stem < before) if directory.is_dir() else []
    for path in reversed(paths[-look_back:]):
        try:
            journal = Journal.load(path)
        except JournalError:
            continue
        durations = [b.finished - b.started for b in journal.batches if b.started and b.finished]
        if journal.state is RunState.SUCCEEDED and journal.mode == mode and durations:
            return sum(durations) / len(durations)
    return None
