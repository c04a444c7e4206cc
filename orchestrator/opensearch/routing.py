"""Zone mode and the window on OpenSearch: before a zone stops, weighted shard routing sends searches to the
other zones (weight 0 for the zone leaving); once it has recovered, the weights from before the run are put
back exactly (none, if none were set). Writes are not affected: they go to primaries wherever they are.

In a window (`--max-unavailable`), the nodes away share one zone's weight: each node's batch weighs its zone
away (idempotent: the window's earlier nodes may have), and only the last node of the window to leave puts
the weights back. A lock makes "who is in the window" and the write one step, since the window's nodes run
in threads of their own.
"""

from __future__ import annotations

import threading

from orchestrator.opensearch.adapter import WEIGHTS_SCOPE, OpenSearchAdapter, weights_key
from orchestrator.restart.budget import window_asked
from orchestrator.restart.context import RunContext
from orchestrator.restart.events import Event
from orchestrator.restart.journal import BatchRecord
from orchestrator.restart.plan import Mode
from orchestrator.restart.steps import restore_settings, set_temporarily
from orchestrator.restart.window_run import in_the_window
from orchestrator.shards.discover import AWARENESS, awareness_in_force

WEIGHTS_LOCK = threading.Lock()


def weights_without(zones: list[str], leaving: set[str], current: dict[str, str] | None) -> dict[str, str]:
    """The weights that send no search to ``leaving`` and keep the others as they are (1 where unset)."""
    return {z: "0.0" if z in leaving else (current or {}).get(z, "1.0") for z in zones}


def weighs_zones(ctx: RunContext[OpenSearchAdapter]) -> bool:
    """Zone mode, or a window (which holds one zone at a time): one node at a time, its copies' peers serve."""
    return ctx.journal.plan.mode == Mode.ZONE or window_asked(ctx.options.max_unavailable)


def weigh_away_searches(ctx: RunContext[OpenSearchAdapter], batch: BatchRecord) -> None:
    if not weighs_zones(ctx):
        return
    os = ctx.cluster
    attribute = ctx.inv.cluster.awareness_attribute
    persistent, transient, defaults = os.cluster_settings(include_defaults=True)
    if attribute not in awareness_in_force({**defaults, **persistent, **transient}):
        ctx.emit(Event("step", f"batch {batch.number}: routing weights left alone: {AWARENESS} does not name "
                               f"{attribute}", batch=batch.number))
        return
    zone_of = os.zones()  # every node's zone, and nothing else of it
    windowed = window_asked(ctx.options.max_unavailable)
    with WEIGHTS_LOCK:
        away = [*batch.nodes, *(in_the_window(ctx.journal, batch) if windowed else [])]
        ids = {ctx.journal.plan.node_ids.get(n) for n in away}
        leaving = {z for node_id, z in zone_of.items() if node_id in ids and z}
        zones = sorted({z for z in zone_of.values() if z} | leaving)
        current, _version = os.routing_weights(attribute)
        # A window's record is the run's, not one node's: no node's own undo (a last look's refusal) puts the
        # weights back under another node of the window.
        set_temporarily(ctx, weights_key(attribute), WEIGHTS_SCOPE, current, weights_without(zones, leaving, current),
                        None if windowed else batch.number)


def restore_search_weights(ctx: RunContext[OpenSearchAdapter], batch: BatchRecord) -> None:
    with WEIGHTS_LOCK:
        still_away = in_the_window(ctx.journal, batch) if window_asked(ctx.options.max_unavailable) else []
        if still_away:
            ctx.emit(Event("step", f"batch {batch.number}: routing weights kept while {', '.join(still_away)} "
                                   "of the window are away", batch=batch.number))
            return
        restore_settings(ctx, {weights_key(ctx.inv.cluster.awareness_attribute)})


STEPS = {"weigh_away_searches": weigh_away_searches, "restore_search_weights": restore_search_weights}
