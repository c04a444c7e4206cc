"""What a run's journal costs it: one save (the whole journal written and synced), for clusters of
100, 1,000 and 5,000 nodes in node mode. A run saves its journal some 40 times per batch (each step,
phase, undo record and timing), so a save is paid 40 times over for every node.

    python -m tests.benchmarks.bench_journal [--out reports/bench-journal.json]   (a few seconds, no cluster)
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from orchestrator.restart.journal import BatchRecord, Journal, NodeRecord, RunOptions, RunSpec
from orchestrator.restart.phases import Phase
from orchestrator.restart.plan import Batch, Mode, Plan
from tests.benchmarks.bench_restart import REPO

TARGET_MS = 20.0  # at 5,000 nodes: 40 saves a batch stay under a second
SAVES = 20


def journal_of(nodes: int, where: Path) -> Journal:
    names = [f"es-{i}" for i in range(nodes)]
    plan = Plan(cluster="big", product="elasticsearch", mode=Mode.NODE,
                batches=tuple(Batch(number=i + 1, label=n, nodes=(n,), estimate_s=90.0, problems=(),
                                    figures={"copies": 200}) for i, n in enumerate(names)),
                settings=(), tuning=(), estimate_s=90.0 * nodes, problems=(),
                node_ids={n: f"{i:022d}" for i, n in enumerate(names)})
    inventory = {"cluster": {"name": "big"}, "nodes": [{"name": n, "host": f"10.0.{i // 256}.{i % 256}",
                                                         "data_paths": ["/var/lib/elasticsearch"]}
                                                        for i, n in enumerate(names)]}
    spec = RunSpec(mode=Mode.NODE, options=RunOptions(), playbook={}, inventory_path="/etc/big.yaml",
                   inventory=inventory, plan=plan)
    j = Journal(run_id="bench", cluster="big", spec=spec,
                batches=[BatchRecord(number=i + 1, label=n, nodes=[n]) for i, n in enumerate(names)],
                nodes={n: NodeRecord(name=n, batch=i + 1) for i, n in enumerate(names)})
    j.path = where / f"{j.run_id}.json"  # a journal is named after its run
    return j


def measured(nodes: int, where: Path) -> dict[str, float]:
    j = journal_of(nodes, where)
    j.save()  # the first save encodes the spec
    began = time.perf_counter()
    for n in range(SAVES):  # as a run does: a small change, then the whole journal saved
        j.timed(f"es-{n % nodes}", "stop", 1.0)
    save_ms = (time.perf_counter() - began) / SAVES * 1000
    j.set_phase("es-0", Phase.STOPPING)
    assert Journal.load(j.path).nodes["es-0"].phase == "stopping"
    return {"nodes": nodes, "megabytes": round(j.path.stat().st_size / 1e6, 2), "save_ms": round(save_ms, 1),
            "per_batch_s": round(save_ms * 40 / 1000, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=REPO / "reports" / "bench-journal.json")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        rows = [measured(n, Path(tmp)) for n in (100, 1000, 5000)]
    print(f"{'nodes':>6} {'journal MB':>10} {'save ms':>8} {'40 saves s':>10}")
    for r in rows:
        print(f"{r['nodes']:>6} {r['megabytes']:>10} {r['save_ms']:>8} {r['per_batch_s']:>10}")
    print(f"target: a save of the 5,000-node journal <= {TARGET_MS:.0f} ms: "
          + ("met" if rows[-1]["save_ms"] <= TARGET_MS else "MISSED"))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"rows": rows, "target_ms": TARGET_MS}, indent=2))


if __name__ == "__main__":
    main()
