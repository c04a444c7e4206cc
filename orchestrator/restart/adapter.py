"""The one interface between the restart engine and a product's cluster (Elasticsearch, OpenSearch,
Riak, or another plug-in's).

The engine and the generic steps (stop, tune, start, rejoin, command steps), status, the lock
and the report only call what is here. What differs per product (allocation and recovery for
Elasticsearch and OpenSearch, handoffs for Riak) lives in that product's own steps, which use its
concrete adapter.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any, Protocol

from typing_extensions import TypeVar

from orchestrator.restart.plan import Plan
from orchestrator.restart.search_figures import SearchCounters

SnapshotT_co = TypeVar("SnapshotT_co", covariant=True)


class ClusterAdapter(Protocol[SnapshotT_co]):
    """Generic over the product's snapshot type: its plan, gate and stop check read what its adapter
    took, and mypy checks that they agree (restart/product.py)."""

    calls: int  # requests or admin commands sent to the cluster, for the run's figures

    def snapshot(self) -> SnapshotT_co:
        """Everything the product's plan is made from (an immutable snapshot)."""
        ...

    def gate_snapshot(self, plan: Plan, restarting: Collection[str], proof: bool = False,
                      window: Collection[str] | None = None) -> SnapshotT_co:
        """What the product's batch gate and stop check read about the batch of ``restarting`` (inventory
        names): as little as decides for that batch (a cluster of thousands of nodes is not read whole
        before each batch), asked of nodes other than ``restarting`` first. With ``proof`` (the last look
        before a stop) what the stop is decided on is read as it is, never assumed: an answer that leaves
        out part of what was asked is an error (IncompleteAnswer), never "nothing there". With ``window`` (a
        window's proof, restart/window_run.py: the nodes in the window, inventory names) what only a gate of one
        batch at a time reads is left out: the window keeps the cluster yellow, and its proof asks no
        explanation of it; nodes away are expected, and only a node missing beyond the window's and
        ``restarting`` is looked for by name."""
        ...

    def live_identity(self, plan: Plan, name: str) -> str | None:
        """The node's current process identity, or None when it is not serving (down or not joined)."""
        ...

    def await_identity(self, plan: Plan, name: str, timeout_s: float) -> str | None:
        """As live_identity; when the node is not serving, a product that can wait server-side for it
        to join does so, up to ``timeout_s`` (one request instead of polling); others answer at once."""
        ...

    def put_settings(self, scope: str, values: dict[str, Any]) -> None:
        """Write several temporary settings of one scope (None: back to unset), in one request where the
        product takes them so."""
        ...

    def live_settings(self, wanted: list[tuple[str, str]]) -> list[Any]:
        """The values in force now of each (scope, key), for `status` (None: unset or unknown)."""
        ...

    def health_summary(self) -> dict[str, Any]:
        """A few figures for `status`: at least `status` and `number_of_nodes`, and a one-line `text`."""
        ...

    def cluster_identity(self) -> str | None:
        """What tells this cluster from any other (Elasticsearch's cluster UUID), or None for a product without
        one: the cluster's copy of a run's journal names it, and a copy moved from another cluster is refused."""
        ...

    def search_counters(self) -> dict[str, SearchCounters] | None:
        """Each serving node's search totals since its start (restart/search_figures.py), or None for a product
        without search figures: what searchers see, watched through a run."""
        ...

    def search_once(self, index: str, query: dict[str, Any]) -> bool:
        """Run one search of ``query`` on ``index`` (the inventory's probe, timed by the caller), its answer
        thrown away; False for a product without searches. A search that fails raises a ClusterError."""
        ...

    def create_lock(self, index: str, doc_id: str, body: dict[str, Any]) -> bool: ...

    def read_lock(self, index: str, doc_id: str) -> dict[str, Any] | None: ...

    def delete_lock(self, index: str, doc_id: str) -> None: ...

    def renew_lock(self, index: str, doc_id: str, run_id: str, update: dict[str, Any]) -> bool:
        """Update the lock's fields (`renewed`, `state`) if ``run_id`` still holds it; False when it does not."""
        ...

    def write_lock_document(self, index: str, doc_id: str, body: dict[str, Any]) -> None:
        """A document beside the lock written whole, over whatever it held (the journal's copy, which the run that
        holds the lock alone writes: restart/journal_copy.py): one write, no read before it."""
        ...


# A product's adapter type. Generic code (the engine, the steps every product shares) names no
# product: it sees `ClusterAdapter[Any]`, the default; a product's own steps see its concrete adapter.
AdapterT = TypeVar("AdapterT", bound="ClusterAdapter[Any]", default="ClusterAdapter[Any]")
AdapterT_co = TypeVar("AdapterT_co", bound="ClusterAdapter[Any]", default="ClusterAdapter[Any]", covariant=True)
