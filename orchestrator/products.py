"""The product registry: which plug-in restarts which `cluster.product`.

The only place that maps product names to code. Plug-ins are imported when first asked for,
so `--help` and a Riak run never load the Elasticsearch client.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from orchestrator.errors import ConfigError

if TYPE_CHECKING:
    from orchestrator.restart.product import Product

PLUGINS = {
    "elasticsearch": "orchestrator.es.product",
    "opensearch": "orchestrator.opensearch.product",
    "riak": "orchestrator.riak.product",
}


def names() -> tuple[str, ...]:
    return tuple(PLUGINS)


def get(name: str) -> Product[Any, Any]:
    """The plug-in of ``name``, the inventory's `cluster.product`."""
    if name not in PLUGINS:
        raise ConfigError("inventory", [f"cluster.product: unknown product {name!r}; known: {', '.join(PLUGINS)}"])
    product: Product[Any, Any] = importlib.import_module(PLUGINS[name]).PRODUCT
    return product
