"""What a run's journal costs it: one save (the whole journal written and synced), for clusters of
100, 1,000 and 5,000 nodes in node mode. A run saves its journal some 40 times per batch (each step,
phase, undo record and timing), so a save is paid 40 times over for every node.

The same saves with the run's copy of its journal kept in the cluster (restart/journal_copy.py) over the
fake cluster engine: the copy's own cost (encoding, digests; not the network's), and the bytes it sends to
the cluster per save, over two rings of saves (so that the whole journal written again is counted).

    python -m tests.benchmarks.bench_journal [--out reports/bench-journal.json]   (a minute, no cluster)
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from orchestrator.restart.journal import BatchRecord, Journal, NodeRecord, RunOptions, RunSpec
from orchestrator.restart.journal_copy import JournalCopy, ring_for
from orchestrator.restart.phases import Phase
from orchestrator.restart.plan import Batch, Mode, Plan
from orchestrator.testing.fake import FakeCluster
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


class Counted(FakeCluster):
    """The fake cluster's lock documents, each write's bytes counted."""

    sent: int = 0

    def create_lock(self, index: str, doc_id: str, body: dict[str, Any]) -> bool:
        self.sent += len(json.dumps(body))
        return super().create_lock(index, doc_id, body)

    def renew_lock(self, index: str, doc_id: str, run_id: str, update: dict[str, Any]) -> bool:
        self.sent += len(json.dumps(update))
        return super().renew_lock(index, doc_id, run_id, update)


def measured_with_copy(nodes: int, where: Path) -> dict[str, float]:
    j = journal_of(nodes, where)
    cluster = Counted.of([])
    j.save()
    j.copied_to(JournalCopy(cluster, j.run_id, "bench"))
    saves = 2 * ring_for(j.to_text())
    cluster.sent = 0
    began = time.perf_counter()
    for n in range(saves):
        j.timed(f"es-{n % nodes}", "stop", 1.0)
    return {"nodes": nodes, "saves": saves, "save_ms": round((time.perf_counter() - began) / saves * 1000, 2),
            "copy_kb_per_save": round(cluster.sent / saves / 1000, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=REPO / "reports" / "bench-journal.json")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        rows = [measured(n, Path(tmp)) for n in (100, 1000, 5000)]
        copied = [measured_with_copy(n, Path(tmp)) for n in (100, 1000, 5000)]
    print(f"{'nodes':>6} {'journal MB':>10} {'save ms':>8} {'40 saves s':>10}")
    for r in rows:
        print(f"{r['nodes']:>6} {r['megabytes']:>10} {r['save_ms']:>8} {r['per_batch_s']:>10}")
    print(f"target: a save of the 5,000-node journal <= {TARGET_MS:.0f} ms: "
          + ("met" if rows[-1]["save_ms"] <= TARGET_MS else "MISSED"))
    print("\nwith the cluster's copy (fake cluster: the copy's own cost, and the bytes it sends per save)")
    print(f"{'nodes':>6} {'saves':>6} {'save ms':>8} {'KB sent/save':>12}")
    for r in copied:
        print(f"{r['nodes']:>6} {r['saves']:>6} {r['save_ms']:>8} {r['copy_kb_per_save']:>12}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"rows": rows, "with_copy": copied, "target_ms": TARGET_MS}, indent=2))


if __name__ == "__main__":
    main()
