"""What searchers see while a run goes on (issue 59), from the nodes' own search counters: pure arithmetic
over two readings, no I/O (restart/search_watch.py reads them).

A node counts the queries it has run (`indices.search.query_total`) and the time they took
(`query_time_in_millis`); between two readings, their differences give the mean time of a query on that
node over the interval. That is the time on the node, per shard query, not what a client waits for (a
search fans out to shards and waits for the slowest): it moves when recovery competes for the node's disks
and CPU, which is what the run must see. A node that restarted between two readings counts from zero
again: its interval is left out, as is a node missing from either reading (it was away).

Where the inventory sets a probe (`search.probe`), the tool also times a search of the operator's choosing, end
to end: what a client waits for. Each interval keeps its median probe, and a latency budget then holds it.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass
from typing import Any, NamedTuple


class SearchCounters(NamedTuple):
    """One node's search totals since its start, as its stats give them (a tuple: made for every node each
    interval, at 3,000 nodes a frozen dataclass's construction was a part of the interval's CPU worth saving)."""

    queries: int  # indices.search.query_total
    query_ms: int  # indices.search.query_time_in_millis
    queue: int  # thread_pool.search.queue: waiting now
    rejected: int  # thread_pool.search.rejected: since its start


@dataclass(frozen=True)
class SearchSample:
    """Searches over one interval, all nodes together and the slowest node alone."""

    at: float  # when the interval ended (epoch seconds)
    seconds: float  # how long it was
    nodes: int  # nodes counted (in both readings, not restarted between them)
    queries: int
    mean_ms: float | None  # per query, over every node counted; None: no query in the interval
    worst_ms: float | None  # the slowest node's mean (a node with at least MIN_QUERIES_FOR_WORST queries)
    worst_node: str | None
    queue: int  # search queue, all nodes, at the interval's end
    rejected: int  # searches rejected during the interval, all nodes
    baseline: bool = False  # before the run's first stop: what searchers see when nothing is away
    probe_ms: float | None = None  # the interval's median probe, timed by the tool; None: none ran

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> SearchSample:
        return cls(**{k: raw[k] for k in cls.__dataclass_fields__ if k in raw})

    def text(self) -> str:
        probe = f"; probe {self.probe_ms:.1f} ms" if self.probe_ms is not None else ""
        if self.mean_ms is None:
            return f"no search in the last {self.seconds:.0f} s{probe}"
        worst = f", slowest {self.worst_node} {self.worst_ms:.1f} ms" if self.worst_node else ""
        rejected = f", {self.rejected} rejected" if self.rejected else ""
        return (f"{self.queries / self.seconds:.1f} queries/s, {self.mean_ms:.1f} ms each{worst}, "
                f"{self.queue} queued{rejected}{probe}")


def held_ms(sample: SearchSample | dict[str, Any], by_probe: bool) -> float | None:
    """The time a latency budget holds: the probe's, where the inventory sets one; else the slowest node's (the
    mean where no node had enough queries to be called slowest). None: nothing measured in the interval. A
    sample as the journal keeps it (its JSON, or a point of its series) is read the same way."""
    fields = sample if isinstance(sample, dict) else asdict(sample)
    if by_probe:
        return fields.get("probe_ms")
    worst = fields.get("worst_ms")
    return worst if worst is not None else fields.get("mean_ms")


def held_what(by_probe: bool) -> str:
    """What `held_ms` measures, for the operator."""
    return "the probe's time" if by_probe else "slowest query time"


# A node with fewer queries in an interval says little of itself: a single slow query is not a slow node.
MIN_QUERIES_FOR_WORST = 5


def sample_between(before: dict[str, SearchCounters], after: dict[str, SearchCounters], at: float,
                   seconds: float, baseline: bool = False, probe_ms: float | None = None) -> SearchSample:
    """The searches between two readings of every node's counters (by node name), and the interval's slowest
    probe."""
    counted = {name: (now.queries - before[name].queries, now.query_ms - before[name].query_ms,
                      now.rejected - before[name].rejected)
               for name, now in after.items()
               if name in before and now.queries >= before[name].queries and now.query_ms >= before[name].query_ms}
    queries = sum(q for q, _, _ in counted.values())
    total_ms = sum(ms for _, ms, _ in counted.values())
    means = {name: ms / q for name, (q, ms, _) in counted.items() if q >= MIN_QUERIES_FOR_WORST}
    worst = max(means, key=lambda name: (means[name], name)) if means else None
    return SearchSample(at=at, seconds=seconds, nodes=len(counted), queries=queries,
                        mean_ms=round(total_ms / queries, 3) if queries else None,
                        worst_ms=round(means[worst], 3) if worst else None, worst_node=worst,
                        queue=sum(c.queue for c in after.values()),
                        rejected=sum(max(r, 0) for _, _, r in counted.values()), baseline=baseline,
                        probe_ms=probe_ms)


def baseline_of(samples: list[SearchSample]) -> SearchSample | None:
    """The baseline samples taken together (the time before the first stop), or None without a query then (a
    probe is a query)."""
    chosen = [s for s in samples if s.baseline]
    served = [s for s in chosen if s.queries and s.mean_ms is not None]
    probes = [s.probe_ms for s in chosen if s.probe_ms is not None]
    probe_ms = statistics.median(probes) if probes else None
    if not served:
        return None if probe_ms is None else SearchSample(
            at=chosen[-1].at, seconds=sum(s.seconds for s in chosen), nodes=max(s.nodes for s in chosen), queries=0,
            mean_ms=None, worst_ms=None, worst_node=None, queue=chosen[-1].queue, rejected=0, baseline=True,
            probe_ms=probe_ms)
    queries = sum(s.queries for s in served)
    mean = sum((s.mean_ms or 0) * s.queries for s in served) / queries
    worst = max(served, key=lambda s: s.worst_ms or 0)
    return SearchSample(at=chosen[-1].at, seconds=sum(s.seconds for s in chosen), nodes=max(s.nodes for s in chosen),
                        queries=queries, mean_ms=round(mean, 3), worst_ms=worst.worst_ms, worst_node=worst.worst_node,
                        queue=chosen[-1].queue, rejected=sum(s.rejected for s in chosen), baseline=True,
                        probe_ms=probe_ms)
