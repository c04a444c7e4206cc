"""The toy product's plug-in: its settings, its adapter and snapshot, its plan and gate, its steps.

Only the orchestrator's plug-in interface is used (restart/product.py and what it names), and the
declaration `PRODUCT: Product[ToySnapshot, ToyCluster]` lets mypy check it against that interface.
"""

from __future__ import annotations

import json
import os
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from orchestrator.config.discovered import Facts
from orchestrator.config.model import ClusterSection, Inventory, ProductSettings, settings_of
from orchestrator.config.playbook import Playbook
from orchestrator.errors import ConfigError, UnsafeToProceed
from orchestrator.hosts.capacity import HostCapacity
from orchestrator.hosts.transport import Transport
from orchestrator.pending.verdict import RunningNode
from orchestrator.restart.context import RunContext
from orchestrator.restart.journal import BatchRecord, RunOptions
from orchestrator.restart.plan import Batch, Mode, Plan, SettingChange
from orchestrator.restart.product import Column, Product
from orchestrator.restart.steps import set_temporarily

LIMIT = "toy.limit"


class ToySettings(ProductSettings):
    state_dir: Path  # each node's process id, the cluster's settings and its lock


@dataclass(frozen=True)
class ToySnapshot:
    pids: dict[str, int | None]  # node -> its process, None when it is down
    settings: dict[str, Any]


class ToyCluster:
    def __init__(self, inv: Inventory) -> None:
        self.dir = settings_of(inv, ToySettings).state_dir
        self.names = [n.name for n in inv.nodes]
        self.calls = 0

    def pid(self, name: str) -> int | None:
        try:
            pid = int((self.dir / f"{name}.pid").read_text())
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, ValueError, IndexError):
            return None
        return None if state == "Z" else pid

    def _settings(self) -> dict[str, Any]:
        path = self.dir / "settings.json"
        return dict(json.loads(path.read_text())) if path.exists() else {}

    def snapshot(self) -> ToySnapshot:
        self.calls += 1
        return ToySnapshot({n: self.pid(n) for n in self.names}, self._settings())

    def gate_snapshot(self, plan: Plan, restarting: Collection[str], proof: bool = False,
                      window: Collection[str] | None = None) -> ToySnapshot:
        return self.snapshot()

    def live_identity(self, plan: Plan, name: str) -> str | None:
        pid = self.pid(name)
        return None if pid is None else f"pid {pid}"

    def await_identity(self, plan: Plan, name: str, timeout_s: float) -> str | None:
        return self.live_identity(plan, name)

    def put_settings(self, scope: str, values: dict[str, Any]) -> None:
        self.calls += 1
        settings = self._settings()
        for key, value in values.items():
            if value is None:
                settings.pop(f"{scope}:{key}", None)
            else:
                settings[f"{scope}:{key}"] = value
        (self.dir / "settings.json").write_text(json.dumps(settings))

    def live_settings(self, wanted: list[tuple[str, str]]) -> list[Any]:
        settings = self._settings()
        return [settings.get(f"{scope}:{key}") for scope, key in wanted]

    def search_counters(self) -> None:
        return None  # the toy serves no searches

    def search_once(self, index: str, query: dict[str, Any]) -> bool:
        return False  # the toy serves no searches

    def cluster_identity(self) -> None:
        return None  # the toy's processes are one cluster, on one machine

    def health_summary(self) -> dict[str, Any]:
        up = sum(1 for n in self.names if self.pid(n) is not None)
        return {"status": "green" if up == len(self.names) else "degraded", "number_of_nodes": up,
                "text": f"{up} of {len(self.names)} processes running"}

    def _lock(self, index: str, doc_id: str) -> Path:
        return self.dir / f"lock-{index}-{doc_id}.json"

    def create_lock(self, index: str, doc_id: str, body: dict[str, Any]) -> bool:
        try:
            fd = os.open(self._lock(index, doc_id), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            return False
        with os.fdopen(fd, "w") as f:
            json.dump(body, f)
        return True

    def read_lock(self, index: str, doc_id: str) -> dict[str, Any] | None:
        path = self._lock(index, doc_id)
        return dict(json.loads(path.read_text())) if path.exists() else None

    def delete_lock(self, index: str, doc_id: str) -> None:
        self._lock(index, doc_id).unlink(missing_ok=True)

    def write_lock_document(self, index: str, doc_id: str, body: dict[str, Any]) -> None:
        self._lock(index, doc_id).write_text(json.dumps(body))

    def renew_lock(self, index: str, doc_id: str, run_id: str, update: dict[str, Any]) -> bool:
        held = self.read_lock(index, doc_id)
        if held is None or held.get("run_id") != run_id:
            return False
        self._lock(index, doc_id).write_text(json.dumps({**held, **update}))
        return True


def raise_limit(ctx: RunContext[ToyCluster]) -> None:
    live = ctx.cluster.live_settings([("cluster", LIMIT)])[0]
    set_temporarily(ctx, LIMIT, "cluster", live, "raised", None)


def check_new_process(ctx: RunContext[ToyCluster], batch: BatchRecord) -> None:
    for name in batch.nodes:
        record = ctx.record(name)
        if record.process_before is not None and ctx.cluster.live_identity(ctx.journal.plan, name) == \
                record.process_before:
            raise UnsafeToProceed(f"{name} still runs its old process")


def down(snapshot: ToySnapshot) -> list[str]:
    gone = sorted(n for n, pid in snapshot.pids.items() if pid is None)
    return [f"process(es) not running: {', '.join(gone)}"] if gone else []


class ToyProduct:
    name = "toy"
    default_playbook = str(Path(__file__).with_name("toy-rolling.yaml"))
    upgrade_playbook: str | None = None
    settings = ToySettings
    client_loggers: tuple[str, ...] = ()
    discovers = False
    batch_steps = MappingProxyType({"check_new_process": check_new_process})
    run_steps = MappingProxyType({"raise_limit": raise_limit})
    order_rules = (("wait_for_join", "check_new_process"),)
    checks_before_stop = False
    recovery_rate_key: str | None = None
    exact_sudo_rules = True
    plan_columns = (Column("process", lambda f: str(int(f["pid"])) if "pid" in f else "-"),)
    report_columns: tuple[Column, ...] = ()

    def discover(self, section: ClusterSection) -> Facts:
        raise ConfigError("inventory discover", ["a toy cluster is written by hand"])

    def connect(self, inv: Inventory) -> ToyCluster:
        return ToyCluster(inv)

    def plan(self, inv: Inventory, snapshot: ToySnapshot, mode: Mode, options: RunOptions,
             tuning: tuple[str, ...]) -> Plan:
        batches = tuple(Batch(number=i, label=n.name, nodes=(n.name,), estimate_s=1.0,
                              figures={"pid": float(pid)} if (pid := snapshot.pids.get(n.name)) else {})
                        for i, n in enumerate(inv.nodes, 1))
        problems = down(snapshot) + (["zone mode: a toy cluster has no zones"] if mode is Mode.ZONE else [])
        return Plan(cluster=inv.cluster.name, product=self.name, mode=mode, batches=batches,
                    settings=(SettingChange(LIMIT, "cluster", snapshot.settings.get(f"cluster:{LIMIT}"), "raised",
                                            "for the run"),), tuning=tuning, estimate_s=float(len(batches)),
                    problems=tuple(problems), node_ids={n.name: n.name for n in inv.nodes})

    def gate(self, snapshot: ToySnapshot, plan: Plan, nodes: Sequence[str], options: RunOptions) -> list[str]:
        return down(snapshot)

    def stop_check(self, snapshot: ToySnapshot, plan: Plan, nodes: Sequence[str], options: RunOptions) -> list[str]:
        return []

    # A product with no rule that proves several nodes away safe refuses a window, saying why.
    def window_check(self, snapshot: ToySnapshot, plan: Plan, inv: Inventory, candidate: str,
                     window: Sequence[str], options: RunOptions) -> list[str]:
        return ["the toy restarts one node at a time"] if window else []

    def window_partners(self, snapshot: ToySnapshot, plan: Plan, candidate: str) -> frozenset[str]:
        return frozenset()

    def window_notes(self, snapshot: ToySnapshot, plan: Plan, inv: Inventory, options: RunOptions) -> tuple[str, ...]:
        return ()

    def windowed(self, playbook: Playbook) -> Playbook:
        raise ConfigError("--max-unavailable", ["the toy restarts one node at a time: leave it out"])

    def with_host_capacity(self, inv: Inventory, snapshot: ToySnapshot,
                           capacity: Mapping[str, HostCapacity]) -> ToySnapshot:
        return snapshot

    def host_transport(self, inv: Inventory) -> Transport | None:
        return None

    def with_upgrade_facts(self, adapter: ToyCluster, snapshot: ToySnapshot) -> ToySnapshot:
        raise ConfigError("upgrade", ["a toy cluster has no versions"])

    def node_logs(self, adapter: ToyCluster) -> dict[str, str]:
        return {}

    def running_nodes(self, adapter: ToyCluster) -> list[RunningNode]:
        return []  # toy nodes run on no host: `orchestrate pending` says each is unknown

    def load_snapshot(self, path: Path) -> ToySnapshot:
        raise ConfigError(str(path), ["a toy cluster has no saved snapshots"])

    def dump_snapshot(self, snapshot: ToySnapshot) -> dict[str, Any]:
        return {"pids": snapshot.pids, "settings": snapshot.settings}


PRODUCT: Product[ToySnapshot, ToyCluster] = ToyProduct()
