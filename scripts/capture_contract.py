"""Capture what a real cluster answers to every request the tool's shard adapter makes, for the fake
Elasticsearch's contract test (tests/unit/test_fake_contract.py; issue 58).

Run against a running sandbox (`orchestrate sandbox up` then `orchestrate sandbox load`, any product):

    .venv/bin/python scripts/capture_contract.py [--cluster sandbox] [--out tests/fixtures/contract]

It calls the adapter's reads as a plan, a batch's gate and last look, a recovery wait, the lock and `status`
make them (and the search watch: restart/search_watch.py), records each request and its answer (or its HTTP
error), and writes
`OUT/<product>-<version>.json` with the cluster's layout (node names and roles, index shards and replicas),
so that the test builds the same layout in the fake and asks it the same requests. Answers are kept as the
cluster gave them; the test compares their shapes (keys, types, what a filter keeps), not their values.
Capture again when a tested version changes.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from orchestrator.restart.plan import Plan
from orchestrator.runs.target import open_target
from orchestrator.shards.adapter import ShardClusterAdapter
from orchestrator.shards.rest import HttpError


def capture(adapter: ShardClusterAdapter) -> list[dict[str, Any]]:
    recorded: list[dict[str, Any]] = []
    real = adapter.rest.request

    def request(what: str, method: str, path: str, params: dict[str, Any] | None = None, body: Any = None) -> Any:
        entry: dict[str, Any] = {"what": what, "method": method, "path": path, "params": dict(params or {}),
                                 "body": body}
        try:
            answer = real(what, method, path, params, body)
        except HttpError as exc:
            entry["status"] = exc.status
            recorded.append(entry)
            raise
        entry["status"], entry["answer"] = 200, answer
        recorded.append(entry)
        return answer

    adapter.rest.request = request  # type: ignore[method-assign]
    snap = adapter.snapshot()
    ids = {n.name: n.id for n in snap.nodes}
    names = sorted(ids)
    plan = Plan(cluster="c", product="elasticsearch", mode="node", batches=(), settings=(), tuning=(),  # type: ignore[arg-type]
                estimate_s=0, problems=(), node_ids=ids)
    indices = sorted({c.index for c in snap.shards if not c.index.startswith(".")})
    for name in names:
        adapter.gate_snapshot(plan, (name,))
        adapter.gate_snapshot(plan, (name,), proof=True)
    node_ids = [ids[n] for n in names]
    adapter.held_by(node_ids[:1])
    adapter.indices_on(node_ids[:1])
    adapter.lease_views(node_ids[:1])
    adapter.lease_stats_of(indices[:2])
    adapter.recoveries_of(indices[:2], names[:1])
    adapter.replicas_of([*indices, "deleted-meanwhile"])
    adapter.shards_of([*indices[:1], "deleted-meanwhile"])
    adapter.present_nodes([*node_ids, "an-id-the-cluster-does-not-have"])
    adapter.copies_held([node_ids[0], "an-id-the-cluster-does-not-have"])
    adapter.assigned_to(node_ids[:2])
    adapter.live_identity(replace(plan), names[0])
    adapter.zones()
    adapter.health_summary()
    adapter.live_settings([("persistent", "cluster.routing.allocation.enable")])
    adapter.unassigned_copies()
    adapter.search_counters()
    return recorded


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cluster", default="sandbox")
    parser.add_argument("--out", type=Path, default=Path("tests/fixtures/contract"))
    args = parser.parse_args()
    target = open_target(args.cluster, None)
    adapter = target.cluster
    if not isinstance(adapter, ShardClusterAdapter):
        print("the contract is the shard adapter's (Elasticsearch, OpenSearch)", file=sys.stderr)
        return 2
    recorded = capture(adapter)
    snap = adapter.snapshot()
    version = snap.nodes[0].version
    layout = {"product": target.inv.cluster.product, "version": version,
              "nodes": [{"name": n.name, "roles": list(n.roles), "zone": n.zone}
                        for n in sorted(snap.nodes, key=lambda n: n.name)],
              "node_ids": {n.name: n.id for n in snap.nodes},
              "indices": {}}
    for c in snap.shards:
        shards, copies = layout["indices"].setdefault(c.index, [0, 0])
        layout["indices"][c.index] = [max(shards, c.shard + 1), copies + 1]
    layout["indices"] = {i: {"shards": s, "replicas": n // s - 1} for i, (s, n) in layout["indices"].items()}
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"{layout['product']}-{version}.json"
    path.write_text(json.dumps({**layout, "requests": recorded}, indent=1, sort_keys=True) + "\n")
    print(f"{len(recorded)} requests and their answers written to {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
