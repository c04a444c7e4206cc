"""The tool at scale: whole runs of the real plan, engine and shards adapter against a fake Elasticsearch
(orchestrator/testing/fake_es) of N nodes and 200 shard copies per data node, whose nodes stop and start
through a fake host transport and restart at once. The server runs in a process of its own, so the CPU
time measured is the tool's alone.

Per cluster size and mode it prints the plan's time and bytes, and per batch: requests and bytes read
(in all and per endpoint), and the tool's CPU time (median, 95th percentile). Targets (issue 47): bytes
per batch at 3,000 nodes at most 2x those at 30 (node mode); a whole node-mode run at 3,000 nodes reads
less than 1 GB; the tool's CPU per batch at 3,000 nodes at most 50 ms (node mode).

    python -m tests.benchmarks.bench_scale [--nodes 30 300 3000] [--modes node zone] [--batches N]
        [--zone-max-nodes 300] [--out reports/bench-scale.json]                  (about 12 min in all)
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from orchestrator.errors import StoppedAfter
from orchestrator.restart.events import Event
from orchestrator.restart.journal import RunFailed, RunOptions
from orchestrator.restart.plan import Mode
from orchestrator.testing.fake_es.hosts import AnsweringHosts, FakeHostTransport

REPO = Path(__file__).resolve().parents[2]
ZONES = 3


def cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


@dataclass
class Batches:
    """The tool's CPU time at each batch's end (from its event)."""

    cpu_at_end: list[float] = field(default_factory=list)
    started_cpu: float = 0.0

    def event(self, event: Event) -> None:
        if event.kind == "batch" and (event.data or {}).get("state") == "done":
            self.cpu_at_end.append(cpu_s())

    def per_batch_ms(self) -> list[float]:
        ends = [self.started_cpu, *self.cpu_at_end]
        return [1000 * (b - a) for a, b in itertools.pairwise(ends)]


class FakeServer:
    """The fake Elasticsearch in its own process (ended by its PID)."""

    def __init__(self, nodes: int, copies_per_node: int, zones: int,
                 restart_s: tuple[float, float] | None = None, search_qps: float = 0.0,
                 scattered: bool = False) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "orchestrator.testing.fake_es", "--nodes", str(nodes),
                                      "--copies-per-node", str(copies_per_node), "--zones", str(zones),
                                      "--search-qps", str(search_qps), *(["--scattered"] if scattered else []),
                                      *(("--restart-s", *map(str, restart_s)) if restart_s else ())],
                                     stdout=subprocess.PIPE, text=True, cwd=REPO)
        assert self.proc.stdout is not None
        self.info = json.loads(self.proc.stdout.readline())
        self.url = str(self.info["url"])

    def counts(self, reset: bool = False) -> dict[str, dict[str, int]]:
        import urllib.request

        request = urllib.request.Request(f"{self.url}/_fake/counts", method="DELETE" if reset else "GET")
        with urllib.request.urlopen(request, timeout=60) as answer:
            return dict(json.loads(answer.read()))

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)


def inventory(where: Path, name: str, url: str, nodes: list[dict[str, Any]], poll_interval_s: float = 0.05) -> Path:
    path = where / f"{name}.yaml"
    path.write_text(yaml.safe_dump({
        "cluster": {"name": name, "endpoints": [url], "request_timeout_s": 120},
        "ssh": {"user": "root", "known_hosts": "/dev/null"},  # never opened: the hosts are fake
        "nodes": nodes,
        "timeouts": {"poll_interval_s": poll_interval_s, "join_s": 120, "recovery_s": 600}}))
    return path


def one_run(nodes: int, mode: Mode, copies_per_node: int, batches: int) -> dict[str, Any]:
    from orchestrator.runs import plans
    from orchestrator.runs import restart as runs
    from orchestrator.runs.target import open_target

    server = FakeServer(nodes, copies_per_node, ZONES if mode is Mode.ZONE else 1)
    try:
        with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp:
            os.environ["ORCHESTRATOR_STATE"] = str(Path(tmp) / "state")
            listed = server_nodes(server.url)
            config = inventory(Path(tmp), f"scale-{nodes}-{mode.value}", server.url, listed)
            target = open_target(None, config)
            transport = FakeHostTransport(server.url)
            server.counts(reset=True)
            started, cpu = time.perf_counter(), cpu_s()
            plan = plans.make_plan(target, mode, RunOptions(), host_transport=lambda: transport)
            plan_s, plan_cpu_s = time.perf_counter() - started, cpu_s() - cpu
            plan_reads = server.counts(reset=True)
            seen = Batches(started_cpu=cpu_s())
            wall = time.perf_counter()
            try:
                runs.start(target, plan, RunOptions(), seen.event, early=AnsweringHosts(transport),  # type: ignore[arg-type]
                           stop_after=batches)
            except RunFailed as stopped:  # stopped after --batches, as asked
                if not isinstance(stopped.cause, StoppedAfter):
                    raise
                pass
            wall_s = time.perf_counter() - wall
            reads = server.counts()
    finally:
        server.close()
    done = len(seen.cpu_at_end)
    per_batch = seen.per_batch_ms()
    total_bytes = sum(reads["bytes"].values())
    return {
        "nodes": nodes, "mode": mode.value, "copies": server.info["copies"], "indices": server.info["indices"],
        "batches_planned": len(plan.batches), "batches_done": done, "plan_s": round(plan_s, 2),
        "plan_cpu_s": round(plan_cpu_s, 2), "plan_bytes": sum(plan_reads["bytes"].values()),
        "run_wall_s": round(wall_s, 1), "bytes": total_bytes, "requests": sum(reads["requests"].values()),
        "bytes_per_batch": round(total_bytes / max(done, 1)),
        "requests_per_batch": round(sum(reads["requests"].values()) / max(done, 1), 1),
        "cpu_ms_per_batch_median": round(statistics.median(per_batch), 1) if per_batch else None,
        "cpu_ms_per_batch_p95": round(sorted(per_batch)[int(0.95 * (len(per_batch) - 1))], 1) if per_batch else None,
        # The median of each tenth of the run, in order: whether a batch costs more as the run goes on.
        "cpu_ms_median_by_tenth": [round(statistics.median(part), 1) for part in tenths(per_batch)],
        "max_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "per_endpoint": {k: {"requests": reads["requests"][k], "bytes": v} for k, v in
                         sorted(reads["bytes"].items(), key=lambda kv: -kv[1])},
    }


def tenths(values: list[float]) -> list[list[float]]:
    size = max(len(values) // 10, 1)
    return [values[i:i + size] for i in range(0, len(values), size) if values[i:i + size]][:10]


def server_nodes(url: str) -> list[dict[str, Any]]:
    """The inventory's nodes: every node of the fake, by name, with its address and zone."""
    import urllib.request

    with urllib.request.urlopen(f"{url}/_nodes?filter_path=nodes.*.name,nodes.*.ip,nodes.*.attributes",
                                timeout=120) as answer:
        found = json.loads(answer.read())["nodes"].values()
    return [{"name": n["name"], "host": n["ip"], **({"zone": n["attributes"]["zone"]} if n.get("attributes") else {})}
            for n in sorted(found, key=lambda n: int(n["name"].split("-")[1]))]


def show(row: dict[str, Any]) -> None:
    print(f"{row['nodes']:>5} nodes {row['mode']:<4} {row['copies']:>7} copies: plan {row['plan_s']:.2f} s "
          f"({row['plan_bytes'] / 1e6:.1f} MB); {row['batches_done']}/{row['batches_planned']} batches in "
          f"{row['run_wall_s']:.1f} s; per batch {row['bytes_per_batch'] / 1e3:.1f} KB in "
          f"{row['requests_per_batch']} requests, CPU {row['cpu_ms_per_batch_median']} ms (median), "
          f"{row['cpu_ms_per_batch_p95']} ms (p95); run {row['bytes'] / 1e6:.1f} MB; RSS {row['max_rss_mb']} MB",
          flush=True)
    print(f"        CPU ms per batch, median of each tenth of the run: {row['cpu_ms_median_by_tenth']}", flush=True)
    for endpoint, figures in list(row["per_endpoint"].items())[:8]:
        print(f"        {endpoint:<34} {figures['requests'] / max(row['batches_done'], 1):>7.2f} req/batch "
              f"{figures['bytes'] / max(row['batches_done'], 1) / 1e3:>10.1f} KB/batch", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, nargs="+", default=[30, 300, 3000])
    parser.add_argument("--modes", nargs="+", default=["node", "zone"], choices=["node", "zone"])
    parser.add_argument("--copies-per-node", type=int, default=200)
    parser.add_argument("--batches", type=int, default=0, help="stop each run after this many batches (0: all)")
    parser.add_argument("--zone-max-nodes", type=int, default=300,
                        help="zone mode only up to this size: a zone of 1,000 nodes restarting at once is more "
                             "than the fake server, one process, answers in time")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    rows = []
    for nodes in args.nodes:
        for mode in args.modes:
            if mode == "zone" and nodes > args.zone_max_nodes:
                continue
            row = one_run(nodes, Mode(mode), args.copies_per_node, args.batches)
            show(row)
            rows.append(row)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
