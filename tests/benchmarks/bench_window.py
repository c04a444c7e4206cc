"""The window (issue 57): how much sooner a restart ends with several nodes away at once, and what it costs.

`--sandbox`: real nodes. A 12-node sandbox (3 master-eligible nodes, which hold data too: the sandbox has no
dedicated masters, and 9 data-only nodes), the 9 data nodes restarted twice in the same benchmark run, one at a
time and with `--max-unavailable 4` as the tool runs it by default (the ramp included), under a steady write
and search load. Per run: the wall time, bytes copied from peers, the fewest nodes and red samples the load's
health watcher saw (every 0.5 s), failed searches and search latency. Target: the window's run at most 0.6x
one at a time's wall time (this machine has 2 cores: the JVMs that start together compete; the ideal on hosts
of their own is 0.25x plus the ramp).

`--fake`: the fake Elasticsearch (orchestrator/testing/fake_es) in a process of its own, N nodes, 200 copies per
data node, 1 replica, each copy on a data node drawn at random (`--in-turn`: the data nodes in turn, so that a node
shares data with two others only), each node back a random 5-15 s after its start (real seconds: the server's
`--restart-s`), a budget of 5 %. Per run: the window's mean size over the run against the budget and against how
many nodes the shard map lets be away together at all (the plan's reach: a greedy window over the map), the wall
time against nodes x mean restart / budget, the tool's CPU per admitted node and the bytes the whole run read.
Targets: mean window at least 80 % of the budget, wall time within 1.25x of the ideal, CPU at most 20 ms per
node, under 2 GB read.

    python -m tests.benchmarks.bench_window --sandbox [--out reports/bench-window-sandbox.json]  (root; ~15 min)
    python -m tests.benchmarks.bench_window --fake [--nodes 3000] [--budget 5%] [--out ...]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from orchestrator.restart.events import Event
from orchestrator.restart.journal import RunOptions
from orchestrator.restart.plan import Mode
from tests.benchmarks.bench_scale import FakeServer, cpu_s, inventory, server_nodes

REPO = Path(__file__).resolve().parents[2]
DATA_NODES = [f"es-{i}" for i in range(4, 13)]


def orchestrate(*args: str, timeout: float = 3600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "orchestrator", *args], capture_output=True, text=True, cwd=REPO,
                          timeout=timeout)


def sandbox_run(info: dict[str, Any], budget: str | None) -> dict[str, Any]:
    from orchestrator.sandbox.load import LoadGenerator
    from orchestrator.sandbox.rest import access_of

    load = LoadGenerator(info["endpoints"], index="load-window", duration_s=3600, max_docs=1_000_000,
                         access=access_of(info))
    load.start_then_mark("during")
    started = time.monotonic()
    try:
        proc = orchestrate("restart", "--cluster", "sandbox", "--yes", "--json", "--no-tune",
                           *(a for n in ("es-1", "es-2", "es-3") for a in ("--exclude", n)),
                           *(("--max-unavailable", budget) if budget else ()))
        wall_s = time.monotonic() - started
        load.mark("after")
        time.sleep(2)
    finally:
        load.stop()
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    report = load.report()
    during = report["windows"]["during"]
    return {"budget": budget or "1", "wall_s": round(wall_s, 1),
            "bytes_from_peers": sum(int(n["recovery"].get("bytes_from_peers", 0)) for n in summary["nodes"]),
            "red_samples": report["red_samples"], "fewest_nodes": report["fewest_nodes"],
            "searches_ok": during["search_ok"], "searches_failed": during["search_errors"],
            "search_p50_ms": during["search_p50_ms"], "search_p99_ms": during["search_p99_ms"],
            "writes_lost": len(load.missing_acknowledged())}


def sandbox(out: Path | None) -> None:
    up = orchestrate("sandbox", "up", "--nodes", "12", "--masters", "3", "--insecure", timeout=1200)
    assert up.returncode == 0, up.stderr[-3000:]
    try:
        info = json.loads(orchestrate("sandbox", "status", "--json").stdout)
        loaded = orchestrate("sandbox", "load", "--docs", "30000")
        assert loaded.returncode == 0, loaded.stderr
        rows = [sandbox_run(info, None), sandbox_run(info, "4")]
    finally:
        orchestrate("sandbox", "down")
    for row in rows:
        print(f"budget {row['budget']}: {row['wall_s']:.0f} s; {row['bytes_from_peers']} bytes from peers; red "
              f"samples {row['red_samples']}; fewest nodes {row['fewest_nodes']}; searches {row['searches_ok']} ok, "
              f"{row['searches_failed']} failed, p50 {row['search_p50_ms']} ms, p99 {row['search_p99_ms']} ms; "
              f"acknowledged writes lost {row['writes_lost']}", flush=True)
    print(f"window / one at a time: {rows[1]['wall_s'] / rows[0]['wall_s']:.2f}x (target at most 0.6x)", flush=True)
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(rows, indent=2))


class Window:
    """The window's size over time, from the run's batch events (begun, done)."""

    def __init__(self) -> None:
        self.changes: list[tuple[float, int]] = []  # (monotonic time, +1 or -1)
        self.done = 0

    def event(self, event: Event) -> None:
        if event.kind != "batch" or event.batch is None:
            return
        if (event.data or {}).get("state") == "done":
            self.changes.append((time.monotonic(), -1))
            self.done += 1
        elif "/" in event.message.split(":")[0]:  # "batch N/M: ..." when it is admitted
            self.changes.append((time.monotonic(), +1))

    def mean_size(self) -> float:
        if len(self.changes) < 2:
            return 0.0
        size, area = 0, 0.0
        for (at, step), (then, _) in zip(self.changes, self.changes[1:], strict=False):
            size += step
            area += size * (then - at)
        return area / (self.changes[-1][0] - self.changes[0][0])


def fake(nodes: int, budget: str, restart_s: tuple[float, float], out: Path | None, scattered: bool = True) -> None:
    from orchestrator.restart.budget import room_of
    from orchestrator.runs import plans
    from orchestrator.runs import restart as runs
    from orchestrator.runs.target import open_target
    from orchestrator.testing.fake_es.hosts import AnsweringHosts, FakeHostTransport

    server = FakeServer(nodes, 200, 1, restart_s=restart_s, scattered=scattered)
    try:
        with tempfile.TemporaryDirectory(prefix="bench-window-") as tmp:
            os.environ["ORCHESTRATOR_STATE"] = str(Path(tmp) / "state")
            config = inventory(Path(tmp), f"window-{nodes}", server.url, server_nodes(server.url),
                               poll_interval_s=1.0)
            target, chosen = plans.windowed(open_target(None, config), budget, Mode.NODE)
            transport = FakeHostTransport(server.url)
            options = RunOptions(max_unavailable=chosen)
            plan = plans.make_plan(target, Mode.NODE, options, host_transport=lambda: transport)
            reach = next((n for n in plan.notes if "could be away together" in n), "")
            server.counts(reset=True)
            window, cpu, wall = Window(), cpu_s(), time.monotonic()
            runs.start(target, plan, options, window.event, early=AnsweringHosts(transport))  # type: ignore[arg-type]
            wall_s, cpu_run_s = time.monotonic() - wall, cpu_s() - cpu
            reads = server.counts()
    finally:
        server.close()
    room = room_of(chosen, len(plan.node_ids))
    ideal_s = len(plan.batches) * sum(restart_s) / 2 / room
    row = {"nodes": nodes, "budget": budget, "placement": "random" if scattered else "in turn", "reach": reach,
           "room": room, "batches": len(plan.batches), "done": window.done,
           "wall_s": round(wall_s, 1), "ideal_s": round(ideal_s, 1), "mean_window": round(window.mean_size(), 1),
           "cpu_ms_per_node": round(1000 * cpu_run_s / max(window.done, 1), 1),
           "bytes": sum(reads["bytes"].values()), "requests": sum(reads["requests"].values())}
    print(f"{nodes} nodes, budget {budget} ({room} nodes): {row['done']}/{row['batches']} in {row['wall_s']:.0f} s, "
          f"{row['wall_s'] / ideal_s:.2f}x the ideal {ideal_s:.0f} s; window {row['mean_window']} on average "
          f"({100 * row['mean_window'] / room:.0f} % of the budget); CPU {row['cpu_ms_per_node']} ms per node; "
          f"read {row['bytes'] / 1e9:.2f} GB in {row['requests']} requests", flush=True)
    print(f"copies placed {row['placement']}; the plan: {reach}", flush=True)
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(row, indent=2))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--sandbox", action="store_true")
    which.add_argument("--fake", action="store_true")
    parser.add_argument("--nodes", type=int, default=3000)
    parser.add_argument("--budget", default="5%")
    parser.add_argument("--restart-s", type=float, nargs=2, default=(5.0, 15.0))
    parser.add_argument("--in-turn", action="store_true", help="copies on the data nodes in turn, not at random")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    if args.sandbox:
        sandbox(args.out)
    else:
        fake(args.nodes, args.budget, tuple(args.restart_s), args.out, scattered=not args.in_turn)


if __name__ == "__main__":
    main()
