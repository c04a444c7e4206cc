"""Watching a deferred run from outside it: what a scheduler's trigger asks, one look at a time.

A deferred run (restart/deferral.py) left one wait to its watcher. Each look reads the run's journal
(is it still deferred, on the same wait?), keeps its lock alive, and asks the cluster whether the wait
is over, through the product's own interface: the nodes' process identity for a rejoin, the product's
gate for a recovery and for the gate before a batch, the pause request for a pause. The run itself
judges again when it comes back: a look that is early costs a little polling in the worker, never a
wrong step.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Literal

from orchestrator.errors import ClusterUnreachable, HostUnreachable, JournalError
from orchestrator.restart import journal as journals
from orchestrator.restart.deferral import Wait
from orchestrator.restart.journal import Journal
from orchestrator.restart.lock import pause_request, renew_deferred, renew_every
from orchestrator.restart.phases import Phase, reached
from orchestrator.runs.target import Target

Verdict = Literal["not_yet", "over", "time_up", "not_deferred"]


@dataclass(frozen=True)
class Look:
    verdict: Verdict
    text: str  # what was seen, for the task's log

    @property
    def hand_back(self) -> bool:
        """Whether the run should come back now (to act, to fail on its timeout, or to say it moved on)."""
        return self.verdict != "not_yet"


class Watcher:
    """Looks at one deferred run's wait; keeps nothing but when it last renewed the run's lock."""

    def __init__(self, target: Target, run_id: str) -> None:
        self.target = target
        self.run_id = run_id
        self.renewed = 0.0

    @property
    def interval_s(self) -> float:
        """How often to look: as often as the run itself polls."""
        return self.target.inv.timeouts.poll_interval_s

    def look(self) -> Look:
        journal = journals.latest(self.target.name, self.run_id)
        if journal is None:
            raise JournalError(f"no run {self.run_id} for cluster {self.target.name}")
        wait = journal.deferred_wait
        if wait is None:
            return Look("not_deferred", f"run {self.run_id} is {journal.state.value}, no longer deferred")
        # As often as the run itself renewed its lock: a tenth of the stale time its inventory sets, 30 s at most.
        if time.time() - self.renewed >= renew_every(self.target.inv.timeouts.lock_stale_s):
            if not renew_deferred(self.target.cluster, self.run_id):
                return Look("not_deferred", f"the lock of {self.target.name} is no longer run {self.run_id}'s "
                                            "deferred lock (taken back or removed)")
            self.renewed = time.time()
        if time.time() >= wait.deadline:
            return Look("time_up", f"{wait.timeout_s:.0f} s are up waiting for {wait.what}")
        try:
            left = self.waiting_on(journal, wait)
        except (ClusterUnreachable, HostUnreachable) as exc:  # a master restarting: looked at again later
            return Look("not_yet", f"transient error: {exc}")
        return Look("not_yet", "; ".join(left)) if left else Look("over", f"{wait.what}: over")

    def waiting_on(self, journal: Journal, wait: Wait) -> list[str]:
        """What the wait still waits for (nothing: over)."""
        cluster, plan = self.target.cluster, journal.plan
        if wait.kind == "pause":
            return ["a pause is asked (`orchestrate continue` ends it)"] if pause_request(cluster) is not None else []
        if wait.kind == "join":
            left = []
            for name in wait.nodes:
                record = journal.nodes[name]
                if reached(record.phase, Phase.JOINED):
                    continue
                identity = cluster.live_identity(plan, name)
                if identity is None:
                    left.append(f"{name} is not in the cluster yet")
                elif identity == record.process_before:
                    left.append(f"{name} is still the old process")
            return left
        snapshot = cluster.gate_snapshot(plan, wait.nodes)
        return self.target.product.gate(snapshot, plan, wait.nodes, journal.spec.options)
