"""What a batch reads of a real cluster: bytes read per batch by a node-mode restart of a 3-node and of a
12-node sandbox holding the same data per node (10 indices of 2 shards and 1 replica, 40 copies, per
node), from each run's audit log (each request line says how many bytes its answer had). Target (issue
47): the 12-node figure within 1.5x of the 3-node one.

    python -m tests.benchmarks.bench_sandbox_reads [--nodes 3 12] [--out reports/bench-sandbox-reads.json]
        (root; about 6 min: each sandbox is started, loaded, restarted, and taken down)
"""

from __future__ import annotations

import argparse
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

from tests.benchmarks.bench_restart import REPO, orchestrate
from tests.helpers import es_client

INDICES_PER_NODE = 10
TARGET = 1.5


def endpoint(url: str) -> str:
    """A request's API, its index and node names left out: GET /_nodes/{...}/stats, GET /{...}/_settings."""
    path = re.sub(r"^https?://[^/]+", "", url).split("?")[0]
    parts = [p if re.fullmatch(r"_[a-z_]+", p) or p in API_WORDS or not p else "{...}" for p in path.split("/")]
    return "/".join(parts)


# The words of the paths a run asks that are not names (a node id may begin with _ too: `_Ei-E...`).
API_WORDS = {"stats", "indices", "docs,store", "jvm,process", "recovery", "shards", "allocation", "health", "state",
             "master_node", "routing_table", "settings", "index.number_of_replicas", "master:true", "none"}


def measured(nodes: int) -> dict[str, Any]:
    up = orchestrate("sandbox", "up", "--nodes", str(nodes), "--insecure")
    assert up.returncode == 0, up.stderr
    info = json.loads(orchestrate("sandbox", "status", "--json").stdout)
    es = es_client(info)
    for i in range(INDICES_PER_NODE * nodes):
        es.indices.create(index=f"bench-{i:04d}", settings={"number_of_shards": 2, "number_of_replicas": 1})
        es.bulk(operations=[op for d in range(50) for op in ({"index": {"_index": f"bench-{i:04d}"}}, {"n": d})])
    es.cluster.health(wait_for_status="green", timeout="120s")
    run = orchestrate("restart", "--cluster", "sandbox", "--yes", "--json")
    assert run.returncode == 0, run.stderr
    summary = json.loads(run.stdout.strip().splitlines()[-1])
    log = Path(summary["journal"]).with_name(f"{summary['run_id']}.log.jsonl")
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    first = next(i for i, line in enumerate(lines) if line.get("kind") == "event" and line.get("event") == "batch")
    requests = [line for line in lines[first:] if line.get("kind") == "request"]
    batches = len(summary["batches"])
    by_endpoint: Counter[str] = Counter()
    for r in requests:
        by_endpoint[f"{r['method']} {endpoint(r['url'])}"] += int(r.get("bytes") or 0)
    total = sum(by_endpoint.values())
    orchestrate("sandbox", "down")
    return {"nodes": nodes, "copies": 4 * INDICES_PER_NODE * nodes, "batches": batches, "requests": len(requests),
            "bytes": total, "bytes_per_batch": round(total / batches), "run_s": summary["duration_s"],
            "per_endpoint_per_batch": {k: round(v / batches) for k, v in by_endpoint.most_common()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, nargs="+", default=[3, 12])
    parser.add_argument("--out", type=Path, default=REPO / "reports" / "bench-sandbox-reads.json")
    args = parser.parse_args()
    rows = []
    for nodes in args.nodes:
        row = measured(nodes)
        rows.append(row)
        print(f"{row['nodes']:>3} nodes, {row['copies']} copies: {row['batches']} batches in {row['run_s']:.0f} s, "
              f"{row['requests']} requests, {row['bytes_per_batch'] / 1e3:.1f} KB per batch", flush=True)
        for name, size in list(row["per_endpoint_per_batch"].items())[:8]:
            print(f"        {name:<44} {size / 1e3:>8.1f} KB/batch", flush=True)
    if len(rows) >= 2:
        ratio = rows[-1]["bytes_per_batch"] / rows[0]["bytes_per_batch"]
        print(f"{rows[-1]['nodes']} nodes / {rows[0]['nodes']} nodes: {ratio:.2f}x per batch (target <= {TARGET}x: "
              f"{'met' if ratio <= TARGET else 'MISSED'})")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
