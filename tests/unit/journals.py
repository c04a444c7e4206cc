"""Journals for unit tests: a run spec around a plan, without a cluster or an inventory file."""

from __future__ import annotations

from typing import Any

from orchestrator.restart.journal import BatchRecord, Journal, NodeRecord, RunOptions, RunSpec
from orchestrator.restart.plan import Batch, Mode, Plan


def plan_of(batches: list[list[str]], product: str = "elasticsearch", mode: Mode = Mode.NODE,
            estimate_s: float = 80.0) -> Plan:
    return Plan(cluster="c", product=product, mode=mode,
                batches=tuple(Batch(number=i, label=", ".join(nodes), nodes=tuple(nodes), estimate_s=estimate_s)
                              for i, nodes in enumerate(batches, start=1)),
                settings=(), tuning=(), estimate_s=estimate_s * len(batches), problems=(),
                node_ids={n: f"id-{n}" for nodes in batches for n in nodes})


def spec_of(plan: Plan, options: RunOptions | None = None, inventory: dict[str, Any] | None = None) -> RunSpec:
    return RunSpec(mode=plan.mode, options=options or RunOptions(), playbook={"name": "p", "batch": []},
                   inventory_path="inv.yaml", inventory=inventory or {}, plan=plan)


def journal_of(plan: Plan, **fields: Any) -> Journal:
    return Journal(run_id=fields.pop("run_id", "r1"), cluster=plan.cluster, spec=spec_of(plan),
                   batches=[BatchRecord(b.number, b.label, list(b.nodes)) for b in plan.batches],
                   nodes={n: NodeRecord(n, b.number) for b in plan.batches for n in b.nodes}, **fields)
