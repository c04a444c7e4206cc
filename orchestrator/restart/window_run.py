"""The window (issue 57): several nodes away at once, within the run's budget, each admitted on a live proof.

A sliding window, not barriers: a node joins as soon as the window has room and its product proves, from a
live read of the node's own part of the cluster, that it may be away beside the nodes already in it
(`Product.window_check`: for the shard products, every copy it holds keeps a STARTED copy on a node outside
the window). It leaves once its batch is done: back as a new process, its own copies recovered. The window
opens 1, 2, 4, ... up to the budget (`budget.ramp`), each step only after as many nodes left it clean.

Each node in the window goes through its batch's steps in a thread of its own; this loop alone admits, so
that every proof sees every node admitted before it. A node is in the window from its admission (its batch
journaled running) to its batch's end, so the window is the journal's running batches, after a resume too:
those are taken back first, whatever the room. On a failure, a stop request or a pause, nothing more is
admitted and the nodes in the window are brought back and recovered first.

A scheduler's task (a deferral) admits in its worker, since each admission is a live proof, and defers once:
when nothing is left to admit, the waits of the nodes away defer at their next look, and the run leaves the
window's draining to the trigger as one wait. Back from it, the rest is waited in the worker.
"""

from __future__ import annotations

import itertools
import threading
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import replace
from typing import Any, Protocol

from orchestrator.errors import (
    Aborted,
    ClusterError,
    IncompleteAnswer,
    OutsideWindow,
    StoppedAfter,
    UnsafeToProceed,
    WaitTimeout,
)
from orchestrator.restart.budget import ramp, room_of
from orchestrator.restart.context import RunContext
from orchestrator.restart.deferral import Deferral, Deferred, Wait, drained
from orchestrator.restart.events import Event
from orchestrator.restart.journal import BatchRecord, BatchState, Journal
from orchestrator.restart.lock import pause_request, request_pause
from orchestrator.retry import wait_until
from orchestrator.units import counted

MAX_LOOKS_PER_TURN = 12  # candidates proven per turn of the loop, from one read of their part (bench_window --fake)
PROOF_WAIT_S = 30.0  # how long the first node's proof may fail to be read (a busy node) before the run stops


class NotNow(Exception):
    """A window's last look refused the stop (the window changed since the node's admission): the batch is back
    to pending, nothing of it stopped, and waits to be proven again."""


class WindowedEngine(Protocol):
    """What the window asks of the engine (restart/engine.py), which runs each batch's steps."""

    ctx: RunContext[Any]
    product: Any
    stop_after: int
    at_once: int

    def read_ahead(self, batch: BatchRecord) -> None: ...
    def wait_until_safe(self, batch: BatchRecord) -> None: ...
    def begin(self, batch: BatchRecord) -> None: ...
    def work_through(self, batch: BatchRecord) -> None: ...
    def honour_pause(self, batch: BatchRecord) -> None: ...
    def within_window(self, batch: BatchRecord) -> None: ...
    def search_breach(self) -> str | None: ...


def in_the_window(journal: Journal, batch: BatchRecord | None = None) -> list[str]:
    """The nodes in the window (its running batches'), ``batch``'s own left out."""
    return [n for b in journal.batches if b.state == BatchState.RUNNING and b is not batch for n in b.nodes]


class WindowRun:
    def __init__(self, engine: WindowedEngine) -> None:
        # A deferring run's waits are held in the worker while nodes are admitted (each admission a live proof
        # only the run makes), and defer once nothing is left to admit; back from that one deferral, the run
        # waits the rest itself (docs/pipelines.md).
        asked = engine.ctx.deferral
        self.draining = threading.Event() if asked is not None and asked.back_for is None else None
        engine.ctx = replace(engine.ctx, deferral=Deferral(draining=self.draining) if self.draining else None)
        self.engine = engine
        self.ctx = engine.ctx
        self.journal = self.ctx.journal
        self.room = room_of(self.ctx.options.max_unavailable, sum(len(b.nodes) for b in self.journal.batches))
        self.under_way: dict[Future[None], BatchRecord] = {}
        self.failure: BaseException | None = None
        self.deferred: list[Wait] = []  # the waits the nodes away left to the trigger, the window drained
        self.done_here = 0  # batches this invocation finished (for --stop-after)
        self.breach: str | None = None  # the search latency budget's sustained breach, while it closes the window
        self.refused: dict[int, str] = {}  # why each candidate waits, said once per change
        # What spares reads: the window's version (one more at each admission and each leave), the version each
        # candidate was last refused at (not proven again until the window changes), and the nodes each one
        # shares data with, from its last proof (not proven again while one of them is in the window).
        self.version = 0
        self.refused_at: dict[int, int] = {}
        self.partners: dict[int, frozenset[str]] = {}

    @property
    def left_clean(self) -> int:
        """Batches done and taken in (a batch whose thread has not yet been heard from is still in the window:
        its end may ask a canary's pause)."""
        taken = {b.number for b in self.under_way.values()}
        return sum(1 for b in self.journal.batches if b.state == BatchState.DONE and b.number not in taken)

    def pending(self) -> list[BatchRecord]:
        """The batches not yet admitted (one sent back by its last look is, once its thread has ended)."""
        taken = {b.number for b in self.under_way.values()}
        return [b for b in self.journal.batches if b.state == BatchState.PENDING and b.number not in taken]

    def run(self) -> None:
        ctx = self.ctx
        ctx.emit(Event("run", f"window: up to {counted(self.room, 'node')} away at once (--max-unavailable "
                              f"{ctx.options.max_unavailable}), opened 1, 2, 4, ... as nodes leave it clean",
                       data={"window": self.room}))
        with ThreadPoolExecutor(max_workers=self.room + len(in_the_window(self.journal)),
                                thread_name_prefix="window") as pool:
            self.submit = pool.submit
            for batch in [b for b in self.journal.batches if b.state == BatchState.RUNNING]:
                self.launch(batch)  # in the window when the run stopped: its nodes come back first
            while self.under_way or (self.pending() and not self.stopping()):
                self.turn()
        self.finish()

    def stopping(self) -> bool:
        return (self.failure is not None or self.ctx.abort.requested or bool(self.deferred)
                or bool(self.engine.stop_after and self.done_here >= self.engine.stop_after))

    def turn(self) -> None:
        """One turn: admit who may join now; else wait for a node to leave the window (or a poll's time)."""
        if not self.stopping() and self.pending():
            if pause_request(self.ctx.cluster) is not None:
                if not self.under_way:  # a pause holds the run with every node back
                    self.engine.honour_pause(self.pending()[0])
                    return
            elif self.admit():
                return
        if self.draining is not None and self.under_way and not self.pending() and not self.stopping():
            self.draining.set()  # nothing left to admit: the nodes away defer at their next look
        self.wait_for_one()

    def admit(self) -> bool:
        """Admit the first pending node (in the plan's order, a few looked at) that may join now."""
        room = ramp(self.room, self.left_clean)
        self.engine.at_once = room
        if len(self.under_way) >= room:
            return False
        try:
            self.engine.within_window(self.pending()[0])  # a node begins only if it ends before the window closes
        except OutsideWindow:
            if not self.under_way:
                raise
            return False  # the nodes away come back first; the empty window's turn then stops the run here
        if not self.under_way:
            # An empty window: the gate of a run one node at a time (healthy samples in a row, a give-up time),
            # so that a window opens only on a cluster as healthy as a node's restart needs.
            batch = self.pending()[0]
            self.engine.read_ahead(batch)
            self.engine.wait_until_safe(batch)
            proven = self.proven_with_nobody_away(batch)
            if not proven:  # the gate passed, the proof did not: said, as a last look's refusal is
                raise UnsafeToProceed(f"not starting batch {batch.number} ({batch.label}): "
                                      f"{self.refused[batch.number]}")
            self.launch(batch)
            return True
        if self.searches_over_budget():
            return False
        window = set(self.window())
        worth = (b for b in self.pending()
                 if self.refused_at.get(b.number) != self.version and not self.partners.get(b.number, set()) & window)
        looked_at = list(itertools.islice(worth, MAX_LOOKS_PER_TURN))
        if not looked_at:
            return False
        try:
            # One read proves the turn's candidates together: each is then judged against the window as it
            # stands, those admitted before it in this turn included (a read per candidate cost a few requests
            # each, most of them refused at thousands of nodes). Its last look proves it alone again.
            snapshot = self.snapshot_of(looked_at)
        except IncompleteAnswer as exc:
            if len(looked_at) == 1:
                return self.not_read(looked_at, exc)
            # A node's own answer missing (a candidate gone from the cluster, say) holds no other back: each is
            # read alone this turn, as a single candidate's proof is.
            snapshot = None
        except ClusterError as exc:
            return self.not_read(looked_at, exc)
        admitted = False
        for batch in looked_at:
            if len(self.under_way) >= room:
                break
            try:
                proven = self.proven(batch, snapshot)
            except ClusterError as exc:
                self.not_read([batch], exc)
                continue
            if proven:
                self.engine.read_ahead(batch)
                self.launch(batch)
                admitted = True
            else:
                self.refused_at[batch.number] = self.version
        return admitted

    def not_read(self, batches: list[BatchRecord], exc: ClusterError) -> bool:
        """A read that failed proves nothing, either way: none of ``batches`` is admitted now, and each is asked
        again at the next turn (not refused until the window changes). The nodes away carry on meanwhile."""
        self.ctx.emit(Event("wait", f"{', '.join(f'batch {b.number} ({b.label})' for b in batches)} not admitted "
                                    f"now: the proof could not be read ({exc}); asked again in a moment",
                            batch=batches[0].number))
        return False

    def proven_with_nobody_away(self, batch: BatchRecord) -> bool:
        """The proof of the first node of an empty window. A read that fails for a moment (a busy node's stats, a
        master slow to answer) is asked again, as a node's copies are before its stop: with nobody away, waiting
        costs nothing. One that still fails after `PROOF_WAIT_S`, or fails for good, stops the run here."""
        ctx = self.ctx
        said: set[str] = set()

        def once_per_reason(seen: str) -> None:
            if seen not in said:
                said.add(seen)
                ctx.emit(Event("wait", f"batch {batch.number} ({batch.label}) not started yet: its proof could "
                                       f"not be read ({seen}); asked again in a moment", batch=batch.number))

        try:
            return wait_until(lambda seen: self.proven(batch), what=f"the proof of batch {batch.number}",
                              timeout_s=PROOF_WAIT_S, interval_s=ctx.inv.timeouts.poll_interval_s, clock=ctx.clock,
                              should_stop=lambda: ctx.abort.requested, on_miss=once_per_reason)
        except (ClusterError, WaitTimeout) as exc:
            raise UnsafeToProceed(f"not starting batch {batch.number} ({batch.label}): its proof could not "
                                  f"be read: {exc}") from exc

    def searches_over_budget(self) -> bool:
        """A sustained breach of the search latency budget closes the window: no node joins those away until
        searches are back within it (the empty window still takes one node at a time: a breach never stalls a
        run). Said once when it closes and once when it opens again, and kept in the journal for `status`."""
        breach = self.engine.search_breach()
        if (breach is None) != (self.breach is None):
            self.ctx.journal.record_search_gate(breach)
            self.ctx.emit(Event("wait", f"window closed: {breach}; no node joins those away until searches are back "
                                        "within budget (one node at a time meanwhile)" if breach else
                                "searches back within budget: the window opens again"))
        self.breach = breach
        return breach is not None

    def window(self) -> list[str]:
        """The window as this loop admitted it: a batch done but not yet taken in is still in it here, so that a
        node that must wait for an empty window (a master) is admitted only by the empty window's gate, in its
        order."""
        return [n for b in self.under_way.values() for n in b.nodes]

    def snapshot_of(self, batches: list[BatchRecord]) -> Any:
        """A live read of these batches' nodes' part of the cluster, with the window as it stands."""
        return self.ctx.cluster.gate_snapshot(self.journal.plan, [n for b in batches for n in b.nodes], proof=True,
                                              window=self.window())

    def proven(self, batch: BatchRecord, snapshot: Any = None) -> bool:
        """The product's proof, from a live read of the node's part (``snapshot``, read with the window as it
        stands, else read now), that it may join the window now."""
        ctx = self.ctx
        window = self.window()
        snapshot = self.snapshot_of([batch]) if snapshot is None else snapshot
        problems: list[str] = []
        for name in batch.nodes:
            problems += self.engine.product.window_check(snapshot, self.journal.plan, ctx.inv, name, window,
                                                         ctx.options)
            self.partners[batch.number] = self.engine.product.window_partners(snapshot, self.journal.plan, name)
        said = " ".join(problems)
        if problems and self.refused.get(batch.number) != said:
            self.refused[batch.number] = said
            ctx.emit(Event("wait", f"batch {batch.number} ({batch.label}) waits to join the window of "
                                   f"{', '.join(window) or 'no node'}: {said}", batch=batch.number))
        return not problems

    def launch(self, batch: BatchRecord) -> None:
        self.version += 1
        self.engine.begin(batch)  # journaled running: in the window from now, for every later proof
        self.under_way[self.submit(self.through, batch)] = batch

    def through(self, batch: BatchRecord) -> None:
        self.engine.work_through(batch)

    def wait_for_one(self) -> None:
        """Until a node leaves the window (or a poll's time passes): its end taken in."""
        if not self.under_way:
            self.ctx.clock.sleep(max(self.ctx.inv.timeouts.poll_interval_s, 1.0))
            return
        finished, _ = wait(list(self.under_way), timeout=max(self.ctx.inv.timeouts.poll_interval_s, 1.0),
                           return_when=FIRST_COMPLETED)
        for future in finished:
            batch = self.under_way.pop(future)
            self.version += 1
            error = future.exception()
            if error is None:
                self.left(batch)
            elif isinstance(error, NotNow):
                self.ctx.emit(Event("wait", str(error), batch=batch.number))
            elif isinstance(error, Deferred):
                self.deferred.append(error.wait)
            elif self.failure is None or (isinstance(self.failure, Aborted) and not isinstance(error, Aborted)):
                self.failure = error  # the first failure, before any stop it caused
                if self.draining is not None:
                    self.draining.clear()  # the nodes still away come back in the worker, as any failure's
                if self.under_way:
                    self.ctx.emit(Event("warning", f"batch {batch.number} ({batch.label}) failed: nothing more is "
                                                   f"admitted; bringing back {', '.join(in_the_window(self.journal))} "
                                                   "first", batch=batch.number))

    def left(self, batch: BatchRecord) -> None:
        """A node left the window clean: the canary's pause after the first, the count for --stop-after."""
        self.done_here += 1
        if self.ctx.options.canary and batch.number == 1 and self.pending():
            request_pause(self.ctx.cluster, f"canary: batch 1 ({batch.label}) is done; check it before the rest")

    def finish(self) -> None:
        """After the window drained: the first failure, the stop asked, or --stop-after's end."""
        if self.failure is not None:
            raise self.failure
        if self.deferred:
            raise Deferred(drained(self.deferred))
        if self.ctx.abort.requested:
            raise Aborted(f"{self.ctx.abort.stopped()} at a safe point: every node of the "
                          "window back")
        left = len(self.pending())
        if left and self.engine.stop_after and self.done_here >= self.engine.stop_after:
            raise StoppedAfter(f"stopped after {counted(self.done_here, 'batch')} as asked (--stop-after "
                               f"{self.engine.stop_after}); {counted(left, 'batch')} left")
