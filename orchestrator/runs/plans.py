"""Planning: the product's pure plan over a snapshot of the live cluster, or of a saved one."""

from __future__ import annotations

import json
from pathlib import Path

from orchestrator import products
from orchestrator.config.inventory import load_inventory
from orchestrator.errors import ConfigError
from orchestrator.paths import write_atomically
from orchestrator.restart.journal import RunOptions
from orchestrator.restart.plan import Mode, Plan
from orchestrator.runs.target import Target, load_procedure
from orchestrator.tuning.apply import profile_summary


def options_for(target_allow_yellow: bool, allow_yellow: bool) -> RunOptions:
    """The run's options: a flag given on the command line, or set in the inventory."""
    return RunOptions(allow_yellow=allow_yellow or target_allow_yellow)


def make_plan(target: Target, mode: Mode, options: RunOptions, save_snapshot: Path | None = None) -> Plan:
    """Plan from the live cluster (reads only); optionally keep the snapshot it was made from."""
    snapshot = target.cluster.snapshot()
    if save_snapshot is not None:
        try:
            write_atomically(save_snapshot, json.dumps(target.product.dump_snapshot(snapshot)), mode=0o644)
        except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the path
            raise ConfigError(repr(str(save_snapshot))[:300], [f"cannot write the snapshot: "
                                                               f"{getattr(exc, 'strerror', None) or exc}"]) from None
    return target.product.plan(target.inv, snapshot, mode, options, profile_summary(target.inv))


def plan_from_file(cluster: str | None, config: Path | None, snapshot: Path, mode: Mode,
                   allow_yellow: bool) -> tuple[Plan, list[str]]:
    """Plan from a saved cluster state: the same decisions, no cluster needed."""
    inv, _path = load_inventory(cluster, config)
    product = products.get(inv.cluster.product)
    procedure = load_procedure(inv, product)
    snap = product.load_snapshot(snapshot)
    plan = product.plan(inv, snap, mode, options_for(inv.allow_yellow, allow_yellow), profile_summary(inv))
    return plan, [name for name, _ in procedure.batch]
