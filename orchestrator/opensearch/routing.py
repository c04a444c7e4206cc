"""Zone mode on OpenSearch: before a zone stops, weighted shard routing sends searches to the other
zones (weight 0 for the zone leaving); once it has recovered, the weights from before the run are put
back exactly (none, if none were set). Writes are not affected: they go to primaries wherever they are.
"""

from __future__ import annotations

from orchestrator.opensearch.adapter import WEIGHTS_SCOPE, OpenSearchAdapter, weights_key
from orchestrator.restart.context import RunContext
from orchestrator.restart.events import Event
from orchestrator.restart.journal import BatchRecord
from orchestrator.restart.plan import Mode
from orchestrator.restart.steps import restore_settings, set_temporarily
from orchestrator.shards.discover import AWARENESS, awareness_in_force


def weights_without(zones: list[str], leaving: set[str], current: dict[str, str] | None) -> dict[str, str]:
    """The weights that send no search to ``leaving`` and keep the others as they are (1 where unset)."""
    return {z: "0.0" if z in leaving else (current or {}).get(z, "1.0") for z in zones}


def weigh_away_searches(ctx: RunContext[OpenSearchAdapter], batch: BatchRecord) -> None:
    if ctx.journal.plan.mode != Mode.ZONE:
        return  # one node at a time: its copies' peers serve the searches
    os = ctx.cluster
    attribute = ctx.inv.cluster.awareness_attribute
    persistent, transient, defaults = os.cluster_settings(include_defaults=True)
    if attribute not in awareness_in_force({**defaults, **persistent, **transient}):
        ctx.emit(Event("step", f"batch {batch.number}: routing weights left alone: {AWARENESS} does not name "
                               f"{attribute}", batch=batch.number))
        return
    ids = {ctx.journal.plan.node_ids.get(n) for n in batch.nodes}
    zone_of = os.zones()  # every node's zone, and nothing else of it
    leaving = {z for node_id, z in zone_of.items() if node_id in ids and z}
    zones = sorted({z for z in zone_of.values() if z} | leaving)
    current, _version = os.routing_weights(attribute)
    set_temporarily(ctx, weights_key(attribute), WEIGHTS_SCOPE, current, weights_without(zones, leaving, current),
                    batch.number)


def restore_search_weights(ctx: RunContext[OpenSearchAdapter], batch: BatchRecord) -> None:
    restore_settings(ctx, {weights_key(ctx.inv.cluster.awareness_attribute)})


STEPS = {"weigh_away_searches": weigh_away_searches, "restore_search_weights": restore_search_weights}
