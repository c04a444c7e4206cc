"""A fake cluster (adapter), its hosts (transport) and a product plug-in for them. See __init__."""

from __future__ import annotations

import itertools
import shlex
import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any, ClassVar

from orchestrator.config.discovered import Facts
from orchestrator.config.model import ClusterSection, Inventory, NodeEntry, ProductSettings
from orchestrator.config.playbook import Playbook
from orchestrator.errors import ConfigError
from orchestrator.hosts.capacity import HostCapacity
from orchestrator.hosts.transport import CommandResult, Transport
from orchestrator.pending.verdict import RunningNode
from orchestrator.restart.context import RunContext
from orchestrator.restart.journal import BatchRecord, RunOptions
from orchestrator.restart.plan import Batch, Mode, Plan, SettingChange
from orchestrator.restart.product import Column, Product, RunStepFn, not_discoverable
from orchestrator.restart.search_figures import SearchCounters
from orchestrator.restart.steps import StepFn, restore_settings, set_temporarily
from orchestrator.retry import Clock

HELD = "fake.hold"  # a per-batch temporary setting, as allocation is for Elasticsearch
LIMIT = "fake.limit"  # a setting raised for the run, as recovery limits are


class FakeClock(Clock):
    """Time that passes only when the code sleeps: waits of minutes run in microseconds."""

    def __init__(self, wall_start: datetime = datetime(2026, 11, 23, 20, 0, tzinfo=UTC)) -> None:  # a Monday
        self.now = 0.0
        super().__init__(monotonic=lambda: self.now, sleep=self.advance,
                         wall=lambda: wall_start + timedelta(seconds=self.now))

    def advance(self, seconds: float) -> None:
        self.now += seconds


class Crash(BaseException):
    """The process dies here (as with SIGKILL). A BaseException, so no handler meant for the tool's own
    errors catches it; the engine's last resort (which journals an internal error) does, and a killed
    process writes nothing more: `FakeCluster.on_crash` lets a test keep the journal as it was at this
    point (tests/unit/test_engine.py: killed_here)."""


@dataclass
class FakeNode:
    name: str
    zone: str | None = None
    up: bool = True
    pid: int = 0
    starts: int = 0
    polls_to_join: int = 0  # live-identity polls before a started node is seen in the cluster
    rejoins: bool = True  # False: its process starts but never joins
    start_fails: bool = False  # True: its start command fails


@dataclass(frozen=True)
class FakeSnapshot:
    down: frozenset[str]
    settings: dict[tuple[str, str], Any]
    zones: dict[str, str | None]
    sole_copies: dict[str, tuple[str, ...]] = field(default_factory=dict)  # node -> indices only it holds
    copies: dict[str, tuple[str, ...]] = field(default_factory=dict)  # index -> the nodes holding a copy


@dataclass
class FakeCluster:
    """The cluster and its hosts' services: one world shared by the adapter and the transport."""

    nodes: dict[str, FakeNode]
    join_polls: int = 1  # how slowly a started node joins
    settings: dict[tuple[str, str], Any] = field(default_factory=dict)
    locks: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    crash_at: int | None = None  # crash when the count of points reaches this (before and after each operation)
    on_crash: Callable[[], None] | None = None  # called at the crash, before anything else runs; then every
    killed: bool = False  # later point of any thread crashes too, as after a SIGKILL, until a test clears it
    operations: int = 0  # points passed: two per operation
    calls: int = 0
    stop_barrier: threading.Barrier | None = None  # nodes of a zone batch must stop together
    # node -> another node: its stop ends only once the other has started (a slow stop, up to 5 s)
    stop_ends_after_start_of: dict[str, str] = field(default_factory=dict)
    sole_copies: dict[str, tuple[str, ...]] = field(default_factory=dict)  # node -> indices only it holds
    settings_at_stop: dict[str, dict[tuple[str, str], Any]] = field(default_factory=dict)  # node -> settings then
    # A window's layout: index -> the nodes holding its copies; the fake records, at each stop, the nodes then
    # away and each index left with no copy on a node that is up and joined.
    copies: dict[str, tuple[str, ...]] = field(default_factory=dict)
    unavailable: list[str] = field(default_factory=list)
    away_at_stops: list[tuple[str, ...]] = field(default_factory=list)
    start_takes_s: float = 0.0  # real time a start command takes (a window's nodes then overlap, as real ones do)
    writes: list[dict[str, Any]] = field(default_factory=list)  # each settings request: {key: value}
    uuid: str = "fake-cluster-uuid-0"
    # Searches: each read of the counters, every node up has run 10 more queries of this many ms each, times
    # one more for each node away (the nodes left serve them all); a node's counters start again at its start.
    search_ms: float | None = None  # None: no search figures, as a product without them
    probe_ms: float | None = None  # a probe's time with every node up (slept: the caller times it); None: no searches
    probes: int = 0  # probes run
    search_totals: dict[tuple[str, int], tuple[int, float]] = field(default_factory=dict)
    _pids: itertools.count[int] = field(default_factory=lambda: itertools.count(1000))
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _started: threading.Condition = field(default_factory=threading.Condition)

    @classmethod
    def of(cls, names: Sequence[str], zones: Sequence[str] | None = None, **kwargs: Any) -> FakeCluster:
        nodes = {n: FakeNode(n, zone=zones[i] if zones else None) for i, n in enumerate(names)}
        cluster = cls(nodes, **kwargs)
        for node in nodes.values():
            node.pid = next(cluster._pids)
        return cluster

    def point(self) -> None:
        """A moment just before or just after a change or a command: a crash may happen at any."""
        with self._lock:
            self.operations += 1
            if self.killed:  # the process is dead: no thread of it does anything more
                raise Crash("killed earlier")
            if self.crash_at is not None and self.operations >= self.crash_at:
                self.crash_at = None
                if self.on_crash is not None:
                    self.killed = True
                    self.on_crash()
                raise Crash(f"crashed at point {self.operations}")

    @contextmanager
    def operation(self) -> Iterator[None]:
        """A change or a command: the process may die before it (it never happens) or after it (it
        happened, and nothing after it in the tool ran)."""
        self.point()
        yield
        self.point()

    # --- the adapter ----------------------------------------------------------------------------
    def snapshot(self) -> FakeSnapshot:
        self.calls += 1
        with self._lock:
            down = frozenset(n.name for n in self.nodes.values() if not n.up or n.polls_to_join > 0)
            return FakeSnapshot(down, dict(self.settings), {n.name: n.zone for n in self.nodes.values()},
                                dict(self.sole_copies), dict(self.copies))

    def away(self) -> set[str]:
        """The nodes down, or started and not yet joined."""
        return {n.name for n in self.nodes.values() if not n.up or n.polls_to_join > 0}

    def record_stop(self) -> None:
        """At a stop: the most nodes away at once, and each index left with no copy on a node up and joined."""
        with self._lock:
            away = self.away()
            self.away_at_stops.append(tuple(sorted(away)))
            self.unavailable += [f"{index} (its nodes {', '.join(holders)} all away)"
                                 for index, holders in self.copies.items() if set(holders) <= away]

    def gate_snapshot(self, plan: Plan, restarting: Collection[str], proof: bool = False,
                      window: Collection[str] | None = None) -> FakeSnapshot:
        return self.snapshot()

    def live_identity(self, plan: Plan, name: str) -> str | None:
        self.calls += 1
        with self._lock:
            node = self.nodes[name]
            if not node.up:
                return None
            if node.polls_to_join > 0:
                if node.rejoins:
                    node.polls_to_join -= 1
                return None
            return f"pid {node.pid}"

    def await_identity(self, plan: Plan, name: str, timeout_s: float) -> str | None:
        """A server-side wait: a node that is booting and will rejoin has joined by its end."""
        with self._lock:
            node = self.nodes[name]
            if timeout_s > 0 and node.up and node.rejoins:
                node.polls_to_join = 0
        return self.live_identity(plan, name)

    def put_settings(self, scope: str, values: dict[str, Any]) -> None:
        self.writes.append(dict(values))  # one request
        for key, value in values.items():
            self.calls += 1
            with self.operation(), self._lock:
                if value is None:
                    self.settings.pop((scope, key), None)
                else:
                    self.settings[(scope, key)] = value

    def live_settings(self, wanted: list[tuple[str, str]]) -> list[Any]:
        return [self.settings.get(w) for w in wanted]

    def search_counters(self) -> dict[str, SearchCounters] | None:
        if self.search_ms is None:
            return None
        with self._lock:
            self.calls += 1
            up = [n for n in self.nodes.values() if n.up and n.polls_to_join == 0]
            each_ms = self.search_ms * (1 + len(self.nodes) - len(up))
            out = {}
            for n in up:
                queries, ms = self.search_totals.get((n.name, n.pid), (0, 0.0))
                self.search_totals[(n.name, n.pid)] = queries + 10, ms + 10 * each_ms
                out[n.name] = SearchCounters(queries + 10, int(ms + 10 * each_ms), 0, 0)
            return out

    def search_once(self, index: str, query: dict[str, Any]) -> bool:
        """A probe: ``probe_ms`` with every node up, once more for each node away."""
        if self.probe_ms is None:
            return False
        with self._lock:
            self.calls += 1
            self.probes += 1
            away = sum(1 for n in self.nodes.values() if not n.up or n.polls_to_join)
        time.sleep(self.probe_ms * (1 + away) / 1000)
        return True

    def health_summary(self) -> dict[str, Any]:
        up = sum(1 for n in self.nodes.values() if n.up)
        return {"status": "ok" if up == len(self.nodes) else "degraded", "number_of_nodes": up,
                "text": f"{up} of {len(self.nodes)} nodes up"}

    def cluster_identity(self) -> str:
        return self.uuid

    def create_lock(self, index: str, doc_id: str, body: dict[str, Any]) -> bool:
        with self._lock:
            if (index, doc_id) in self.locks:
                return False
            self.locks[(index, doc_id)] = dict(body)
            return True

    def read_lock(self, index: str, doc_id: str) -> dict[str, Any] | None:
        return self.locks.get((index, doc_id))

    def delete_lock(self, index: str, doc_id: str) -> None:
        self.locks.pop((index, doc_id), None)

    def write_lock_document(self, index: str, doc_id: str, body: dict[str, Any]) -> None:
        with self._lock:
            self.locks[(index, doc_id)] = dict(body)

    def renew_lock(self, index: str, doc_id: str, run_id: str, update: dict[str, Any]) -> bool:
        with self._lock:
            held = self.locks.get((index, doc_id))
            if held is None or held.get("run_id") != run_id:
                return False
            held.update(update)
            return True


class FakeTransport:
    """The hosts: `systemctl stop|start|is-active UNIT` act on the fake cluster; any other command
    succeeds and is recorded."""

    def __init__(self, cluster: FakeCluster) -> None:
        self.cluster = cluster
        self.commands: list[tuple[str, str]] = []

    def run(self, node: NodeEntry, command: str, timeout_s: float | None = None,
            stdin: bytes | None = None) -> CommandResult:
        self.commands.append((node.name, command))
        words = shlex.split(command)
        fake = self.cluster.nodes[node.name]
        if words[:1] != ["systemctl"] or len(words) < 2:
            with self.cluster.operation():
                return CommandResult(0, "", "")
        verb = words[1]
        if verb == "is-active":
            return CommandResult(0 if fake.up else 3, "active\n" if fake.up else "inactive\n", "")
        with self.cluster.operation():
            return self.act(fake, verb, words[-1])

    def exact_sudo(self, node: NodeEntry) -> bool:
        return False

    def act(self, fake: FakeNode, verb: str, unit: str) -> CommandResult:
        if verb == "stop":
            if self.cluster.stop_barrier is not None:
                self.cluster.stop_barrier.wait(timeout=5)  # raises if the batch's nodes do not stop together
            self.cluster.settings_at_stop[fake.name] = dict(self.cluster.settings)
            fake.up = False
            self.cluster.record_stop()
            other = self.cluster.stop_ends_after_start_of.get(fake.name)
            if other is not None:
                with self.cluster._started:
                    if not self.cluster._started.wait_for(lambda: self.cluster.nodes[other].starts > 0, timeout=5):
                        return CommandResult(1, "", f"{fake.name}: stop timed out waiting for {other} to start")
            return CommandResult(0, "", "")
        if verb == "start":
            if fake.up:
                return CommandResult(0, "", "")  # as systemd: starting a running unit does nothing
            if fake.start_fails:
                return CommandResult(1, "", f"Job for {unit} failed")
            time.sleep(min(self.cluster.start_takes_s, 1.0))
            fake.up, fake.starts = True, fake.starts + 1
            fake.pid = next(self.cluster._pids)
            fake.polls_to_join = self.cluster.join_polls if fake.rejoins else 1
            with self.cluster._started:
                self.cluster._started.notify_all()
            return CommandResult(0, "", "")
        return CommandResult(5, "", f"Unknown command verb {verb}")

    def check(self, node: NodeEntry) -> None:
        pass

    def close(self) -> None:
        pass


# --- the product -------------------------------------------------------------------------------------
def hold(ctx: RunContext[FakeCluster], batch: BatchRecord) -> None:
    set_temporarily(ctx, HELD, "cluster", ctx.cluster.live_settings([("cluster", HELD)])[0], "held", batch.number)


def release(ctx: RunContext[FakeCluster], batch: BatchRecord) -> None:
    restore_settings(ctx, {HELD})


def raise_limit(ctx: RunContext[FakeCluster]) -> None:
    for change in ctx.journal.plan.settings:
        if change.when == "for the run":
            live = ctx.cluster.live_settings([(change.scope, change.key)])[0]
            set_temporarily(ctx, change.key, change.scope, live, change.during, None)


# The fake clusters an inventory of `product: fake` reaches, by its cluster name: a test of what is built on
# the tool (a scheduler's DAG, say) puts them here, then runs the tool as its users do.
FLEET: dict[str, FakeCluster] = {}


def fleet_member(inv: Inventory) -> FakeCluster:
    try:
        return FLEET[inv.cluster.name]
    except KeyError:
        raise ConfigError("inventory", [f"cluster.name: no fake cluster {inv.cluster.name!r}; a test makes one with "
                                        "orchestrator.testing.fake.FLEET[NAME] = FakeCluster.of([...])"]) from None


class FakeProduct:
    name = "fake"
    default_playbook = str(Path(__file__).with_name("fake-rolling.yaml"))
    upgrade_playbook: str | None = None
    batch_steps: ClassVar[dict[str, StepFn[FakeCluster]]] = {"hold_setting": hold, "release_setting": release}
    run_steps: ClassVar[dict[str, RunStepFn[FakeCluster]]] = {"raise_limit": raise_limit}
    settings = ProductSettings
    client_loggers: tuple[str, ...] = ()
    discovers = False
    checks_before_stop = True
    recovery_rate_key: str | None = None
    exact_sudo_rules = True
    order_rules = (("hold_setting", "stop_service"), ("wait_for_join", "release_setting"))
    plan_columns = (Column("nodes", lambda f: str(int(f.get("nodes", 0)))),)
    report_columns: tuple[Column, ...] = ()

    def discover(self, section: ClusterSection) -> Facts:
        raise not_discoverable(self.name)

    def connect(self, inv: Inventory) -> FakeCluster:
        return fleet_member(inv)

    def host_transport(self, inv: Inventory) -> Transport | None:
        return FakeTransport(fleet_member(inv))

    def plan(self, inv: Inventory, snap: FakeSnapshot, mode: Mode, options: RunOptions,
             tuning: tuple[str, ...]) -> Plan:
        names = [n.name for n in inv.nodes]
        if mode is Mode.ZONE:
            zones: dict[str, list[str]] = {}
            for n in names:
                zones.setdefault(str(snap.zones.get(n)), []).append(n)
            groups = sorted(zones.items())
        else:
            groups = [(n, [n]) for n in names]
        batches = tuple(Batch(number=i, label=label, nodes=tuple(members), estimate_s=1.0,
                              figures={"nodes": len(members)}) for i, (label, members) in enumerate(groups, 1))
        before = snap.settings.get(("cluster", LIMIT))
        return Plan(cluster=inv.cluster.name, product=self.name, mode=mode, batches=batches,
                    settings=(SettingChange(LIMIT, "cluster", before, "raised", "for the run"),), tuning=tuning,
                    estimate_s=float(len(batches)), problems=tuple(self.problems(snap)), node_ids={n: n for n in names})

    @staticmethod
    def problems(snap: FakeSnapshot) -> list[str]:
        return [f"node(s) not in the cluster: {', '.join(sorted(snap.down))}"] if snap.down else []

    def gate(self, snapshot: FakeSnapshot, plan: Plan, nodes: Sequence[str], options: RunOptions) -> list[str]:
        return self.problems(snapshot)

    def stop_check(self, snapshot: FakeSnapshot, plan: Plan, nodes: Sequence[str], options: RunOptions) -> list[str]:
        sole = snapshot.sole_copies
        lost = sorted(i for n in nodes for i in sole.get(n, ())
                      if not any(fnmatchcase(i, p) for p in options.allow_unavailable))
        return [f"stopping it leaves index(es) {', '.join(lost)} with no copy."] if lost else []

    def window_check(self, snapshot: FakeSnapshot, plan: Plan, inv: Inventory, candidate: str,
                     window: Sequence[str], options: RunOptions) -> list[str]:
        """A node joins a window when no other node is down, one zone at a time, and each index it holds keeps a
        copy on a node up and outside the window."""
        gone = {*window, candidate}
        problems = [f"node(s) not in the cluster: {', '.join(sorted(snapshot.down - gone))}"] \
            if snapshot.down - gone else []
        zones = {snapshot.zones.get(n) for n in window if n != candidate}
        if zones and snapshot.zones.get(candidate) not in zones:
            problems.append("the window holds another zone: one zone at a time")
        lonely = sorted(i for i, holders in snapshot.copies.items()
                        if candidate in holders and not set(holders) - gone - snapshot.down)
        if lonely:
            problems.append(f"index(es) {', '.join(lonely)} would have no copy outside the window.")
        return problems + self.stop_check(snapshot, plan, [candidate], options)

    def window_partners(self, snapshot: FakeSnapshot, plan: Plan, candidate: str) -> frozenset[str]:
        return frozenset(n for holders in snapshot.copies.values() if candidate in holders for n in holders) - {
            candidate}

    def window_notes(self, snapshot: FakeSnapshot, plan: Plan, inv: Inventory,
                     options: RunOptions) -> tuple[str, ...]:
        return ()

    def windowed(self, playbook: Playbook) -> Playbook:
        # The held setting is per batch: another batch's release would end it while this one is away.
        return playbook.model_copy(update={"batch": [e for e in playbook.batch
                                                     if e not in ("hold_setting", "release_setting")]})

    def with_host_capacity(self, inv: Inventory, snapshot: FakeSnapshot,
                           capacity: Mapping[str, HostCapacity]) -> FakeSnapshot:
        return snapshot

    def with_upgrade_facts(self, adapter: FakeCluster, snapshot: FakeSnapshot) -> FakeSnapshot:
        raise ConfigError("upgrade", [f"`orchestrate upgrade` is not available for {self.name} clusters yet: roll "
                                      "with `orchestrate restart` and a command step that installs the version"])

    def running_nodes(self, adapter: FakeCluster) -> list[RunningNode]:
        return []  # the fake's nodes run on no host: `orchestrate pending` says each is unknown

    def node_logs(self, adapter: FakeCluster) -> dict[str, str]:
        return {}  # its log says nothing the first estimate reads

    def load_snapshot(self, path: Path) -> FakeSnapshot:
        raise ConfigError(str(path), ["the fake product has no saved snapshots"])

    def dump_snapshot(self, snapshot: FakeSnapshot) -> dict[str, Any]:
        return {"down": sorted(snapshot.down)}


PRODUCT: Product[FakeSnapshot, FakeCluster] = FakeProduct()
