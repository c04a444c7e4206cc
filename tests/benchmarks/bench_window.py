"""The window (issue 57): how much sooner a restart ends with several nodes away at once, and what it costs.

`--sandbox`: real nodes. A 12-node sandbox (3 master-eligible nodes, which hold data too: the sandbox has no
dedicated masters, and 9 data-only nodes), the 9 data nodes restarted twice in the same benchmark run, one at a
time and with `--max-unavailable 4` as the tool runs it by default (the ramp included), under a steady write
and search load. Per run: the wall time, bytes copied from peers, the fewest nodes and red samples the load's
health watcher saw (every 0.5 s), failed searches and search latency. Target: the window's run at most 0.6x
one at a time's wall time (this machine has 2 cores: the JVMs that start together compete; the ideal on hosts
of their own is 0.25x plus the ramp).

`--sandbox --latency-budget 2x` (issue 59): the same sandbox and load, the budget of 4 (`--window N`) run twice,
without and with the search latency budget (`search.latency_budget`, read every 5 s, sustained 10 s), after 30 s
of the load alone (the idle baseline). Per run: the searchers' p99 over the whole run and over the worst 30 s
span (after the controller's first move, in the run with it), the wall time, and the controller's moves.
Targets: p99 at most 2x the idle baseline over any 30 s after the first move; the run at most 1.3x as long as
without the controller. `--host-cpus C`: each host limited to C CPUs, as hosts of their own are (a booting JVM
cannot take its peers' CPU); `--searchers pool`: the load searches as an application does, through one client
over every node that skips a node away and sends again to another (by default it sends to every node in turn
without retries, which counts the nodes away).

`--fake`: the fake Elasticsearch (orchestrator/testing/fake_es) in a process of its own, N nodes, 200 copies per
data node, 1 replica, each copy on a data node drawn at random (`--in-turn`: the data nodes in turn, so that a node
shares data with two others only), each node back a random 5-15 s after its start (real seconds: the server's
`--restart-s`), a budget of 5 %. Per run: the window's mean size over the run against the budget and against how
many nodes the shard map lets be away together at all (the plan's reach: a greedy window over the map), the wall
time against nodes x mean restart / budget, the tool's CPU per admitted node and the bytes the whole run read.
Targets: mean window at least 80 % of the budget, wall time within 1.25x of the ideal, CPU at most 20 ms per
node, under 2 GB read.

    python -m tests.benchmarks.bench_window --sandbox [--out reports/bench-window-sandbox.json]  (root; ~15 min)
    python -m tests.benchmarks.bench_window --sandbox --latency-budget 2x [--probe] [--host-cpus 0.25]
        [--searchers pool] [--out ...]  (root; ~15 min)
    python -m tests.benchmarks.bench_window --fake [--nodes 3000] [--budget 5%] [--progress 60] [--out ...]
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


SPAN_S = 30  # the latency target's span: p99 over any 30 s


def worst_span_p99(latency: list[float], at: list[float], since: float, until: float) -> float | None:
    """The worst p99 (ms) over any SPAN_S of searches ended between ``since`` and ``until``, spans 5 s apart."""
    from orchestrator.sandbox.load import percentile

    worst = None
    start = since
    while start + SPAN_S <= until or start == since:
        chosen = [s for s, t in zip(latency, at, strict=True) if start <= t < start + SPAN_S]
        p99 = percentile(chosen, 99)
        worst = p99 if worst is None or (p99 is not None and p99 > worst) else worst
        start += 5
    return worst


def idle_p99(info: dict[str, Any], through: str, seconds: float = 30) -> float | None:
    """The searchers' p99 with nothing away: the load alone."""
    from orchestrator.sandbox.load import LoadGenerator
    from orchestrator.sandbox.rest import access_of

    load = LoadGenerator(info["endpoints"], index="load-window", duration_s=3600, max_docs=1_000_000,
                         access=access_of(info), through=through)
    load.start_then_mark("idle")
    time.sleep(seconds)
    load.stop()
    return load.report()["windows"]["idle"]["search_p99_ms"]


def with_latency_budget(info: dict[str, Any], budget: str, probe: bool) -> Path:
    """A copy of the sandbox's inventory, beside it, whose searches are watched every 5 s and held to ``budget``
    (``probe``: the budget holds a probe's time, not the nodes' counters)."""
    import yaml

    original = Path(info["inventory"])
    inv = yaml.safe_load(original.read_text())
    inv["search"] = {"interval_s": 5, "latency_budget": budget, "sustain_s": 10}
    if probe:  # the load's own search, timed end to end by the tool each second: the budget holds its time
        inv["search"]["probe"] = {"index": "load-window", "query": {"range": {"n": {"gte": 0}}}, "interval_s": 1}
    copy = original.with_name("inventory-latency-budget.yaml")
    copy.write_text(yaml.safe_dump(inv))
    return copy


def sandbox_run(info: dict[str, Any], budget: str | None, config: Path | None = None,
                through: str = "each") -> dict[str, Any]:
    from orchestrator.sandbox.load import LoadGenerator
    from orchestrator.sandbox.rest import access_of

    load = LoadGenerator(info["endpoints"], index="load-window", duration_s=3600, max_docs=1_000_000,
                         access=access_of(info), through=through)
    load.start_then_mark("during")
    started, began_at = time.monotonic(), time.time()
    try:
        proc = orchestrate("restart", *(("--config", str(config)) if config else ("--cluster", "sandbox")), "--yes",
                           "--json", "--no-tune", *(a for n in ("es-1", "es-2", "es-3") for a in ("--exclude", n)),
                           *(("--max-unavailable", budget) if budget else ()))
        wall_s = time.monotonic() - started
        ended_at = time.time()
        load.mark("after")
        time.sleep(2)
    finally:
        load.stop()
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [json.loads(line) for line in proc.stdout.strip().splitlines() if line.startswith("{")]
    summary = lines[-1]
    report = load.report()
    during = report["windows"]["during"]
    moves = [e for e in lines if e.get("event") == "step" and "recovery rate" in e.get("message", "")]
    closed = [e for e in lines if e.get("event") == "wait" and e.get("message", "").startswith("window closed")]
    reacted = min([e["at"] for e in moves + closed], default=None)
    stats = load.windows["during"]
    return {"budget": budget or "1", "latency_budget": bool(config), "wall_s": round(wall_s, 1),
            "worst_30s_p99_ms": worst_span_p99(stats.search_latency, stats.search_at, reacted or began_at, ended_at),
            "first_reaction_s": round(reacted - began_at, 1) if reacted else None,
            "rate_moves": len(moves), "window_closed": len(closed),
            "bytes_from_peers": sum(int(n["recovery"].get("bytes_from_peers", 0)) for n in summary["nodes"]),
            "red_samples": report["red_samples"], "fewest_nodes": report["fewest_nodes"],
            "searches_ok": during["search_ok"], "searches_failed": during["search_errors"],
            "search_p50_ms": during["search_p50_ms"], "search_p99_ms": during["search_p99_ms"],
            "writes_lost": len(load.missing_acknowledged())}


def sandbox(out: Path | None, latency_budget: str | None = None, probe: bool = False, host_cpus: float = 0,
            through: str = "each", window: str = "4") -> None:
    up = orchestrate("sandbox", "up", "--nodes", "12", "--masters", "3", "--insecure",
                     *(("--host-cpus", str(host_cpus)) if host_cpus else ()), timeout=1200)
    assert up.returncode == 0, up.stderr[-3000:]
    try:
        info = json.loads(orchestrate("sandbox", "status", "--json").stdout)
        loaded = orchestrate("sandbox", "load", "--docs", "30000")
        assert loaded.returncode == 0, loaded.stderr
        if latency_budget:
            idle = idle_p99(info, through)
            rows = [sandbox_run(info, window, through=through),
                    sandbox_run(info, window, with_latency_budget(info, latency_budget, probe), through)]
        else:
            rows = [sandbox_run(info, None), sandbox_run(info, window)]
    finally:
        orchestrate("sandbox", "down")
    if latency_budget:
        latency_figures(rows, idle, latency_budget, out)
        return
    for row in rows:
        print(f"budget {row['budget']}: {row['wall_s']:.0f} s; {row['bytes_from_peers']} bytes from peers; red "
              f"samples {row['red_samples']}; fewest nodes {row['fewest_nodes']}; searches {row['searches_ok']} ok, "
              f"{row['searches_failed']} failed, p50 {row['search_p50_ms']} ms, p99 {row['search_p99_ms']} ms; "
              f"acknowledged writes lost {row['writes_lost']}", flush=True)
    print(f"window / one at a time: {rows[1]['wall_s'] / rows[0]['wall_s']:.2f}x (target at most 0.6x)", flush=True)
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(rows, indent=2))


def latency_figures(rows: list[dict[str, Any]], idle: float | None, budget: str, out: Path | None) -> None:
    factor = float(budget.rstrip("x")) if budget.endswith("x") else None
    print(f"idle p99 (the load alone, 30 s): {idle} ms", flush=True)
    for row in rows:
        print(f"budget {row['budget']}, {'with' if row['latency_budget'] else 'without'} the latency budget "
              f"{budget}: {row['wall_s']:.0f} s; p50 {row['search_p50_ms']} ms, p99 {row['search_p99_ms']} ms; worst "
              f"30 s p99 {row['worst_30s_p99_ms']} ms{' after the first move' if row['first_reaction_s'] else ''} "
              f"(first move at {row['first_reaction_s']} s; {row['rate_moves']} rate moves, window closed "
              f"{row['window_closed']} times); searches {row['searches_ok']} ok, {row['searches_failed']} failed; "
              f"{row['bytes_from_peers']} bytes from peers; red samples {row['red_samples']}; acknowledged writes "
              f"lost {row['writes_lost']}", flush=True)
    if idle and factor and rows[1]["worst_30s_p99_ms"] is not None:
        print(f"worst 30 s p99 with the controller: {rows[1]['worst_30s_p99_ms'] / idle:.2f}x the idle p99 (target "
              f"at most {factor:g}x); wall time {rows[1]['wall_s'] / rows[0]['wall_s']:.2f}x without it (target at "
              "most 1.3x)", flush=True)
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({"idle_p99_ms": idle, "runs": rows}, indent=2))


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


def progress_each(every_s: float, window: Window) -> None:
    """A line of the run's figures every ``every_s`` (a daemon thread): a run stopped part way still gives them."""
    import threading

    def say() -> None:
        while True:
            time.sleep(every_s)
            if window.changes:
                since = time.monotonic() - window.changes[0][0]
                print(f"{time.strftime('%H:%M:%S')} {window.done} done in {since:.0f} s from the first admission "
                      f"({window.done / since:.2f} a second), window {window.mean_size():.1f} on average; tool CPU "
                      f"{cpu_s():.0f} s", flush=True)

    threading.Thread(target=say, name="progress", daemon=True).start()


def fake(nodes: int, budget: str, restart_s: tuple[float, float], out: Path | None, scattered: bool = True,
         progress_s: float = 0.0) -> None:
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
            if progress_s:
                progress_each(progress_s, window)
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
    parser.add_argument("--progress", type=float, default=0.0, metavar="S",
                        help="with --fake: a line of the run's figures every S seconds (nodes done, the window, the "
                             "tool's CPU), for a run stopped part way")
    parser.add_argument("--latency-budget", default=None, help="with --sandbox: the budget of 4 without and with "
                                                                "this search latency budget (issue 59), e.g. 2x")
    parser.add_argument("--probe", action="store_true", help="with --latency-budget: the budget holds a search "
                                                             "probe's time (search.probe), not the nodes' counters")
    parser.add_argument("--host-cpus", type=float, default=0, help="with --sandbox: each test host limited to this "
                                                                  "many CPUs (`sandbox up --host-cpus`)")
    parser.add_argument("--window", type=int, default=4, help="with --sandbox: the window's budget "
                                                               "(--max-unavailable) of the runs with one")
    parser.add_argument("--searchers", choices=("each", "pool"), default="each",
                        help="with --sandbox: the load's searchers reach the nodes each in turn without retries "
                             "(each), or through one client over every node, as an application's (pool)")
    args = parser.parse_args()
    if args.sandbox:
        sandbox(args.out, args.latency_budget, args.probe, args.host_cpus, args.searchers, str(args.window))
    else:
        fake(args.nodes, args.budget, tuple(args.restart_s), args.out, scattered=not args.in_turn,
             progress_s=args.progress)


if __name__ == "__main__":
    main()
