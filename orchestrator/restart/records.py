"""The records a run's journal is made of: the run's spec (what `resume` runs again) and its progress
(batches, nodes, undo records, history), each field of a plain type that a journal read back is checked
against (`check_field_types`: a file may be anything)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields, is_dataclass
from enum import StrEnum
from fnmatch import fnmatchcase
from typing import Any, get_type_hints

from orchestrator.hosts.changes import HostChange
from orchestrator.restart.phases import Phase
from orchestrator.restart.plan import Mode, Plan

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
    tune: bool = True  # False: `restart --no-tune`, the hosts' tuning left alone (the run's playbook without it)
    # `restart --pending`: the nodes whose hosts wait for a reboot (/run/reboot-required, a newer kernel),
    # rebooted where the others are only restarted.
    reboot_nodes: tuple[str, ...] = ()
    # `--max-unavailable N|P%`: the window's budget, planned (shards/window.py); "" is one node at a time.
    max_unavailable: str = ""

    def chooses(self, name: str) -> bool:
        """Whether --nodes and --exclude leave ``name`` in the run."""
        return ((not self.nodes or any(fnmatchcase(name, p) for p in self.nodes))
                and not any(fnmatchcase(name, p) for p in self.exclude))

    def reboots(self, name: str) -> bool:
        """Whether the run reboots ``name``'s host (every host under --reboot)."""
        return self.reboot or name in self.reboot_nodes

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> RunOptions:
        def texts(key: str) -> tuple[str, ...]:
            return tuple(str(p) for p in raw.get(key, ()))

        return cls(allow_yellow=bool(raw.get("allow_yellow", False)), allow_unavailable=texts("allow_unavailable"),
                   canary=bool(raw.get("canary", False)), pause_between_s=float(raw.get("pause_between_s", 0)),
                   nodes=texts("nodes"), exclude=texts("exclude"), upgrade_to=str(raw.get("upgrade_to", "")),
                   snapshot_check=bool(raw.get("snapshot_check", True)), reboot=bool(raw.get("reboot", False)),
                   tune=bool(raw.get("tune", True)), reboot_nodes=texts("reboot_nodes"),
                   max_unavailable=str(raw.get("max_unavailable", "")))


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
    phase: Phase = Phase.PENDING
    process_before: str | None = None
    process_after: str | None = None
    restarted: bool = False
    phases: dict[str, float] = field(default_factory=dict)  # phase -> seconds
    started_at: dict[str, float] = field(default_factory=dict)  # phase -> wall clock start
    recovery: dict[str, int] = field(default_factory=dict)
    host_changes: list[HostChange] = field(default_factory=list)  # each knob the run fixed on the node's host
    boot_before: str | None = None  # `restart --reboot`: the host's boot id before its reboot
    held: list[str] = field(default_factory=list)  # a window's run: the copies it held before its stop


def check_field_types(record: object) -> None:
    """Each plain field (numbers, text, flags, lists of text, maps of numbers) holds what its type says."""
    if not is_dataclass(record) or isinstance(record, type):
        return
    hints = type_hints(type(record))
    for f in fields(record):
        value, hint = getattr(record, f.name), hints[f.name]
        allowed = PLAIN_TYPES.get(hint)
        if allowed is not None and not allowed(value):
            raise ValueError(f"its field {f.name} holds {type(value).__name__}, not {getattr(hint, '__name__', hint)}")


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
