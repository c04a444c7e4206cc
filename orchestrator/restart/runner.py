"""Running a restart: preflight, journal, lock, signals, then the engine. Also resume and status.

Preflight reads and checks everything before the first change: the plan is safe, every node is
matched, every host answers over SSH with a verified key, no other run holds the cluster.
"""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from orchestrator.config.inventory import load_inventory
from orchestrator.config.model import Inventory, NodeEntry
from orchestrator.config.playbook import Playbook, load_playbook
from orchestrator.errors import ConfigError, JournalError, OrchestratorError, PreflightFailed
from orchestrator.es.snapshot import ClusterSnapshot
from orchestrator.hosts.service import ServiceControl
from orchestrator.hosts.transport import Transport, make_transport
from orchestrator.restart import journal as journals
from orchestrator.restart.adapter import ClusterAdapter
from orchestrator.restart.context import AbortFlag, RunContext, Tuner
from orchestrator.restart.engine import Engine
from orchestrator.restart.events import Event, EventSink
from orchestrator.restart.journal import BatchRecord, Journal, NodeRecord, RunState
from orchestrator.restart.lock import LOCK_INDEX, RunLock
from orchestrator.restart.plan import Mode, Plan, build_plan
from orchestrator.tuning.apply import make_tuner, profile_summary

if TYPE_CHECKING:  # the client library is imported when a cluster is opened, not for `plan --snapshot`
    from orchestrator.es.adapter import ElasticsearchAdapter
    from orchestrator.es.connect import Connection


@dataclass
class Target:
    """A cluster to act on: its inventory and the adapter to reach it."""

    inv: Inventory
    inventory_path: Path
    playbook: Playbook
    cluster: ClusterAdapter

    @property
    def es(self) -> ElasticsearchAdapter:
        from orchestrator.es.adapter import ElasticsearchAdapter

        if not isinstance(self.cluster, ElasticsearchAdapter):
            raise ConfigError(str(self.inventory_path), [
                f"cluster {self.inv.cluster.name} is a {self.inv.cluster.product} cluster; this command is for "
                "Elasticsearch clusters"])
        return self.cluster


def connection(inv: Inventory) -> Connection:
    from orchestrator.es.connect import Connection

    c = inv.cluster
    problems = []
    password = api_key = None
    for label, source in (("cluster.password", c.password), ("cluster.api_key", c.api_key)):
        if source is not None:
            try:
                value = source.resolve()
            except ValueError as exc:
                problems.append(f"{label}: {exc}")
                continue
            if label == "cluster.password":
                password = value
            else:
                api_key = value
    if c.ca_file is not None and not Path(c.ca_file).is_file():
        problems.append(f"cluster.ca_file: {c.ca_file} not found")
    if problems:
        raise ConfigError("inventory", problems)
    return Connection(endpoints=tuple(c.endpoints), ca_file=str(c.ca_file) if c.ca_file else None,
                      verify_certs=c.verify_certs, username=c.username, password=password, api_key=api_key,
                      request_timeout_s=c.request_timeout_s)


def open_target(cluster: str | None, config: Path | None) -> Target:
    inv, path = load_inventory(cluster, config)
    playbook = load_playbook(inv.playbook, inv.directory)
    if playbook.product != inv.cluster.product:
        raise ConfigError(str(path), [f"playbook {playbook.name} is for {playbook.product}, the cluster is "
                                      f"{inv.cluster.product}"])
    if inv.cluster.product == "riak":
        from orchestrator.riak.adapter import RiakAdapter

        return Target(inv, path, playbook, RiakAdapter(inv, make_transport(inv)))
    from orchestrator.es.adapter import ElasticsearchAdapter

    return Target(inv, path, playbook, ElasticsearchAdapter(connection(inv)))


def make_plan(target: Target, mode: Mode, allow_yellow: bool = False) -> Plan:
    if target.inv.cluster.product == "riak":
        from orchestrator.riak.adapter import RiakAdapter
        from orchestrator.riak.plan import build_riak_plan

        assert isinstance(target.cluster, RiakAdapter)
        return build_riak_plan(target.inv, target.cluster.snapshot(), mode, tuning=profile_summary(target.inv))
    return plan_for(target, target.es.snapshot(), mode, allow_yellow)


def plan_for(target: Target, snap: ClusterSnapshot, mode: Mode, allow_yellow: bool = False) -> Plan:
    return build_plan(target.inv, snap, mode, tuning=profile_summary(target.inv), allow_yellow=allow_yellow)


def plan_from_file(cluster: str | None, config: Path | None, snapshot: Path, mode: Mode,
                   allow_yellow: bool) -> tuple[Plan, list[str]]:
    """Plan from a saved cluster state: the same decisions, no cluster needed."""
    inv, path = load_inventory(cluster, config)
    if inv.cluster.product != "elasticsearch":
        raise ConfigError(str(path), ["--snapshot plans from a saved Elasticsearch cluster state; this cluster is "
                                      f"{inv.cluster.product}: plan from the live cluster instead"])
    try:
        snap = ClusterSnapshot.from_json(json.loads(snapshot.read_text()))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(str(snapshot), [f"not a cluster snapshot written by --save-snapshot: {exc}"]) from None
    plan = build_plan(inv, snap, mode, tuning=profile_summary(inv), allow_yellow=allow_yellow)
    return plan, [s.name for s in load_playbook(inv.playbook, inv.directory).steps()]


def check_hosts(inv: Inventory, transport: Transport) -> list[str]:
    """Every host answers over SSH with a verified key; checked in parallel (a connection each)."""

    def check(node: NodeEntry) -> str | None:
        try:
            transport.check(node)
        except OrchestratorError as exc:
            return str(exc)
        return None

    with ThreadPoolExecutor(max_workers=min(len(inv.nodes), 16)) as pool:
        return [p for p in pool.map(check, inv.nodes) if p is not None]


def unfinished_run(cluster: str) -> Journal | None:
    try:
        last = journals.latest(cluster)
    except JournalError:
        return None
    return last if last is not None and last.state is not RunState.SUCCEEDED else None


def new_journal(target: Target, plan: Plan, prelude: dict[str, Any] | None = None) -> Journal:
    batches = [BatchRecord(number=b.number, label=b.label, nodes=list(b.nodes)) for b in plan.batches]
    nodes = {n: NodeRecord(name=n, batch=b.number) for b in plan.batches for n in b.nodes}
    return journals.create(Journal(run_id=journals.new_run_id(), cluster=target.inv.cluster.name,
                                   inventory=str(target.inventory_path), mode=plan.mode.value,
                                   playbook=target.playbook.name, plan=plan.to_json(), batches=batches, nodes=nodes,
                                   prelude=prelude or {}))


@contextmanager
def abort_on_signals(abort: AbortFlag, emit: EventSink) -> Iterator[None]:
    """Ctrl-C and SIGTERM ask for a stop at the next safe point; a second one is refused, loudly."""

    def handler(signum: int, frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        if abort.requested:
            emit(Event("warning", f"{name} again: already stopping at a safe point, please wait "
                                  "(SIGKILL would leave temporary settings in place until `resume`)"))
            return
        abort.request(name)
        emit(Event("warning", f"{name}: stopping at the next safe point, then restoring settings"))

    previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def execute(target: Target, journal: Journal, transport: Transport, emit: EventSink, takeover: bool) -> Journal:
    inv = target.inv
    lock = RunLock(target.cluster, inv.cluster.name, journal.run_id)
    lock.acquire(takeover=takeover)
    abort = AbortFlag()
    tuner: Tuner | None = make_tuner(inv, transport)
    ctx = RunContext(inv=inv, playbook=target.playbook, cluster=target.cluster, transport=transport,
                     service=ServiceControl(transport, inv.service, inv.timeouts.stop_s + inv.timeouts.start_s),
                     journal=journal, emit=emit, tuner=tuner, abort=abort)
    failed = False
    try:
        with abort_on_signals(abort, emit):
            Engine(ctx).run()
    except OrchestratorError as exc:
        failed = journal.state is RunState.FAILED
        exc.journal = journal  # type: ignore[attr-defined]  # the CLI reports the run that failed
        raise
    finally:
        # A failed run keeps the lock: its temporary settings are still in force until `resume`.
        if not failed:
            lock.release()
        transport.close()
    return journal


def start(target: Target, plan: Plan, emit: EventSink, prelude: dict[str, Any] | None = None) -> Journal:
    """Preflight, then a new run. Nothing is changed when preflight fails."""
    problems = plan.all_problems()
    previous = unfinished_run(target.inv.cluster.name)
    if previous is not None:
        problems.append(f"run {previous.run_id} on this cluster is {previous.state.value} and not finished: "
                        f"`orchestrate resume --cluster {target.inv.cluster.name}` finishes it")
    transport = make_transport(target.inv)
    problems += check_hosts(target.inv, transport)
    holder = target.cluster.read_lock(LOCK_INDEX, target.inv.cluster.name)
    if holder is not None:
        problems.append(f"another run holds this cluster's lock: run {holder.get('run_id')} on {holder.get('host')}")
    if problems:
        transport.close()
        raise PreflightFailed(problems)
    journal = new_journal(target, plan, prelude)
    emit(Event("run", f"run {journal.run_id} started: {len(plan.batches)} batches, journal {journal.path}",
               data={"run_id": journal.run_id, "journal": str(journal.path)}))
    return execute(target, journal, transport, emit, takeover=False)


def resume(target: Target, emit: EventSink, run_id: str | None = None) -> Journal:
    journal = journals.latest(target.inv.cluster.name, run_id)
    if journal is None:
        raise JournalError(f"no run to resume for cluster {target.inv.cluster.name}")
    if journal.state is RunState.SUCCEEDED:
        raise JournalError(f"run {journal.run_id} already succeeded; nothing to resume")
    transport = make_transport(target.inv)
    problems = check_hosts(target.inv, transport)
    if problems:
        transport.close()
        raise PreflightFailed(problems)
    done = sum(1 for b in journal.batches if b.state == "done")
    emit(Event("run", f"resuming run {journal.run_id} ({journal.state.value}): {done} of {len(journal.batches)} "
                      "batches done", data={"run_id": journal.run_id, "journal": str(journal.path)}))
    return execute(target, journal, transport, emit, takeover=True)


def status(target: Target) -> dict[str, Any]:
    health = target.cluster.health_summary()
    last: Journal | None = None
    last_error: str | None = None
    try:
        last = journals.latest(target.inv.cluster.name)
    except JournalError as exc:
        last_error = str(exc)
    out: dict[str, Any] = {
        "cluster": target.inv.cluster.name,
        "product": target.inv.cluster.product,
        "health": health,
        "lock": target.cluster.read_lock(LOCK_INDEX, target.inv.cluster.name),
        "run": None,
        "temporary_settings": [],
    }
    if last_error:
        out["journal_error"] = last_error
    if last is not None:
        out["run"] = {"run_id": last.run_id, "state": last.state.value, "message": last.message,
                      "journal": str(last.path), "created": last.created, "finished": last.finished,
                      "batches": [{"number": b.number, "label": b.label, "state": b.state, "steps_done": b.steps_done}
                                  for b in last.batches],
                      "nodes": {n: {"phase": r.phase, "restarted": r.restarted} for n, r in last.nodes.items()}}
        pending = last.pending_undo()
        live = target.cluster.live_settings([(u.scope, u.key) for u in pending])
        out["temporary_settings"] = [{"key": u.key, "scope": u.scope, "live": value, "restore_to": u.before}
                                     for u, value in zip(pending, live, strict=True)]
    return out


def summary(journal: Journal) -> dict[str, Any]:
    """The last line of `--json`: what a pipeline needs to act on the run."""
    end = journal.finished or time.time()
    return {
        "result": journal.state.value if journal.state is not RunState.RUNNING else "failed",
        "cluster": journal.cluster,
        "product": journal.plan.get("product", "elasticsearch"),
        "run_id": journal.run_id,
        "mode": journal.mode,
        "message": journal.message,
        "journal": str(journal.path),
        "batches": [{"number": b.number, "label": b.label, "nodes": b.nodes, "state": b.state,
                     "duration_s": round((b.finished or end) - b.started, 1) if b.started else None}
                    for b in journal.batches],
        "nodes": [{"name": r.name, "restarted": r.restarted, "phases": r.phases, "recovery": r.recovery}
                  for r in journal.nodes.values()],
        "duration_s": round(end - journal.created, 1),
        "cluster_calls": journal.es_calls,
        **({"es_calls": journal.es_calls} if journal.plan.get("product", "elasticsearch") == "elasticsearch" else {}),
        **({"forcemerge": journal.prelude["forcemerge"].get("report")} if "forcemerge" in journal.prelude else {}),
    }
