"""Running a restart: preflight, journal, lock, stop requests, then the engine. Also resume.

Preflight reads and checks everything before the first change: the plan is safe, every node is
matched, every host answers over SSH with a verified key, no other run holds the cluster.
`resume` runs the journal's recorded spec (procedure, options, plan), never today's files, and
says what changed in the inventory since the run started.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from datetime import datetime
from types import FrameType
from typing import Any

from orchestrator.config.maintenance import when
from orchestrator.config.model import Inventory, NodeEntry
from orchestrator.config.playbook import Playbook
from orchestrator.errors import Aborted, JournalError, OrchestratorError, OutsideWindow, PreflightFailed
from orchestrator.forcemerge.prelude import PRELUDES
from orchestrator.hosts.service import ServiceControl
from orchestrator.hosts.transport import Transport
from orchestrator.restart import journal as journals
from orchestrator.restart import lock
from orchestrator.restart.adapter import ClusterAdapter
from orchestrator.restart.context import AbortFlag, RunContext
from orchestrator.restart.deferral import Deferral, Deferred
from orchestrator.restart.engine import Engine
from orchestrator.restart.events import Event, EventSink
from orchestrator.restart.install import install_problems
from orchestrator.restart.journal import (
    BatchRecord,
    BatchState,
    Journal,
    NodeRecord,
    RunFailed,
    RunOptions,
    RunSpec,
    RunState,
)
from orchestrator.restart.journal_copy import JournalCopy
from orchestrator.restart.lock import RunLock, Trouble, read_holder
from orchestrator.restart.phases import Phase, reached
from orchestrator.restart.plan import Plan
from orchestrator.restart.procedure import resolve
from orchestrator.restart.product import Product
from orchestrator.restart.reboot import reboot_problems
from orchestrator.restart.steps import put_back
from orchestrator.runs.audit import audit_log
from orchestrator.runs.host_reads import in_background
from orchestrator.runs.metrics import metrics_sink
from orchestrator.runs.take_over import ahead_of, cluster_copy, over_elsewhere, unfinished_elsewhere
from orchestrator.runs.take_over import take_over as take_over_run
from orchestrator.runs.target import Target, transport_of
from orchestrator.tuning.apply import make_tuner
from orchestrator.units import counted


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


class EarlyHostCheck:
    """The SSH preflight begun while the plan is made: each host's connection opens, its key is
    verified and `true` runs, in the background (read-only: beginning before the plan is checked
    changes nothing). `start` takes its answer and its open connections where it would have made
    them, so an error in the SSH settings is said there, after the cluster's own errors, as before.
    A daemon thread: a run refused before it starts never waits for hosts that do not answer."""

    def __init__(self, inv: Inventory) -> None:
        self._made = in_background(lambda: transport_of(inv), "host-check")
        self._checked = in_background(lambda: self._check(inv), "host-check")

    def _check(self, inv: Inventory) -> tuple[Transport, list[str]]:
        transport = self._made.result()
        return transport, check_hosts(inv, transport)

    def transport(self) -> Transport:
        """The run's transport, as soon as it is made (before its check ends): the plan's host reads
        share its connections. Raises what making it raised."""
        return self._made.result()

    def result(self) -> tuple[Transport, list[str]]:
        """The run's transport and the hosts' problems; raises what making the transport raised."""
        return self._checked.result()

    def close(self) -> None:
        """Close its connections, now or when the check ends (a run that started has closed them already)."""
        def close_taken(done: Future[tuple[Transport, list[str]]]) -> None:
            if done.exception() is None:
                done.result()[0].close()

        self._checked.add_done_callback(close_taken)


@contextmanager
def hosts_checked_early(inv: Inventory, begin: bool = True) -> Iterator[EarlyHostCheck | None]:
    """``begin``: only where no question is asked between plan and run (connections left open
    while an operator reads the plan could be closed by the hosts in the meantime)."""
    early = EarlyHostCheck(inv) if begin else None
    try:
        yield early
    finally:
        if early is not None:
            early.close()


def sudo_rules_problems(inv: Inventory, product: Product[Any, Any]) -> list[str]:
    """Exact sudo rules are enough only for a product whose commands on the hosts need no root shell."""
    if inv.ssh.sudo and inv.ssh.sudo_rules == "commands" and not product.exact_sudo_rules:
        return [f"ssh.sudo_rules `commands` is not available for {product.name} yet (its commands on "
                "the hosts need a root shell): use `shell`"]
    return []


def latest_run(cluster: str) -> Journal | None:
    try:
        return journals.latest(cluster)
    except JournalError:
        return None


def unfinished_run(cluster: str) -> Journal | None:
    last = latest_run(cluster)
    return last if last is not None and not last.state.finished else None


def other_runs(target: Target) -> list[str]:
    """Runs that forbid a new one: an unfinished run of this cluster, or another run's lock. Said first:
    while another run is restarting nodes, the plan's complaints (a node away) are its doing."""
    problems = []
    previous = unfinished_run(target.name)
    copy = cluster_copy(target)
    if previous is not None and over_elsewhere(copy, previous) is None:
        problems.append(f"run {previous.run_id} on this cluster is {previous.state.value} and not finished: "
                        f"`orchestrate resume --cluster {target.name}` finishes it, or `orchestrate abandon "
                        f"--cluster {target.name}` gives it up (its temporary settings put back)")
    elsewhere = unfinished_elsewhere(copy, latest_run(target.name), target.name)
    if elsewhere is not None:
        problems.append(f"run {elsewhere.run_id}, last saved by {elsewhere.host} (the cluster's copy of its journal), "
                        f"is {elsewhere.raw.get('state')} and not finished: `orchestrate resume --cluster "
                        f"{target.name} --take-over` finishes it here, or `orchestrate abandon --cluster {target.name} "
                        "--take-over` gives it up (its temporary settings put back)")
    holder = read_holder(target.cluster)
    if holder is not None:
        problems.append(f"another run holds this cluster's lock: {holder.describe()}")
    return problems


def new_journal(target: Target, plan: Plan, options: RunOptions, prelude: dict[str, dict[str, Any]],
                origin: str = "") -> Journal:
    spec = RunSpec(mode=plan.mode, options=options, playbook=target.playbook.model_dump(mode="json"),
                   inventory_path=str(target.inventory_path), inventory=target.inv.model_dump(mode="json"),
                   plan=plan, prelude=prelude)
    batches = [BatchRecord(number=b.number, label=b.label, nodes=list(b.nodes)) for b in plan.batches]
    nodes = {n: NodeRecord(name=n, batch=b.number) for b in plan.batches for n in b.nodes}
    return journals.create(Journal(run_id=journals.new_run_id(), cluster=target.name, spec=spec, batches=batches,
                                   nodes=nodes, origin=origin))


@contextmanager
def abort_on_signals(abort: AbortFlag, emit: EventSink) -> Iterator[None]:
    """Ctrl-C and SIGTERM ask for a stop at the next safe point; a second one is refused, loudly.
    Only the main thread can handle signals: in a worker thread (a scheduler's task) the caller's
    AbortFlag is the way to stop."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

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


def execute(target: Target, journal: Journal, playbook: Playbook, transport: Transport, emit: EventSink,
            takeover: bool, abort: AbortFlag | None = None, accept_unavailable: tuple[str, ...] = (),
            stop_after: int = 0, deferral: Deferral | None = None) -> Journal:
    """Run (or resume) the journal's run under its lock, everything it does written to its audit log.
    With a ``deferral``, the run may return deferred (`journal.state`), its lock kept for its trigger."""
    with audit_log(journal, emit, "resume" if takeover else "start") as logged_emit:
        return _execute(target, journal, playbook, transport, metrics_sink(journal, target.inv.metrics, logged_emit),
                        takeover, abort, accept_unavailable, stop_after, deferral)


def lock_trouble(emit: EventSink, abort: AbortFlag, lock: RunLock) -> Trouble:
    """A renewal's trouble, said as it happens (the lock's `status` says it too); past RENEWAL_TROUBLE_S, the
    run stops at its next safe point (every node back, every setting restored), which `resume` continues. A lock
    taken over by another machine's resume of the run: this process stops at once, changing nothing more."""
    def told(said: str, stop: bool) -> None:
        emit(Event("warning", said, data={"lock_renewal": "stopping" if stop else "failing"}))
        if lock.lost:
            abort.request("its lock was taken over by another machine's resume of the run", hands_off=True)
        elif stop and not abort.requested:
            abort.request("its lock could not be renewed: stopping before another run could take it as stale")
    return told


def _execute(target: Target, journal: Journal, playbook: Playbook, transport: Transport, emit: EventSink,
             takeover: bool, abort: AbortFlag | None, accept_unavailable: tuple[str, ...],
             stop_after: int, deferral: Deferral | None) -> Journal:
    inv = target.inv
    lock = RunLock(target.cluster, inv.cluster.name, journal.run_id, stale_s=inv.timeouts.lock_stale_s)
    lock.acquire(takeover=takeover)
    # Under the lock, the run's journal is copied into the cluster: any operator there sees it and can take it over.
    journal.copied_to(JournalCopy(target.cluster, journal.run_id, target.cluster.cluster_identity(),
                                  still_held=lock.still_held))
    if accept_unavailable:  # under the lock: the journal has one writer
        journal.accept_unavailable(accept_unavailable)
        emit(Event("run", "accepted for the rest of the run: indices matching "
                          f"{', '.join(journal.spec.options.allow_unavailable)} may be unavailable while their "
                          "node restarts"))
    abort = abort or AbortFlag()
    tuner = make_tuner(inv, transport)
    ctx = RunContext(inv=inv, cluster=target.cluster, transport=transport,
                     service=ServiceControl(transport, inv.service, inv.timeouts.stop_s + inv.timeouts.start_s),
                     journal=journal, emit=emit, tuner=tuner, abort=abort, deferral=deferral)
    failed = True
    try:
        lock.keep_renewed(trouble=lock_trouble(emit, abort, lock))  # stopped in `finally`, whatever happens
        with abort_on_signals(abort, emit):
            procedure = resolve(playbook, target.product)
            while True:
                try:
                    Engine(ctx, target.product, procedure, PRELUDES, stop_after).run()
                    break
                except OutsideWindow as closed:  # stopped with every node back and every setting restored
                    # A scheduler's task (a deferral) leaves the hold to its scheduler: it defers until the opening.
                    if inv.maintenance.outside != "wait" or closed.opens is None or deferral is not None:
                        raise
                    hold_until_the_window_opens(ctx, closed.opens)
                    journal.resumed([])  # goes on as `resume` would, under the lock it kept
        failed = False
    except Deferred:
        failed = False  # the journal says deferred; the lock stays, renewed by the trigger
    except OrchestratorError as exc:
        failed = journal.state is RunState.FAILED
        raise RunFailed(exc, journal) from exc
    finally:
        # A failed run keeps the lock: its temporary settings are still in force until `resume`.
        if journal.state is RunState.DEFERRED:
            lock.mark_deferred()
        elif failed:
            lock.mark_failed()
        else:
            lock.release()
        if tuner is not None:
            tuner.close()
        transport.close()
    return journal


HOLD_SAID_EVERY_S = 600.0  # a run held for its window says so this often (status says it from the journal)


def hold_until_the_window_opens(ctx: RunContext[Any], opens: datetime) -> None:
    """Outside its maintenance window the run holds, its lock kept and renewed, every node back and every setting
    restored, until the window opens; Ctrl-C or SIGTERM ends the hold (`resume` goes on later)."""
    clock = ctx.clock
    said_at = -HOLD_SAID_EVERY_S
    while (left := (opens - clock.wall()).total_seconds()) > 0:
        if ctx.abort.requested:
            raise Aborted(f"{ctx.abort.stopped()} while held for the maintenance window",
                          resume="goes on")
        if clock.monotonic() - said_at >= HOLD_SAID_EVERY_S:
            said_at = clock.monotonic()
            ctx.emit(Event("wait", f"held outside the maintenance window, every node back and every setting "
                                   f"restored: going on when it opens, {when(opens, clock.wall())}",
                           data={"window_opens": opens.isoformat()}))
        clock.sleep(min(left, 5.0))
    ctx.emit(Event("run", "the maintenance window is open: going on"))


def start(target: Target, plan: Plan, options: RunOptions, emit: EventSink,
          prelude: dict[str, dict[str, Any]] | None = None, abort: AbortFlag | None = None,
          stop_after: int = 0, early: EarlyHostCheck | None = None, deferral: Deferral | None = None,
          origin: str = "") -> Journal:
    """Preflight, then a new run. Nothing is changed when preflight fails. ``stop_after``: stop (every
    setting restored, StoppedAfter) once that many batches are done; `resume` goes on. ``early``: the
    SSH preflight, begun while the plan was made."""
    problems = other_runs(target) + plan.all_problems()
    if early is not None:
        transport, hosts = early.result()
    else:
        transport = transport_of(target.inv)
        hosts = check_hosts(target.inv, transport)
    problems += sudo_rules_problems(target.inv, target.product) + hosts
    planned = [target.inv.node(n) for b in plan.batches for n in b.nodes]
    if options.upgrade_to and not problems:  # each host can install the version (read-only checks)
        problems += install_problems(target.inv, options.upgrade_to, transport, planned)
    if (options.reboot or options.reboot_nodes) and not problems:
        problems += reboot_problems(target.inv, transport, [n for n in planned if options.reboots(n.name)])
    if problems:
        transport.close()
        raise PreflightFailed(problems)
    journal = new_journal(target, plan, options, prelude or {}, origin)
    emit(Event("run", f"run {journal.run_id} started: {counted(len(plan.batches), 'batch')}, journal {journal.path}",
               data={"run_id": journal.run_id, "journal": str(journal.path)}))
    return execute(target, journal, target.playbook, transport, emit, takeover=False, abort=abort,
                   stop_after=stop_after, deferral=deferral)


# How a run reports (its metrics outputs, which the command line may set), when it may go on (its maintenance
# windows, `--until`) and how it paces its recoveries to searchers (the search watch and its latency budget, whose
# every move is undone) are not what it does: each invocation takes them as given.
NOT_A_CHANGE = {"metrics", "maintenance", "search"}


def inventory_changes(recorded: Any, current: Any, where: str = "") -> list[str]:
    """What differs between two inventories (as dumped), one line per changed key."""
    if isinstance(recorded, dict) and isinstance(current, dict):
        out = []
        for key in sorted((set(recorded) | set(current)) - (NOT_A_CHANGE if not where else set()), key=str):
            out += inventory_changes(recorded.get(key), current.get(key), f"{where}.{key}" if where else str(key))
        return out
    return [] if recorded == current else [f"{where}: {recorded!r} -> {current!r}"]


def inventory_changes_since(target: Target, run_id: str | None = None) -> list[str]:
    """What changed in the inventory since the run `resume` would continue started (none without a run)."""
    try:
        journal = journals.latest(target.name, run_id)
    except JournalError:
        return []  # resume itself says what is wrong with the journal
    return [] if journal is None else inventory_changes(journal.spec.inventory, target.inv.model_dump(mode="json"))


def resume(target: Target, emit: EventSink, run_id: str | None = None, accept_changes: bool = False,
           abort: AbortFlag | None = None, accept_unavailable: tuple[str, ...] = (), stop_after: int = 0,
           deferring: bool = False, take_over: bool = False) -> Journal:
    """Finish an interrupted or failed run with its recorded procedure, options and plan (plus any index
    patterns now accepted as unavailable, recorded in it). ``deferring``: it may defer again (a
    scheduler's task); a deferred run's wait, handed back by its trigger, is waited here. ``take_over``: the
    run is the one the cluster holds a copy of, started on another machine (runs/take_over.py)."""
    if take_over:
        run_id, said = take_over_run(target, run_id)
        emit(Event("run", said, data={"run_id": run_id, "take_over": True}))
    journal = journals.latest(target.name, run_id)
    if journal is None:
        raise JournalError(f"no run to resume for cluster {target.name}")
    if journal.state.finished:
        raise JournalError(f"run {journal.run_id} is {journal.state.value}; nothing to resume")
    if journal.cluster != target.name:
        raise JournalError(f"run {journal.run_id} belongs to cluster {journal.cluster}, not {target.name}")
    if journal.product != target.product.name:
        raise JournalError(f"run {journal.run_id} is a {journal.product} run; cluster {target.name} is now "
                           f"{target.product.name}. Check the inventory.")
    copy = None if take_over else cluster_copy(target)
    if (over := over_elsewhere(copy, journal)) is not None:
        raise JournalError(f"{over} (the cluster's copy of its journal says so); nothing to resume")
    if copy is not None and copy.run_id == journal.run_id and ahead_of(copy, journal):
        # The run went on from another machine after this one lost it: never resumed from a journal behind it.
        taken, said = take_over_run(target, journal.run_id)
        emit(Event("run", f"this machine's journal of run {taken} is behind the cluster's copy: {said}",
                   data={"run_id": taken, "take_over": True}))
        journal = journals.latest(target.name, taken)
        if journal is None:
            raise JournalError(f"no run {taken} for cluster {target.name}")
    changed = inventory_changes(journal.spec.inventory, target.inv.model_dump(mode="json"))
    if changed and not accept_changes:
        raise PreflightFailed([f"the inventory changed since run {journal.run_id} started: " + "; ".join(changed[:10])
                               + (f" and {len(changed) - 10} more" if len(changed) > 10 else "")
                               + ". Check it; `orchestrate resume --yes` resumes with it (the run's own procedure, "
                               "options and plan are kept as recorded)"])
    transport = transport_of(target.inv)
    problems = check_hosts(target.inv, transport)
    if problems:
        transport.close()
        raise PreflightFailed(problems)
    journal.resumed(changed)
    done = sum(1 for b in journal.batches if b.state == BatchState.DONE)
    emit(Event("run", f"resuming run {journal.run_id} ({journal.state.value}): {done} of {len(journal.batches)} "
                      "batches done" + (f"; inventory changed: {'; '.join(changed[:3])}" if changed else ""),
               data={"run_id": journal.run_id, "journal": str(journal.path)}))
    playbook = Playbook.model_validate(journal.spec.playbook)
    deferral = Deferral(back_for=journal.deferred_wait) if deferring else None
    return execute(target, journal, playbook, transport, emit, takeover=True, abort=abort,
                   accept_unavailable=accept_unavailable, stop_after=stop_after, deferral=deferral)


def abandon_run(journal: Journal, cluster: ClusterAdapter[Any], name: str, emit: EventSink) -> Journal:
    """Give up ``journal``'s run: every temporary setting it still holds in force is put back (its undo
    records), it is marked abandoned (never resumed), and its lock released, so that a new run may start.
    Refused while the run is alive, here or on another machine (its lock is live). Host tuning is kept: it
    is no temporary setting. A node the run stopped and did not bring back is said, not started."""
    if journal.state.finished:
        raise JournalError(f"run {journal.run_id} is {journal.state.value}: nothing to abandon")
    lock = RunLock(cluster, name, journal.run_id)
    lock.acquire(takeover=True)  # RunLocked while the run lives (or another run holds the lock)
    # Seen abandoned from every machine.
    journal.copied_to(JournalCopy(cluster, journal.run_id, cluster.cluster_identity(), still_held=lock.still_held))
    try:
        put_back(journal, cluster, emit)
        down = [n for n, r in journal.nodes.items()
                if reached(r.phase, Phase.STOPPING) and not reached(r.phase, Phase.JOINED)]
        was = f"{journal.state.value}: {journal.said(next_try=None) or 'no message'}"  # it will not be resumed
        message = f"abandoned (was {was}); temporary settings put back"
        if down:
            message += (f"; NOT BACK: {', '.join(down)} (stopped by the run and not started again: start "
                        f"{'it' if len(down) == 1 else 'them'} yourself)")
        journal.set_state(RunState.ABANDONED, message)
        emit(Event("run", f"run {journal.run_id} {message}", data={"result": RunState.ABANDONED.value}))
    finally:
        lock.release()
    return journal


def request_pause(target: Target, reason: str) -> bool:
    """`orchestrate pause`: False when a pause is already asked."""
    return lock.request_pause(target.cluster, reason)


def clear_pause(target: Target) -> bool:
    """`orchestrate continue`: False when no pause was asked."""
    if lock.pause_request(target.cluster) is None:
        return False
    lock.clear_pause(target.cluster)
    return True
