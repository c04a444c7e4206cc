"""The fake cluster's state, and how it moves.

A stopped node leaves the cluster: each primary it held is handed to a started replica elsewhere, and
each of its copies becomes an unassigned replica that remembers the node. A started node joins at
once, as a new process. Each allocation round (`tick`, run by every health request) starts the copies
that were initializing and assigns the unassigned ones that allocation allows back to their node:
replicas only under `cluster.routing.allocation.enable: all`, as Elasticsearch does. What is counted
often (health) is kept up to date as copies move, so a request costs what it reads, not the cluster.
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import random
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from orchestrator.units import parse_size

STARTED, INITIALIZING, UNASSIGNED = "STARTED", "INITIALIZING", "UNASSIGNED"
DATA_ROLES = ("data", "data_content", "data_hot", "ingest")
# Index widths (primaries, 1 replica each) and how often each is generated: many small indices, some wide.
WIDTHS = ((1, 50), (2, 25), (5, 20), (10, 5))
ALLOCATION_ENABLE = "cluster.routing.allocation.enable"


def now_ms() -> int:
    return int(time.time() * 1000)


def node_id(name: str) -> str:
    """A node id as Elasticsearch makes them: 22 URL-safe base64 characters (here derived from the name)."""
    return base64.urlsafe_b64encode(hashlib.sha256(name.encode()).digest()).decode()[:22]


@dataclass
class FakeNode:
    id: str
    name: str
    ip: str
    roles: tuple[str, ...]
    zone: str | None
    version: str
    pid: int
    start_ms: int
    up: bool = True
    config: dict[str, str] = field(default_factory=dict)  # its own settings file's, flat (node info lists them)

    @property
    def is_data(self) -> bool:
        return any(r == "data" or r.startswith("data_") for r in self.roles)

    @property
    def is_master(self) -> bool:
        return "master" in self.roles


class Recovery(NamedTuple):
    """A copy's last recovery (`_recovery` builds its answer from it): small, as there is one per copy."""

    kind: str  # EMPTY_STORE, EXISTING_STORE, PEER
    done: bool
    start_ms: int
    source: str  # node id ("" without one)
    target: str
    copied: int  # bytes copied from the source


@dataclass(eq=False, slots=True)  # compared and hashed by identity: a cluster holds 100,000s of them in sets
class Copy:
    index: str
    shard: int
    primary: bool
    node: str | None
    state: str
    size: int
    docs: int
    last_node: str | None = None  # the node it was on before it became unassigned
    recovery: Recovery | None = None
    segments: int = 1  # a bulk request's refresh adds one; a force-merge brings them down


@dataclass
class FakeIndex:
    name: str
    shards: list[list[Copy]]  # per shard number, its copies
    hidden: bool = False
    auto_expand: str | None = None
    indexed: int = 0  # documents written to it (its primaries' `indexing.index_total`)
    ids: set[str] | None = None  # the documents bulk requests wrote (their count is its docs')
    settings: dict[str, str] = field(default_factory=dict)  # its own dynamic settings, as PUT (flat keys)

    @property
    def copies(self) -> Iterator[Copy]:
        return itertools.chain.from_iterable(self.shards)


@dataclass
class LockDoc:
    source: dict[str, Any]
    seq_no: int
    primary_term: int = 1


class FakeCluster:
    """The whole state, behind one lock (the server answers from several threads)."""

    def __init__(self, name: str = "fake", version: str = "9.5.3", seed: int = 7) -> None:
        self.name = name
        self.version = version
        self.uuid = node_id(f"cluster:{name}")
        self.nodes: dict[str, FakeNode] = {}
        self.by_name: dict[str, FakeNode] = {}
        self.indices: dict[str, FakeIndex] = {}
        self.on_node: dict[str, set[Copy]] = {}
        self.unassigned: set[Copy] = set()
        self.initializing: set[Copy] = set()
        self.total_copies = 0
        self.total_shards = 0
        # Node ids whose node stats fail (a busy node, a breaker, a timeout): Elasticsearch answers 200 with
        # `_nodes.failed` counting them, and leaves them out of `nodes`.
        self.stats_failing: set[str] = set()
        # What the fake itself saw at each stop, for tests that must not trust the tool's own account: the nodes
        # down at once, and each shard left with no started copy.
        self.down_at_stops: list[int] = []
        self.without_started_copy: list[str] = []
        self.settings: dict[str, dict[str, Any]] = {"persistent": {}, "transient": {}}
        # Searches, for the search watch (restart/search_watch.py): each read of a node's stats counts what it
        # served since its last read, `search_qps` queries a second (0: none, its counters stay at zero), each
        # taking `search_base_ms` plus `search_ms_per_mb` for each MB a second of the recovery rate in force:
        # recovery competing with searches, as a latency budget must see it. A node's counters start at its start.
        self.search_qps = 0.0
        self.search_base_ms = 2.0
        self.search_ms_per_mb = 0.0
        self.search_counts: dict[tuple[str, int], tuple[float, float, float]] = {}  # (id, pid) -> queries, ms, when
        self.docs: dict[tuple[str, str], LockDoc] = {}
        self.seq_no = 0
        self.tasks: dict[str, dict[str, Any]] = {}  # force-merges started as tasks, by id
        self.lock = threading.RLock()
        self.random = random.Random(seed)
        self._placement: Iterator[FakeNode] | None = None
        self._data_count = 0
        self.scattered = False  # each new shard's copies on data nodes drawn at random (generate)
        self._by_zone: dict[str | None, list[FakeNode]] = {}  # the up data nodes by zone, for `drawn`
        self._named: dict[str, set[str]] = {}  # a node's id, address and name -> its id, for `named`
        self._order: dict[str, int] = {}  # a node's id -> its place in the cluster's order

    # --- building ------------------------------------------------------------------------------
    @classmethod
    def generate(cls, nodes: int, copies_per_node: int = 200, zones: int = 1, seed: int = 7,
                 version: str = "9.5.3", scattered: bool = False, replicas: int = 1) -> FakeCluster:
        """``nodes`` nodes (from 10, three of them dedicated masters, the rest data nodes; below 10 every node
        both) spread over ``zones`` awareness zones, holding about ``copies_per_node`` copies per data node, each
        shard with ``replicas`` replicas. The copies of a shard go to the data nodes in turn (a node shares data
        with few others), or with ``scattered`` each to data nodes drawn at random (of distinct zones, as
        awareness places them): a node then shares data with about as many others as it holds copies."""
        cluster = cls(version=version, seed=seed)
        cluster.scattered = scattered
        zone_names = [f"zone-{z + 1}" for z in range(zones)]
        masters = 3 if nodes >= 10 else 0
        for i in range(1, nodes + 1):
            dedicated = i <= masters
            roles = ("master",) if dedicated else (*DATA_ROLES, "master") if not masters else DATA_ROLES
            cluster.add_node(f"es-{i}", zone_names[(i - 1) % zones] if zones > 1 else None, roles)
        if zones > 1:
            cluster.settings["persistent"]["cluster.routing.allocation.awareness.attributes"] = "zone"
        data_nodes = sum(1 for n in cluster.nodes.values() if n.is_data)
        widths = [w for w, _ in WIDTHS]
        weights = [p for _, p in WIDTHS]
        made = 0
        for number in itertools.count(1):
            if made >= copies_per_node * data_nodes:
                break
            primaries = min(cluster.random.choices(widths, weights)[0], max(data_nodes // 2, 1))
            made += cluster.create_index(f"logs-{number:06d}", primaries, replicas if data_nodes > 1 else 0)
        return cluster

    def add_node(self, name: str, zone: str | None, roles: tuple[str, ...]) -> FakeNode:
        i = len(self.nodes) + 1
        node = FakeNode(id=node_id(name), name=name, ip=f"10.{100 + i // 65536}.{(i // 256) % 256}.{i % 256}",
                        roles=roles, zone=zone, version=self.version, pid=1000 + i,
                        start_ms=now_ms() - self.random.randint(3_600_000, 86_400_000))
        self.nodes[node.id] = node
        self.by_name[name] = node
        self.on_node[node.id] = set()
        self._placement = None
        self._by_zone = {}
        self._named = {}
        return node

    def named(self, terms: Iterable[str]) -> list[FakeNode]:
        """The nodes (up or not) whose id, address or name is one of ``terms``, in the cluster's order: a
        lookup, not a pass over every node (a request naming a few nodes of 3,000 costs what it names)."""
        if not self._named:
            for place, n in enumerate(self.nodes.values()):
                self._order[n.id] = place
                for key in (n.id, n.ip, n.name):
                    self._named.setdefault(key, set()).add(n.id)
        found = {node_id for term in terms for node_id in self._named.get(term, ())}
        return [self.nodes[i] for i in sorted(found, key=self._order.__getitem__)]

    def placement(self) -> Iterator[FakeNode]:
        """Data nodes in turn, zones interleaved: consecutive picks are in different zones (awareness) and
        every node gets its share."""
        if self._placement is None:
            by_zone: dict[str | None, list[FakeNode]] = {}
            for n in self.nodes.values():
                if n.is_data:
                    by_zone.setdefault(n.zone, []).append(n)
            order = [n for group in itertools.zip_longest(*by_zone.values()) for n in group if n is not None]
            self._placement = itertools.cycle(order)
        return self._placement

    def create_index(self, name: str, primaries: int, replicas: int, hidden: bool = False,
                     auto_expand: str | None = None, on: tuple[str, ...] = ()) -> int:
        """A new index, its copies started on data nodes (as if created long ago), or on the nodes named ``on``
        alone (as allocation filtering keeps them: each shard's copies there, at most one on each); returns its
        copies."""
        if self._placement is None:
            self._data_count = sum(1 for n in self.nodes.values() if n.is_data and n.up)
        data = self._data_count
        if auto_expand:
            low, high = auto_expand.split("-")
            replicas = max(int(low), min(data - 1, data if high == "all" else int(high)))
        copies_per_shard = min(replicas + 1, data)
        index = FakeIndex(name, [], hidden=hidden, auto_expand=auto_expand)
        created = now_ms() - 3_600_000
        pick = self.placement()
        for shard in range(primaries):
            if on:
                holders = [self.by_name[n] for n in on][:copies_per_shard]
                copies_per_shard = len(holders)
            else:
                holders = self.drawn(copies_per_shard) if self.scattered else []
            while len(holders) < copies_per_shard:
                candidate = next(pick)
                if candidate.up and candidate not in holders:
                    holders.append(candidate)
            docs = self.random.randint(1_000, 100_000)
            copies = []
            for k, holder in enumerate(holders):
                copy = Copy(name, shard, k == 0, holder.id, STARTED, docs * 600, docs)
                copy.recovery = Recovery("EMPTY_STORE", True, created, "", holder.id, 0) if k == 0 else \
                    Recovery("PEER", True, created, holders[0].id, holder.id, copy.size)
                copies.append(copy)
                self.on_node[holder.id].add(copy)
            index.shards.append(copies)
        self.indices[name] = index
        self.total_shards += primaries
        self.total_copies += primaries * copies_per_shard
        return primaries * copies_per_shard

    def drawn(self, count: int) -> list[FakeNode]:
        """``count`` up data nodes drawn at random, each of another zone while there are zones left to draw
        from (awareness)."""
        if not self._by_zone:
            for n in self.nodes.values():
                if n.is_data and n.up:
                    self._by_zone.setdefault(n.zone, []).append(n)
        zones = self.random.sample(sorted(self._by_zone, key=str), min(count, len(self._by_zone)))
        holders = [self.random.choice(self._by_zone[z]) for z in zones]
        everyone = sum(len(group) for group in self._by_zone.values())
        while len(holders) < min(count, everyone):
            candidate = self.random.choice(self._by_zone[self.random.choice(zones)])
            if candidate not in holders:
                holders.append(candidate)
        return [n for n in holders if n.up]  # a node down since: the rest are placed in turn

    def drop_index(self, name: str) -> None:
        """The index deleted, every copy of it gone."""
        with self.lock:
            index = self.indices.pop(name)
            for c in index.copies:
                if c.node is not None:
                    self.on_node[c.node].discard(c)
                self.unassigned.discard(c)
                self.initializing.discard(c)
            self.total_shards -= len(index.shards)
            self.total_copies -= sum(len(s) for s in index.shards)

    # --- how it moves ------------------------------------------------------------------------------
    def stop(self, name: str) -> None:
        with self.lock:
            node = self.by_name[name]
            if not node.up:
                return
            node.up = False
            for copy in self.on_node[node.id]:
                if copy.primary:
                    others = [c for c in self.indices[copy.index].shards[copy.shard]
                              if c is not copy and c.state == STARTED]
                    if others:  # a started replica is promoted; without one the shard is red
                        others[0].primary, copy.primary = True, False
                copy.last_node, copy.node = node.id, None
                self._state(copy, UNASSIGNED)
                if not any(c.state == STARTED for c in self.indices[copy.index].shards[copy.shard]):
                    self.without_started_copy.append(f"[{copy.index}][{copy.shard}] at the stop of {name}")
            self.on_node[node.id] = set()
            self.down_at_stops.append(sum(1 for n in self.nodes.values() if not n.up))

    def start(self, name: str) -> None:
        with self.lock:
            node = self.by_name[name]
            if node.up:
                return
            node.up, node.pid, node.start_ms = True, node.pid + 10_000, now_ms()

    def tick(self) -> None:
        """One allocation round: initializing copies start, allowed unassigned copies go back to their node."""
        with self.lock:
            for copy in list(self.initializing):
                self._state(copy, STARTED)
                if copy.recovery is not None:
                    copy.recovery = copy.recovery._replace(done=True)
            enable = self.setting(ALLOCATION_ENABLE) or "all"
            for copy in list(self.unassigned):
                allowed = enable == "all" or (copy.primary and enable in ("primaries", "new_primaries"))
                home = self.nodes.get(copy.last_node or "")
                if not allowed or home is None or not home.up:
                    continue  # waits for its node (as delayed allocation does) or for allocation
                if any(c.node == home.id for c in self.indices[copy.index].shards[copy.shard] if c is not copy):
                    continue
                primary = next((c for c in self.indices[copy.index].shards[copy.shard] if c.primary and c.node), None)
                source = self.nodes[primary.node] if primary is not None and primary.node and not copy.primary \
                    else home
                copy.node = home.id
                self.on_node[home.id].add(copy)
                # Its own files and the operations it missed (retention leases held): no file copied.
                copy.recovery = Recovery("EXISTING_STORE" if copy.primary else "PEER", False, now_ms(),
                                         "" if copy.primary else source.id, home.id, 0)
                self._state(copy, INITIALIZING)

    def _state(self, copy: Copy, state: str) -> None:
        for group, member in ((self.unassigned, UNASSIGNED), (self.initializing, INITIALIZING)):
            if copy.state == member:
                group.discard(copy)
            if state == member:
                group.add(copy)
        copy.state = state

    # --- what is read -----------------------------------------------------------------------------
    def search_totals(self, node: FakeNode) -> tuple[int, int]:
        """The node's queries and their milliseconds since its start, as its stats say them now."""
        now = time.monotonic()
        queries, ms, since = self.search_counts.get((node.id, node.pid), (0.0, 0.0, now))
        served = self.search_qps * (now - since)
        rate_mb = parse_size(str(self.setting("indices.recovery.max_bytes_per_sec") or "40mb")) / 1024**2
        queries, ms = queries + served, ms + served * (self.search_base_ms + self.search_ms_per_mb * rate_mb)
        self.search_counts[(node.id, node.pid)] = (queries, ms, now)
        return int(queries), int(ms)

    def setting(self, key: str) -> Any:
        return self.settings["transient"].get(key, self.settings["persistent"].get(key))

    def up_nodes(self) -> list[FakeNode]:
        return [n for n in self.nodes.values() if n.up]

    def elected_master(self) -> FakeNode | None:
        return next((n for n in self.nodes.values() if n.up and n.is_master), None)

    def health(self) -> dict[str, Any]:
        moving = self.unassigned | self.initializing
        inactive_primaries = sum(1 for c in moving if c.primary)
        up = self.up_nodes()
        status = "red" if inactive_primaries else "yellow" if moving else "green"
        return {"cluster_name": self.name, "status": status, "timed_out": False, "number_of_nodes": len(up),
                "number_of_data_nodes": sum(1 for n in up if n.is_data),
                "active_primary_shards": self.total_shards - inactive_primaries,
                "active_shards": self.total_copies - len(moving), "relocating_shards": 0,
                "initializing_shards": len(self.initializing), "unassigned_shards": len(self.unassigned),
                "unassigned_primary_shards": sum(1 for c in self.unassigned if c.primary),
                "delayed_unassigned_shards": 0, "number_of_pending_tasks": 0, "number_of_in_flight_fetch": 0,
                "task_max_waiting_in_queue_millis": 0,
                "active_shards_percent_as_number":
                    100.0 * (self.total_copies - len(moving)) / max(self.total_copies, 1)}

    def index_status(self, index: FakeIndex) -> str:
        copies = list(index.copies)
        if any(c.primary and c.state != STARTED for c in copies):
            return "red"
        return "yellow" if any(c.state != STARTED for c in copies) else "green"

