"""An immutable snapshot of an Elasticsearch cluster: everything decisions are made from.

Built by the adapter (I/O), read by pure functions (plan, safety, batch choice). A snapshot
can also be built from a JSON file, which is how planning is measured at scale.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from itertools import compress, repeat
from operator import eq, itemgetter
from typing import Any, NamedTuple

from orchestrator.shards.preflight import Preflight
from orchestrator.shards.settled import UnassignedCopy
from orchestrator.shards.versions import UpgradeFacts


@dataclass(frozen=True)
class EsNode:
    id: str
    name: str
    host: str
    ip: str
    roles: tuple[str, ...]
    zone: str | None
    version: str
    process_id: int | None = None
    start_time_ms: int | None = None
    processors: int | None = None  # allocated processors: what the node sizes its thread pools by
    memory_bytes: int | None = None  # the host's memory (read for the plan only)
    # The node's own recovery settings (elasticsearch.yml): indices.recovery.*, node.bandwidth.recovery.*
    recovery_settings: tuple[tuple[str, str], ...] = ()
    # What its host carries for a recovery, as read on the host (hosts/capacity.py; None: not read), and how
    # the host said it ("a 10 Gb/s link (eth0), an NVMe disk (~1.4 GiB/s)").
    host_bytes_s: int | None = None
    host_said: str = ""

    @property
    def is_master_eligible(self) -> bool:
        return "master" in self.roles

    @property
    def data_roles(self) -> set[str]:
        return {r for r in self.roles if r == "data" or r.startswith("data_")}

    @property
    def is_data(self) -> bool:
        return bool(self.data_roles)

    @property
    def process_identity(self) -> str | None:
        """What changes when the node's process is restarted (pid and JVM start time)."""
        if self.start_time_ms is None:
            return None
        return f"{self.process_id}@{self.start_time_ms}"


NODE_ID = 4  # ShardCopy's node_id, by position (for itemgetter)


class ShardCopy(NamedTuple):
    """One copy of a shard. A named tuple: a snapshot of a large cluster holds 100,000s of them, and
    a tuple is built several times faster than a frozen dataclass."""

    index: str  # type: ignore[assignment]  # shadows tuple.index, which nothing here calls
    shard: int
    primary: bool
    state: str  # STARTED, INITIALIZING, RELOCATING, UNASSIGNED
    node_id: str | None
    size_bytes: int


@dataclass(frozen=True)
class Health:
    status: str
    number_of_nodes: int
    relocating_shards: int = 0
    initializing_shards: int = 0
    unassigned_shards: int = 0
    delayed_unassigned_shards: int = 0


@dataclass(frozen=True)
class ClusterSnapshot:
    cluster_name: str
    health: Health
    nodes: tuple[EsNode, ...]
    master_id: str | None
    shards: tuple[ShardCopy, ...]
    persistent: dict[str, Any] = field(default_factory=dict)
    transient: dict[str, Any] = field(default_factory=dict)
    has_shutdown_api: bool = False
    preflight: Preflight = field(default_factory=Preflight)  # read for the plan only, not for each gate
    # A yellow's unassigned copies, explained (read only when yellow with nothing moving: shards/settled.py).
    unassigned: tuple[UnassignedCopy, ...] = ()
    upgrade: UpgradeFacts | None = None  # read only when an upgrade is planned
    # The plan's nodes (inventory names) not in the cluster: read by a batch's gate when it counts fewer.
    absent: tuple[str, ...] = ()

    # Indexes built once per snapshot: planning 1,000 nodes must not rescan 100,000 shards per batch.
    @cached_property
    def _by_name(self) -> dict[str, EsNode]:
        return {n.name: n for n in self.nodes}

    @cached_property
    def _by_id(self) -> dict[str, EsNode]:
        return {n.id: n for n in self.nodes}

    @cached_property
    def _copies_indexed(self) -> tuple[dict[str, tuple[int, int]], dict[tuple[str, int], list[str]]]:
        """One pass over the copies for the indexes below: each pass over a large cluster's copies is much of a
        plan's time (bench_plan)."""
        count: Counter[str | None] = Counter(map(itemgetter(NODE_ID), self.shards))
        size: defaultdict[str, int] = defaultdict(int)
        holders: defaultdict[tuple[str, int], list[str]] = defaultdict(list)
        for index, shard, _, state, node_id, size_bytes in self.shards:
            if node_id is not None:
                size[node_id] += size_bytes
                if state == "STARTED":
                    holders[(index, shard)].append(node_id)
        return {n: (c, size[n]) for n, c in count.items() if n is not None}, holders  # None: unassigned

    @property
    def load_by_node(self) -> dict[str, tuple[int, int]]:
        """node id -> (shard copies on it, their bytes): what a batch's size and estimate are made of."""
        return self._copies_indexed[0]

    @property
    def copies_by_node(self) -> dict[str, int]:
        return {node_id: count for node_id, (count, _) in self.load_by_node.items()}

    @property
    def started_holders(self) -> dict[tuple[str, int], list[str]]:
        """(index, shard) -> the ids of the nodes holding a started copy of it."""
        return self._copies_indexed[1]

    @cached_property
    def shards_held(self) -> dict[str, list[tuple[str, int]]]:
        """node id -> the shards (index, shard) it holds a copy of, in any state. A pass of its own: only a
        window's reach reads it, and it was 0.4 s of every 1,000,000-copy plan (bench_plan)."""
        held: defaultdict[str, list[tuple[str, int]]] = defaultdict(list)
        for index, shard, _, _, node_id, _ in self.shards:
            if node_id is not None:
                held[node_id].append((index, shard))
        return held

    @cached_property
    def started_on_one_node(self) -> dict[str, list[tuple[str, int]]]:
        """node id -> the shards whose every started copy is on it (a state file may name a node twice): all
        that a one-node batch must look at. Chosen in C, since a node-mode plan of 1,000,000 copies looks at
        no other shard (bench_plan)."""
        holders = self.started_holders
        lists = list(holders.values())
        alone = map(eq, map(list.count, lists, map(itemgetter(0), lists)), map(len, lists))
        sole: defaultdict[str, list[tuple[str, int]]] = defaultdict(list)
        for key in compress(holders, alone):
            sole[holders[key][0]].append(key)
        return sole

    @cached_property
    def started_on_several_nodes(self) -> dict[str, tuple[list[tuple[str, int]], list[list[str]]]]:
        """node id -> the shards with started copies on more nodes than one whose first started copy is on it,
        as their keys and, in the same order, their holders: a batch of several nodes looks at each such shard
        once, through its first holder, not at each copy."""
        shared: defaultdict[str, tuple[list[tuple[str, int]], list[list[str]]]] = defaultdict(lambda: ([], []))
        for key, holders in self.started_holders.items():
            if holders.count(holders[0]) != len(holders):
                keys, holder_lists = shared[holders[0]]
                keys.append(key)
                holder_lists.append(holders)
        return shared

    @cached_property
    def master_eligible(self) -> tuple[EsNode, ...]:
        return tuple(n for n in self.nodes if n.is_master_eligible)

    def node_by_name(self, name: str) -> EsNode | None:
        return self._by_name.get(name)

    def node_by_id(self, node_id: str) -> EsNode | None:
        return self._by_id.get(node_id)

    @property
    def master(self) -> EsNode | None:
        return self.node_by_id(self.master_id) if self.master_id else None

    def effective_setting(self, key: str) -> tuple[str, Any]:
        """(scope, value) as Elasticsearch resolves it: transient wins over persistent."""
        if key in self.transient:
            return "transient", self.transient[key]
        if key in self.persistent:
            return "persistent", self.persistent[key]
        return "default", None

    def to_json(self) -> dict[str, Any]:
        """The saved file (`plan --save-snapshot`): the copies as columns, a list per field, which a large
        cluster's plan reads in less than half the time of a row per copy (bench_plan)."""
        from dataclasses import asdict, replace

        columns = list(zip(*self.shards, strict=True)) or [()] * len(ShardCopy._fields)
        shards = dict(zip(ShardCopy._fields, map(list, columns), strict=True))
        return {**asdict(replace(self, shards=())), "shards": shards,
                "upgrade": self.upgrade.to_json() if self.upgrade else None}

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> ClusterSnapshot:
        """A snapshot from a saved file; every field is checked for its type (a file may be anything)."""
        snap = cls(
            cluster_name=raw["cluster_name"],
            health=Health(**raw["health"]),
            nodes=tuple(EsNode(**{**n, "roles": tuple(n["roles"]),
                                  "recovery_settings": tuple(map(tuple, n.get("recovery_settings", ())))})
                        for n in raw["nodes"]),
            master_id=raw.get("master_id"),
            shards=copies_from_file(raw["shards"]),
            persistent=raw.get("persistent", {}),
            transient=raw.get("transient", {}),
            has_shutdown_api=raw.get("has_shutdown_api", False),
            preflight=Preflight.from_json(raw.get("preflight") or {}),
            unassigned=tuple(UnassignedCopy.from_json(u) for u in raw.get("unassigned") or ()),
            upgrade=UpgradeFacts.from_json(raw["upgrade"]) if raw.get("upgrade") else None,
            absent=tuple(str(n) for n in raw.get("absent") or ()),
        )
        snap.check_types()
        return snap

    def check_types(self) -> None:
        if not (isinstance(self.health.number_of_nodes, int) and isinstance(self.health.status, str)):
            raise TypeError("health: status must be text and number_of_nodes a whole number")
        for n in self.nodes:
            if not all(isinstance(v, str) for v in (n.id, n.name, n.host, n.ip, *n.roles)) or \
                    not isinstance(n.roles, tuple):
                raise TypeError(f"node {str(n.id)[:40]!r}: id, name, host, ip and each role must be text")
            if not all(isinstance(v, int | None) for v in (n.processors, n.memory_bytes, n.host_bytes_s)) or not all(
                    len(p) == 2 and all(isinstance(t, str) for t in p) for p in n.recovery_settings):
                raise TypeError(f"node {str(n.id)[:40]!r}: processors, memory_bytes and host_bytes_s must be whole "
                                "numbers, recovery_settings pairs of text")
            if not isinstance(n.host_said, str):
                raise TypeError(f"node {str(n.id)[:40]!r}: host_said must be text")


COPY_TYPES: tuple[set[type], ...] = ({str}, {int}, {bool}, {str}, {str, type(None)}, {int})


def copies_from_file(shards: Any) -> tuple[ShardCopy, ...]:
    """A saved file's shard copies, each field checked for its type (a file may be anything): columns, as this
    tool writes them, or a row per copy, as it wrote them before."""
    if isinstance(shards, dict):
        columns = [shards[name] for name in ShardCopy._fields]
        if not all(isinstance(column, list) for column in columns):
            raise TypeError("shards: each field's column must be a list")
        check_types(columns)
        return tuple(map(tuple.__new__, repeat(ShardCopy), zip(*columns, strict=True)))
    check_types(map(itemgetter(name), shards) for name in ShardCopy._fields)
    return tuple(map(tuple.__new__, repeat(ShardCopy), map(itemgetter(*ShardCopy._fields), shards)))


def check_types(columns: Iterable[Iterable[Any]]) -> None:
    """Each field's values, of the types a copy's field allows. Column by column, each step in C: a loop over
    1,000,000 copies in Python costs seconds."""
    for name, column, allowed in zip(ShardCopy._fields, columns, COPY_TYPES, strict=True):
        if not set(map(type, column)) <= allowed:
            raise TypeError("shards: each copy needs index (text), shard (number), primary (true/false), state "
                            f"(text), node_id (text or null) and size_bytes (number); {name} is not")
