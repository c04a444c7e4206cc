"""Rolling-restart figures on the sandbox: overhead, zone speed-up, recovery reuse, requests, ETA error.

The irreducible time of a node is measured from the node and the cluster, not from the tool's
clock: stop = its log's "stopping ..." to "closed"; boot = the new JVM's start time (from
`_nodes`) to its log's "started"; recovery = "started" to the end of the last shard recovery onto
it (`_recovery`). A batch's irreducible time is that of its slowest node. Overhead = the
command's wall time (measured around it) minus the sum over batches.

    python -m tests.benchmarks.bench_restart [--out reports/bench-restart.json]   (root; ~10 min)
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from elasticsearch import Elasticsearch

from orchestrator.sandbox.load import LoadGenerator
from orchestrator.sandbox.rest import access_of
from tests.helpers import es_client

REPO = Path(__file__).resolve().parents[2]
LOG_TIME = re.compile(r"^\[(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d,\d{3})\]")


def orchestrate(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "orchestrator", *args], capture_output=True, text=True, cwd=REPO,
                          timeout=1800)


def log_times(log: Path, marker: str, after: float) -> list[float]:
    out = []
    for line in log.read_text(errors="replace").splitlines():
        m = LOG_TIME.match(line)
        # Only the Node logger's lifecycle lines: "closed" also ends transport-connection messages.
        if m and "[o.e.n.Node" in line and marker in line:
            t = datetime.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S,%f").replace(tzinfo=UTC).timestamp()
            if t >= after:
                out.append(t)
    return out


def irreducible(info: dict[str, Any], es: Elasticsearch, summary: dict[str, Any], since: float) -> dict[str, Any]:
    hosts = Path(info["inventory"]).parent / "hosts"
    jvm = {n["name"]: n["jvm"]["start_time_in_millis"] / 1000 for n in es.nodes.info(metric="jvm")["nodes"].values()}
    recoveries: dict[str, float] = {}
    for body in es.indices.recovery(active_only=False).values():
        for s in body["shards"]:
            end = s.get("stop_time_in_millis") or (s["start_time_in_millis"] + s["total_time_in_millis"])
            target = s["target"]["name"]
            recoveries[target] = max(recoveries.get(target, 0), end / 1000)
    per_node: dict[str, dict[str, Any]] = {}
    for n in summary["nodes"]:
        log = hosts / n["name"] / "node" / "logs" / "sandbox.log"
        stopping = log_times(log, "] stopping ...", since)
        closed = log_times(log, "] closed", since)
        started = log_times(log, "] started {", since)
        stop_s = closed[0] - stopping[0] if stopping and closed else 0.0
        boot_s = started[0] - jvm[n["name"]] if started else 0.0
        recovery_s = max(recoveries.get(n["name"], 0) - started[0], 0.0) if started else 0.0
        per_node[n["name"]] = {"stop_s": round(stop_s, 2), "boot_s": round(boot_s, 2),
                               "recovery_s": round(recovery_s, 2), "total_s": round(stop_s + boot_s + recovery_s, 2),
                               # the moments themselves, for `where_it_went`
                               "at": {"stopping": stopping[0] if stopping else None,
                                      "closed": closed[0] if closed else None, "jvm": jvm[n["name"]],
                                      "started": started[0] if started else None,
                                      "recovered": recoveries.get(n["name"])}}
    batches = [max(float(per_node[name]["total_s"]) for name in b["nodes"]) for b in summary["batches"]]
    return {"per_node": per_node, "per_batch_s": batches, "sum_s": round(sum(batches), 2),
            "batch_nodes": [b["nodes"] for b in summary["batches"]]}


def where_it_went(events: list[dict[str, Any]], irr: dict[str, Any], command_s: tuple[float, float]) -> dict[str, Any]:
    """The tool's share of the wall time, by where it went (seconds, summed over batches): the command's
    start until the run's first event, each batch's start until its first node logs "stopping", a
    node's "closed" until its new JVM starts (the stop command's return, tuning, the start command),
    the batch's last recovery until the batch is done, between batches, and the last batch until
    the command exits."""
    at = irr["per_node"]
    batches = [e for e in events if e.get("event") == "batch"]
    begun = {e["batch"]: e["at"] for e in batches if "/" in e.get("message", "")}
    done = {e["batch"]: e["at"] for e in batches if e.get("data", {}).get("state") == "done"}
    out = {"start": events[0]["at"] - command_s[0] if events else 0.0, "before_stop": 0.0, "closed_to_jvm": 0.0,
           "after_recovery": 0.0, "between_batches": 0.0, "end": command_s[1] - max(done.values(), default=0)}
    for number, nodes in enumerate(irr["batch_nodes"], start=1):
        marks = [at[name]["at"] for name in nodes]
        if number not in begun or number not in done or any(None in m.values() for m in marks):
            continue
        out["before_stop"] += min(m["stopping"] for m in marks) - begun[number]
        out["closed_to_jvm"] += max(m["jvm"] - m["closed"] for m in marks)
        out["after_recovery"] += done[number] - max(max(m["recovered"], m["started"]) for m in marks)
        if number + 1 in begun:
            out["between_batches"] += begun[number + 1] - done[number]
    return {k: round(v, 2) for k, v in out.items()}


def eta_errors(events: list[dict[str, Any]], end: float) -> list[float]:
    errors = []
    for e in events:
        if e.get("event") == "batch" and e.get("eta_s") and "done" not in e.get("message", ""):
            actual = end - e["at"]
            if actual > 0:
                errors.append(round(abs(e["eta_s"] - actual) / actual, 3))
    return errors


def measured_restart(by: str, load: bool = False, config: Path | None = None,
                     extra: tuple[str, ...] = ()) -> dict[str, Any]:
    info = json.loads(orchestrate("sandbox", "status", "--json").stdout)
    es = es_client(info, max_retries=len(info["endpoints"]))
    gen = None
    if load:
        gen = LoadGenerator(info["endpoints"], index="bench-load", duration_s=900, max_docs=500_000,
                            access=access_of(info))
        gen.start_then_mark("during")
    since = time.time()
    started = time.monotonic()
    target = ["--config", str(config)] if config else ["--cluster", "sandbox"]
    proc = orchestrate("restart", *target, "--by", by, "--yes", "--json", *extra)
    wall = time.monotonic() - started
    end = time.time()
    since_exact = end - wall  # the command's start on the wall clock (the events' clock)
    load_report = None
    if gen is not None:
        gen.stop()
        load_report = {**gen.report(), "missing_acknowledged": len(gen.missing_acknowledged())}
    if proc.returncode != 0:
        raise SystemExit(f"restart failed: {proc.stderr[-2000:]}")
    events = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    summary = events[-1]
    irr = irreducible(info, es, summary, since - 1)
    nodes = len(summary["nodes"])
    peers = sum(n["recovery"].get("bytes_from_peers", 0) for n in summary["nodes"])
    reused = sum(n["recovery"].get("bytes_reused", 0) for n in summary["nodes"])
    waiting = sum(n["phases"].get("join", 0) + n["phases"].get("recovery", 0) for n in summary["nodes"])
    errors = eta_errors(events, end)
    waits = [e["data"]["lease_wait_s"] for e in events if "lease_wait_s" in e.get("data", {})]
    return {
        "lease_waits_s": [round(w, 1) for w in waits], "config": str(config) if config else None,
        "mode": by, "nodes": nodes, "batches": len(summary["batches"]), "under_load": load,
        "wall_s": round(wall, 2), "irreducible_s": irr["sum_s"],
        "overhead_ratio": round(wall / irr["sum_s"], 3) if irr["sum_s"] else None,
        "overhead_s_per_node": round((wall - irr["sum_s"]) / nodes, 2),
        "bytes_from_peers": peers, "bytes_reused": reused,
        "reuse_ratio": round(reused / (peers + reused), 4) if peers + reused else None,
        "es_calls": summary["cluster_calls"], "es_calls_per_node": round(summary["cluster_calls"] / nodes, 1),
        "es_calls_per_s_waiting": round(summary["cluster_calls"] / waiting, 2) if waiting else None,
        "eta_error_mean": round(sum(errors) / len(errors), 3) if errors else None,
        "eta_error_max": max(errors) if errors else None,
        "where_it_went_s": where_it_went(events, irr, (since_exact, end)),
        "irreducible": irr, "load": load_report,
    }


def sandbox(nodes: int, zones: int, docs: int = 30_000, masters: int = 0) -> None:
    """A fresh sandbox of that shape (the first ``masters`` nodes master-eligible, 0: all), with ``docs`` sample
    documents (0: none)."""
    orchestrate("sandbox", "down")
    up = orchestrate("sandbox", "up", "--nodes", str(nodes), "--zones", str(zones), "--masters", str(masters))
    if up.returncode != 0:
        raise SystemExit(f"sandbox up failed: {up.stderr[-2000:]}")
    if docs:
        orchestrate("sandbox", "load", "--docs", str(docs))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=REPO / "reports" / "bench-restart.json")
    args = parser.parse_args()
    runs = []
    sandbox(3, 1)
    runs.append(measured_restart("node"))          # first restart after loading
    runs.append(measured_restart("node"))          # idle, replicas already in step
    runs.append(measured_restart("node", load=True))
    sandbox(6, 3)
    runs.append(measured_restart("node"))
    runs.append(measured_restart("zone"))
    orchestrate("sandbox", "down")
    six_node, six_zone = runs[3], runs[4]
    figures = {"runs": runs, "zone_speedup": round(six_zone["wall_s"] / six_node["wall_s"], 3),
               "targets": {"overhead_ratio": 1.05, "overhead_s_per_node": 1.0, "zone_speedup": 0.45,
                           "reuse_ratio_idle": 0.99}}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(figures, indent=2))
    head = (f"{'mode':<5} {'nodes':>5} {'load':>5} {'wall s':>7} {'irred. s':>8} {'ratio':>6} {'s/node':>7} "
            f"{'reuse':>7} {'calls/node':>10} {'calls/s':>8} {'ETA err':>8}")
    print(head)
    for r in runs:
        print(f"{r['mode']:<5} {r['nodes']:>5} {'yes' if r['under_load'] else 'no':>5} {r['wall_s']:>7.1f} "
              f"{r['irreducible_s']:>8.1f} {r['overhead_ratio']!s:>6} {r['overhead_s_per_node']:>7.2f} "
              f"{r['reuse_ratio']!s:>7} {r['es_calls_per_node']:>10} {r['es_calls_per_s_waiting']!s:>8} "
              f"{r['eta_error_mean']!s:>8}")
    print("the tool's time, s per run (start: until the first event; end: after the last batch):")
    for r in runs:
        print(f"  {r['mode']:<5} {r['nodes']} nodes{' under load' if r['under_load'] else ''}: "
              + ", ".join(f"{k} {v}" for k, v in r["where_it_went_s"].items()))
    print(f"zone speed-up (6 nodes, 3 zones): {figures['zone_speedup']} (target <= 0.45)")
    print(f"written to {args.out}")


if __name__ == "__main__":
    main()
