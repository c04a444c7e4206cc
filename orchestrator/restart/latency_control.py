"""The recovery rate, moved by what searchers see (issue 59): additive increase, multiplicative decrease, as
LinkedIn's Cruise Control moves its partition moves' concurrency. Pure: the figures of each interval in
(restart/search_figures.py), the rate to put out, and what to say.

- The slowest node's query time (`SearchSample.worst_ms`; the mean where no node had enough queries to be
  called slowest), or the probe's time where the inventory sets a probe (`held_ms`), is held to the budget: a
  factor of the baseline's, or milliseconds.
- Over it for `sustain_s` (a burst of one interval is not a trend): the rate is halved, never below the
  floor; the next halving waits another `sustain_s`, so that a change is seen before the next.
- Within it for `sustain_s`: raised by an eighth of the ceiling, never above the ceiling (the rate the run
  chose from the hardware, before any throttling).
- At the floor and still over: said once; recovery goes on at the floor. The controller never stops a
  restart, it only slows its copies.
- An interval without a query says nothing of latency: the controller holds.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from orchestrator.restart.search_figures import SearchSample, held_ms, held_what
from orchestrator.units import human_bytes

RAISE_PARTS = 8  # a raise adds ceiling / RAISE_PARTS


@dataclass(frozen=True)
class LatencyBudget:
    """``2x``: twice the baseline's slowest node (its probe, with a probe); ``50ms``: 50 ms."""

    factor: float | None = None
    ms: float | None = None

    @classmethod
    def parse(cls, text: str) -> LatencyBudget | None:
        if not text:
            return None
        if text.endswith("ms"):
            return cls(ms=float(text[:-2]))
        return cls(factor=float(text.rstrip("x")))

    def limit_ms(self, baseline: SearchSample | None, by_probe: bool = False) -> float | None:
        """The query time allowed, or None when it needs a baseline that was not measured."""
        if self.ms is not None:
            return self.ms
        reference = baseline and held_ms(baseline, by_probe)
        return None if not reference or self.factor is None else self.factor * reference

    def __str__(self) -> str:
        return f"{self.ms:g}ms" if self.ms is not None else f"{self.factor:g}x"


@dataclass(frozen=True)
class Throttle:
    """The controller's state between two intervals."""

    rate: int  # bytes a second in force
    over_since: float | None = None  # when the current stretch over the budget began
    within_since: float | None = None  # when the current stretch within it began
    floor_said: bool = False


@dataclass(frozen=True)
class Step:
    throttle: Throttle
    rate: int | None = None  # a new rate to put out; None: as it is
    said: str = ""  # what to say of it (an event), if anything


def next_step(throttle: Throttle, sample: SearchSample, limit_ms: float, floor: int, ceiling: int,
              sustain_s: float, by_probe: bool = False) -> Step:
    """What to do after the interval ``sample`` ended (``by_probe``: the budget holds the probe's time)."""
    slowest = held_ms(sample, by_probe)
    measure = held_what(by_probe)
    if slowest is None:
        return Step(replace(throttle, over_since=None, within_since=None))
    began = sample.at - sample.seconds
    if slowest > limit_ms:
        over_since = throttle.over_since if throttle.over_since is not None else began
        if sample.at - over_since < sustain_s:
            return Step(replace(throttle, over_since=over_since, within_since=None))
        if throttle.rate > floor:
            rate = max(floor, throttle.rate // 2)
            return Step(Throttle(rate, over_since=sample.at), rate,
                        f"searches over budget: {measure} {slowest:.1f} ms against {limit_ms:.1f} ms for "
                        f"{sample.at - over_since:.0f} s; recovery rate halved to {human_bytes(rate)}/s")
        if throttle.floor_said:
            return Step(replace(throttle, over_since=over_since, within_since=None))
        return Step(replace(throttle, over_since=over_since, within_since=None, floor_said=True), None,
                    f"searches over budget ({slowest:.1f} ms against {limit_ms:.1f} ms) with recovery at its floor "
                    f"of {human_bytes(floor)}/s: the budget cannot be met by slowing recovery; it goes on at the floor")
    within_since = throttle.within_since if throttle.within_since is not None else began
    if sample.at - within_since < sustain_s or throttle.rate >= ceiling:
        return Step(replace(throttle, over_since=None, within_since=within_since))
    rate = min(ceiling, throttle.rate + max(ceiling // RAISE_PARTS, 1))
    return Step(Throttle(rate, within_since=sample.at), rate,
                f"searches within budget ({slowest:.1f} ms against {limit_ms:.1f} ms) for "
                f"{sample.at - within_since:.0f} s: recovery rate raised to {human_bytes(rate)}/s")
