"""What watching searchers costs (issue 59): one interval of the search watch (restart/search_watch.py) at scale,
against the fake Elasticsearch of N nodes in a process of its own (so the CPU measured is the tool's alone),
each node serving searches (the fake's counters move with time).

Per interval: the one read of every node's search counters (`_nodes/stats` with a `filter_path`), the figures
of the interval (restart/search_figures.py: each node's mean query time, the slowest node's), and the latency
budget's decision (restart/latency_control.py: the rate to move to). Prints the tool's CPU per interval (median
and 95th percentile), the requests and bytes one interval reads, and the wall time of the read. Target: at most
20 ms of CPU per interval at 3,000 nodes, and one read per interval.

    python -m tests.benchmarks.bench_search_watch [--nodes 30 300 3000] [--intervals 20] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from orchestrator.es.connect import ElasticsearchRest
from orchestrator.restart.latency_control import LatencyBudget, Throttle, next_step
from orchestrator.restart.search_figures import sample_between
from orchestrator.shards.adapter import ShardClusterAdapter
from orchestrator.shards.connection import Connection
from tests.benchmarks.bench_scale import FakeServer, cpu_s

TARGET_CPU_MS = 20.0


def intervals_at(nodes: int, count: int) -> dict[str, float]:
    server = FakeServer(nodes, 20, 1, search_qps=50.0)
    try:
        adapter = ShardClusterAdapter(ElasticsearchRest(Connection((server.url,), request_timeout_s=120)))
        budget = LatencyBudget.parse("2x")
        assert budget is not None
        before = adapter.search_counters() or {}
        baseline = None
        throttle = Throttle(1024**3)
        server.counts(reset=True)
        cpu_ms, wall_ms = [], []
        for _ in range(count):
            time.sleep(0.2)  # the fake's counters move with the time between reads
            cpu, wall = cpu_s(), time.perf_counter()
            after = adapter.search_counters() or {}
            sample = sample_between(before, after, time.time(), 0.2, baseline=baseline is None)
            if baseline is None:
                baseline = sample
            else:
                limit = budget.limit_ms(baseline)
                if limit is not None:
                    throttle = next_step(throttle, sample, limit, 20 * 1024**2, 1024**3, 30.0).throttle
            cpu_ms.append(1000 * (cpu_s() - cpu))
            wall_ms.append(1000 * (time.perf_counter() - wall))
            before = after
        reads = server.counts()
    finally:
        server.close()
    requests, size = sum(reads["requests"].values()), sum(reads["bytes"].values())
    return {"nodes": nodes, "intervals": count, "cpu_ms_median": round(statistics.median(cpu_ms), 2),
            "cpu_ms_p95": round(sorted(cpu_ms)[int(0.95 * (len(cpu_ms) - 1))], 2),
            "wall_ms_median": round(statistics.median(wall_ms), 1),
            "requests_per_interval": round(requests / count, 2), "bytes_per_interval": round(size / count)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, nargs="+", default=[30, 300, 3000])
    parser.add_argument("--intervals", type=int, default=20)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    rows = [intervals_at(n, args.intervals) for n in args.nodes]
    print(f"{'nodes':>6} {'CPU ms/interval (median, p95)':>30} {'read ms':>8} {'requests':>9} {'KB':>8}")
    for r in rows:
        print(f"{r['nodes']:>6} {r['cpu_ms_median']:>18.2f} {r['cpu_ms_p95']:>10.2f} {r['wall_ms_median']:>8.1f} "
              f"{r['requests_per_interval']:>9} {r['bytes_per_interval'] / 1024:>8.1f}")
    print(f"target: at most {TARGET_CPU_MS:.0f} ms of CPU per interval at 3,000 nodes, one read per interval")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
