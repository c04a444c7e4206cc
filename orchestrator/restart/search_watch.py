"""What searchers see, watched through a run (issue 59): a thread of its own reads every node's search counters
(one light read, restart/search_figures.py) every `search.interval_s` and says what it saw: a `search` event
(the live view's title, `--json`, the audit log) and the journal's latest figures and baseline (`status`, the
report, the metrics).

The baseline is what searchers saw before the run's first stop: the interval from the run's start is closed
the moment a node of the run is seen stopping (looked at every second), whatever its length. A run resumed
after a stop keeps the baseline it measured, or has none. A read that fails is said once and the interval goes
on to the next read: the watch never fails a run, and never slows it (it reads on its own thread).
"""

from __future__ import annotations

import statistics
import threading
import time
from typing import Any

from orchestrator.config.model import SearchSection
from orchestrator.errors import OrchestratorError
from orchestrator.restart.context import RunContext
from orchestrator.restart.events import Event
from orchestrator.restart.latency_control import LatencyBudget, Throttle, next_step
from orchestrator.restart.phases import Phase
from orchestrator.restart.search_figures import (
    SearchCounters,
    SearchSample,
    baseline_of,
    held_ms,
    held_what,
    sample_between,
)
from orchestrator.restart.steps import set_temporarily
from orchestrator.units import parse_size

LOOK_S = 1.0  # how often the watch looks for the run's first stop (in memory: no read)
# With a latency budget, the first stop waits for this many intervals of baseline: the few probes or reads
# made while the run took its first steps (about 3 s on the sandbox) are too few to hold a run to.
BASELINE_INTERVALS = 3


def size_text(rate: int) -> str:
    """A rate as the cluster setting takes it: whole megabytes where it is, else bytes."""
    return f"{rate // 1024**2}mb" if rate % 1024**2 == 0 else f"{rate}b"


class RecoveryThrottle:
    """The latency budget's hand on the recovery rate (restart/latency_control.py decides): the rate moves
    between the floor and the rate the run raised it to (the undo record's), through the same undo record,
    so that the end of the run, a failure, Ctrl-C or `resume` puts back the value from before the run."""

    def __init__(self, ctx: RunContext, key: str, budget: LatencyBudget, cfg: SearchSection) -> None:
        self.ctx, self.key, self.budget, self.cfg = ctx, key, budget, cfg
        self.floor = parse_size(cfg.recovery_floor)
        self.by_probe = cfg.probe is not None  # the budget holds the probe's time
        self.throttle: Throttle | None = None
        self.said: set[str] = set()
        self.lock = threading.Lock()
        self.closed = False
        # While the slowest node is over the budget: since when (the first interval over it began), the last
        # interval's end, its query time and the budget then. None: within it, or not known.
        self.over: tuple[float, float, float, float] | None = None

    def close(self) -> None:
        """No move from now on (a move under way finishes first): the run is about to put its settings back."""
        with self.lock:
            self.closed = True

    def rate_in_force(self, scope: str, ceiling: int) -> int:
        """Where the controller starts: the rate in force, read once. A resumed run finds the rate its
        predecessor moved (the undo record keeps only the run's own), and must not raise it under a breach;
        a value it cannot read or that is out of its range: the run's own rate."""
        try:
            live = parse_size(str(self.ctx.cluster.live_settings([(scope, self.key)])[0]))
        except (OrchestratorError, ValueError):
            return ceiling
        return live if min(self.floor, ceiling) <= live <= ceiling else ceiling

    def once(self, kind: str, text: str) -> None:
        if text not in self.said:
            self.said.add(text)
            self.ctx.emit(Event(kind, text))

    def after(self, sample: SearchSample, baseline: SearchSample | None) -> None:
        with self.lock:
            self.track(sample, self.budget.limit_ms(baseline, self.by_probe))
            if not self.closed:
                self.move(sample, baseline)

    def track(self, sample: SearchSample, limit: float | None) -> None:
        """Over the budget or within it, and since when: what the window's gate asks (`breach`)."""
        slowest = held_ms(sample, self.by_probe)
        if limit is None or slowest is None:
            return  # nothing measured in this interval: as it was
        if slowest <= limit:
            self.over = None
            return
        since = self.over[0] if self.over is not None else sample.at - sample.seconds
        self.over = (since, sample.at, slowest, limit)

    def breach(self) -> str | None:
        """A sustained breach, said for the operator: the slowest node over the budget for ``sustain_s`` or more,
        at the last interval read. None: within it, or not over it for long enough."""
        with self.lock:
            over = self.over
        if over is None or over[1] - over[0] < self.cfg.sustain_s:
            return None
        since, last, slowest, limit = over
        return (f"searches over budget for {last - since:.0f} s ({held_what(self.by_probe)} {slowest:.1f} ms "
                f"against {limit:.1f} ms)")

    def move(self, sample: SearchSample, baseline: SearchSample | None) -> None:
        record = next((u for u in self.ctx.journal.pending_undo() if u.key == self.key), None)
        if record is None:
            self.once("warning", f"search latency budget {self.budget}: {self.key} was not raised by this run "
                                 "(the cluster's own was as high), so it is left as it is")
            return
        limit = self.budget.limit_ms(baseline, self.by_probe)
        if limit is None:
            self.once("warning", f"search latency budget {self.budget}: no baseline was measured (no search before "
                                 "the first stop), so recovery is not throttled")
            return
        try:
            ceiling = parse_size(str(record.applied))
        except ValueError:
            self.once("warning", f"search latency budget {self.budget}: {self.key}={record.applied} is not a rate "
                                 "it can move, so it is left as it is")
            return
        throttle = self.throttle or Throttle(self.rate_in_force(record.scope, ceiling))
        step = next_step(throttle, sample, limit, min(self.floor, ceiling), ceiling, self.cfg.sustain_s,
                         self.by_probe)
        if step.rate is not None:
            set_temporarily(self.ctx, self.key, record.scope, size_text(throttle.rate), size_text(step.rate), None)
        self.throttle = step.throttle
        if step.said:
            self.ctx.emit(Event("warning" if step.rate is None else "step", step.said,
                                data={"key": self.key, "rate": step.throttle.rate, "limit_ms": limit}))


class SearchWatch:
    def __init__(self, ctx: RunContext, interval_s: float, throttle: RecoveryThrottle | None = None) -> None:
        self.ctx = ctx
        self.interval_s = interval_s
        self.recovery = throttle
        self.done = threading.Event()
        self.thread: threading.Thread | None = None
        self.baseline_samples: list[SearchSample] = []
        known = ctx.journal.search.get("baseline")
        self.baseline: dict[str, Any] | None = known if isinstance(known, dict) else None
        self.measuring_baseline = self.baseline is None and not self.any_stopped()  # else resumed: it is kept
        self.baseline_long_enough = threading.Event()
        self.failed_said = False
        self.probe = ctx.inv.search.probe
        self.probe_every_s = (self.probe.interval_s or interval_s) if self.probe is not None else 0.0
        self.probe_times: list[float] = []  # this interval's probes, in milliseconds
        self.warmed = False  # the first probe warms the connection and the caches: sent, not counted
        self.probe_failed_said = False

    def __enter__(self) -> SearchWatch:
        if self.interval_s > 0:
            first = self.read()
            if first is not None:  # a product without search figures: nothing to watch
                self.thread = threading.Thread(target=self.watch, args=(first,), name="search-watch", daemon=True)
                self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.done.set()
        if self.recovery is not None:
            self.recovery.close()
        if self.thread is not None:
            self.thread.join(timeout=30)  # a read under way ends within its client timeout

    def await_baseline(self) -> None:
        """Under a latency budget, before the run's first stop: BASELINE_INTERVALS intervals of what searchers
        see, the baseline the budget holds the run to. Bounded by two more intervals, so that a watch whose reads
        fail never holds the run back for long; without a budget, or with a baseline kept from before a
        `resume`, no wait."""
        if self.recovery is None or self.thread is None or not self.measuring_baseline:
            return
        self.ctx.emit(Event("wait", f"measuring what searchers see before the first stop ({BASELINE_INTERVALS} "
                                    f"intervals of {self.interval_s:g} s): the baseline of the search latency "
                                    f"budget {self.recovery.budget}"))
        self.baseline_long_enough.wait((BASELINE_INTERVALS + 2) * self.interval_s)

    def any_stopped(self) -> bool:
        return any(n.phase is not Phase.PENDING for n in self.ctx.journal.nodes.values())

    def read(self) -> dict[str, SearchCounters] | None:
        try:
            return self.ctx.cluster.search_counters()
        except OrchestratorError as exc:
            if not self.failed_said:
                self.failed_said = True
                self.ctx.emit(Event("warning", f"search figures not read ({exc}); the run goes on, and they are "
                                               "read again at the next interval"))
            return {}

    def time_probe(self) -> None:
        """The operator's probe, timed end to end by the tool: what a client waits for. A probe that fails is
        said once and not counted (a failed search is no time)."""
        probe = self.probe
        assert probe is not None
        began = time.monotonic()
        try:
            if not self.ctx.cluster.search_once(probe.index, probe.query):
                self.probe = None  # a product without searches
                return
        except OrchestratorError as exc:
            if not self.probe_failed_said:
                self.probe_failed_said = True
                self.ctx.emit(Event("warning", f"the search probe on {probe.index} failed ({exc}); the run "
                                               "goes on, and it is tried again at its next interval"))
            return
        if self.warmed:
            self.probe_times.append(round((time.monotonic() - began) * 1000, 3))
        self.warmed = True

    def watch(self, before: dict[str, SearchCounters]) -> None:
        began = time.monotonic()
        due = began + self.interval_s
        probe_due = began
        measuring_baseline = self.measuring_baseline
        while not self.done.wait(min(LOOK_S, self.interval_s, self.probe_every_s or LOOK_S)):
            stopped = measuring_baseline and self.any_stopped()
            if self.probe is not None and (time.monotonic() >= probe_due or stopped):
                self.time_probe()
                probe_due = time.monotonic() + self.probe_every_s
            if time.monotonic() < due and not stopped:
                continue
            after = self.read()
            now = time.monotonic()
            due = now + self.interval_s
            if after:  # a failed read makes no sample: the next one spans both intervals
                # The interval's median probe: one slow probe (a collection, a cold segment) is not a trend.
                probe_ms = statistics.median(self.probe_times) if self.probe_times else None
                self.probe_times = []
                sample = sample_between(before, after, time.time(), now - began, baseline=measuring_baseline,
                                        probe_ms=probe_ms)
                if measuring_baseline:
                    self.baseline_samples.append(sample)
                    found = baseline_of(self.baseline_samples)
                    self.baseline = found.to_json() if found else None
                    if len(self.baseline_samples) >= BASELINE_INTERVALS:
                        self.baseline_long_enough.set()
                self.said(sample)
                before, began = after, now
            measuring_baseline = measuring_baseline and not stopped

    def said(self, sample: SearchSample) -> None:
        label = "baseline" if sample.baseline else "searches"
        self.ctx.emit(Event("search", f"{label}: {sample.text()}", data=sample.to_json()))
        if self.recovery is not None and not sample.baseline:
            try:
                self.recovery.after(sample, SearchSample.from_json(self.baseline) if self.baseline else None)
            except OrchestratorError as exc:  # the rate stays as it is; the next interval tries again
                self.ctx.emit(Event("warning", f"recovery rate not moved: {exc}"))
        moved = self.recovery.throttle if self.recovery is not None else None
        self.ctx.journal.record_search(sample.to_json(), self.baseline, moved.rate if moved is not None else None)
