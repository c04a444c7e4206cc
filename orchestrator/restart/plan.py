"""The restart plan, as every product makes it: batches of nodes in order, the settings changed
for the run, the host tuning, an estimate, and every reason it would be unsafe.

Each product builds its plan with a pure function of its inventory and a snapshot of its
cluster (shards/plan.py, riak/plan.py); what is particular to it (shard copies and bytes, a ring
share) goes in a batch's ``figures``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, is_dataclass
from enum import StrEnum
from types import MappingProxyType
from typing import Any

# Estimation model for a batch before any node has been measured (seconds); see docs.
EST_STOP_S = 10.0
EST_START_TO_JOIN_S = 30.0


class Mode(StrEnum):
    NODE = "node"
    ZONE = "zone"


@dataclass(frozen=True)
class SettingChange:
    key: str
    scope: str  # where it is written (Elasticsearch: the scope in effect; Riak: the node)
    before: Any  # None: unset
    during: Any
    when: str  # "per batch" or "for the run"
    why: str = ""  # why this value (the plan shows it)


@dataclass(frozen=True)
class Batch:
    number: int
    label: str
    nodes: tuple[str, ...]  # inventory names
    estimate_s: float
    problems: tuple[str, ...] = ()
    # The product's own, for its plan columns: shard copies, bytes, ring share (read-only, as the batch is).
    figures: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "figures", MappingProxyType(dict(self.figures)))


@dataclass(frozen=True)
class GateRule:
    """The engine's gate before each batch, as the inventory sets it (for every product): this many
    healthy samples in a row, and the run stops after this long unhealthy."""

    stable_samples: int
    unhealthy_s: float


@dataclass(frozen=True)
class Upgrade:
    """What an upgrade run installs: the target version, each node's version when planned, and the
    plugins each node has (reinstalled at the new version)."""

    to: str
    versions: dict[str, str] = field(default_factory=dict)  # inventory name -> version when planned
    plugins: dict[str, tuple[str, ...]] = field(default_factory=dict)  # inventory name -> plugin names

    @classmethod
    def from_json(cls, raw: dict[str, Any] | None) -> Upgrade | None:
        if raw is None:
            return None
        return cls(to=str(raw["to"]), versions={str(k): str(v) for k, v in raw.get("versions", {}).items()},
                   plugins={str(k): tuple(str(p) for p in v) for k, v in raw.get("plugins", {}).items()})


@dataclass(frozen=True)
class Plan:
    cluster: str
    product: str
    mode: Mode
    batches: tuple[Batch, ...]
    settings: tuple[SettingChange, ...]
    tuning: tuple[str, ...]
    estimate_s: float
    problems: tuple[str, ...]
    node_ids: Mapping[str, str] = field(default_factory=dict)  # inventory name -> the product's node id
    notes: tuple[str, ...] = ()
    # Shard copies the cluster had without a home when planned, accepted as they were (the gate waits
    # for no more than these); 0 for a product without such copies.
    accepted_unassigned: int = 0
    gate: GateRule | None = None  # set by the application from the inventory (runs/plans.py: with_gate)
    upgrade: Upgrade | None = None  # set for an upgrade run (`orchestrate upgrade`)

    def __post_init__(self) -> None:
        object.__setattr__(self, "node_ids", MappingProxyType(dict(self.node_ids)))

    @property
    def safe(self) -> bool:
        return not self.problems and not any(b.problems for b in self.batches)

    def all_problems(self) -> list[str]:
        return [*self.problems, *(p for b in self.batches for p in b.problems)]

    def to_json(self) -> dict[str, Any]:
        return {**plain(self), "safe": self.safe}

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> Plan:
        return cls(cluster=raw["cluster"], product=raw["product"], mode=Mode(raw["mode"]),
                   batches=tuple(Batch(number=b["number"], label=b["label"], nodes=tuple(b["nodes"]),
                                       estimate_s=b["estimate_s"], problems=tuple(b["problems"]),
                                       figures=dict(b["figures"])) for b in raw["batches"]),
                   settings=tuple(SettingChange(**s) for s in raw["settings"]), tuning=tuple(raw["tuning"]),
                   estimate_s=raw["estimate_s"], problems=tuple(raw["problems"]), node_ids=dict(raw["node_ids"]),
                   notes=tuple(raw["notes"]), accepted_unassigned=int(raw.get("accepted_unassigned", 0)),
                   gate=GateRule(**raw["gate"]) if raw.get("gate") else None,
                   upgrade=Upgrade.from_json(raw.get("upgrade")))


def plain(value: Any) -> Any:
    """A plan's value as JSON takes it: dataclasses and read-only mappings as dicts, tuples as lists."""
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [plain(v) for v in value]
    return value
