"""Bytes reused on restart, with and without waiting for retention leases (issue 16's data set).

3 nodes, 40 indices of 3 shards and 1 replica (240 copies: one shard copy weighs about 0.4 % of
the data), 80,000 documents. Runs: right after indexing with the default `lease_wait_min_bytes`
(1gb: the sandbox's copies are far smaller, so the run does not wait) and with `0b` (always
wait); then idle runs back to back; then under a write load, with `0b` and with the default. Then
(unless --no-zone) the same data set on 6 nodes in 3 zones (3 of them master-eligible), restarted a zone at a
time with `0b`: after indexing, idle, under load; then the window's procedure (`--max-unavailable 2`, issue 57:
allocation left enabled, each index waiting for the nodes away), no zone known to the tool so that two data nodes
that share no shard may be away together, with `0b`: idle and under load. The window must reuse what one at a
time does: no copy copied in full from a peer.

    python -m tests.benchmarks.bench_reuse [--idle-runs 5] [--idle-wait] [--no-zone] [--out reports/bench-reuse.json]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import yaml

from tests.benchmarks.bench_restart import REPO, measured_restart, orchestrate, sandbox

INDICES, DOCS = 40, 80_000


def load() -> None:
    proc = orchestrate("sandbox", "load", "--docs", str(DOCS), "--indices", str(INDICES))
    if proc.returncode != 0:
        raise SystemExit(f"sandbox load failed: {proc.stderr[-2000:]}")


def always_wait_inventory(out_dir: Path, zones_known: bool = True) -> Path:
    info = json.loads(orchestrate("sandbox", "status", "--json").stdout)
    inv = yaml.safe_load(Path(info["inventory"]).read_text())
    inv.setdefault("recovery", {})["lease_wait_min_bytes"] = "0b"
    if not zones_known:  # an attribute no node has: the tool knows no zone
        inv["cluster"]["awareness_attribute"] = "rack"
        for node in inv["nodes"]:
            node.pop("zone", None)
    path = out_dir / f"bench-reuse-inventory{'' if zones_known else '-no-zones'}.yaml"
    path.write_text(yaml.safe_dump(inv))
    return path


def row(label: str, run: dict[str, Any]) -> dict[str, Any]:
    run["label"] = label
    print(f"{label:<34} wall {run['wall_s']:>6.1f} s  reuse {run['reuse_ratio']!s:>7}  "
          f"copied {run['bytes_from_peers']:>9} B  lease waits {run['lease_waits_s']}", flush=True)
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--idle-runs", type=int, default=5)
    parser.add_argument("--idle-wait", action="store_true",
                        help="idle runs with lease_wait_min_bytes 0b (always wait) instead of the default")
    parser.add_argument("--zone", action=argparse.BooleanOptionalAction, default=True,
                        help="then zone mode on 6 nodes in 3 zones, idle and under load (0b)")
    parser.add_argument("--out", type=Path, default=REPO / "reports" / "bench-reuse.json")
    args = parser.parse_args()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    sandbox(3, 1, docs=0)
    wait_always = always_wait_inventory(args.out.parent)
    runs = []
    load()
    runs.append(row("after indexing, default (1gb)", measured_restart("node")))
    load()  # the same documents again: every shard written anew
    runs.append(row("after indexing, lease_wait_min_bytes 0b", measured_restart("node", config=wait_always)))
    for i in range(args.idle_runs):
        if args.idle_wait:
            runs.append(row(f"idle {i + 1}, 0b", measured_restart("node", config=wait_always)))
        else:
            runs.append(row(f"idle {i + 1}, default", measured_restart("node")))
    runs.append(row("under load, 0b", measured_restart("node", load=True, config=wait_always)))
    runs.append(row("under load, default (1gb)", measured_restart("node", load=True)))
    if args.zone:  # the same data set on 6 nodes in 3 zones, a zone (2 nodes) per batch
        sandbox(6, 3, docs=0, masters=3)
        wait_always = always_wait_inventory(args.out.parent)
        load()
        runs.append(row("zone: after indexing, 0b", measured_restart("zone", config=wait_always)))
        runs.append(row("zone: idle, 0b", measured_restart("zone", config=wait_always)))
        runs.append(row("zone: under load, 0b", measured_restart("zone", load=True, config=wait_always)))
        window, no_zones = ("--max-unavailable", "2"), always_wait_inventory(args.out.parent, zones_known=False)
        runs.append(row("window of 2: idle, 0b", measured_restart("node", config=no_zones, extra=window)))
        runs.append(row("window of 2: under load, 0b", measured_restart("node", load=True, config=no_zones,
                                                                         extra=window)))
    orchestrate("sandbox", "down")
    args.out.write_text(json.dumps({"indices": INDICES, "docs": DOCS, "runs": runs}, indent=2))
    print(f"written to {args.out}")


if __name__ == "__main__":
    main()
