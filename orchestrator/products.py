"""The product registry: which plug-in restarts which `cluster.product`.

The only place that maps product names to code: the built-in plug-ins below, those another package
installs under the entry-point group `rolling_orchestrator.products` (name = module holding `PRODUCT`).
Plug-ins are imported when first asked for, so `--help` and a
Riak run never load the Elasticsearch client.
"""

from __future__ import annotations

import importlib
from functools import cache
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any

from orchestrator.errors import ConfigError, WrongProduct

if TYPE_CHECKING:
    from orchestrator.config.discovered import Facts
    from orchestrator.config.model import ClusterSection
    from orchestrator.restart.product import Product

ENTRY_POINTS = "rolling_orchestrator.products"
BUILT_IN = {
    "elasticsearch": "orchestrator.es.product",
    "opensearch": "orchestrator.opensearch.product",
    "riak": "orchestrator.riak.product",
}
PLUGINS: dict[str, str] = dict(BUILT_IN)  # name -> module; the installed ones are added when first asked for
# Products for tests (orchestrator.testing): never selectable from an inventory until a test enables them in
# code (`orchestrator.testing.enable()`), as an HTTP library's mock transport is chosen in code, never by a
# configuration string. Against a real endpoint one took the real lock and restricted allocation.
FOR_TESTS = {
    "fake": "orchestrator.testing.fake",
    "fake-elasticsearch": "orchestrator.testing.fake_es.product",
}


def enable_test_products() -> None:
    """Let inventories select the test products (tests, and a pipeline's own tests: docs/pipelines.md)."""
    PLUGINS.update(FOR_TESTS)


@cache
def _installed() -> None:
    """Adds the plug-ins other packages declare (a built-in name is never taken over)."""
    for ep in entry_points(group=ENTRY_POINTS):
        if ep.name not in FOR_TESTS:  # a package cannot make a test product selectable by declaring it
            PLUGINS.setdefault(ep.name, ep.value)


def names() -> tuple[str, ...]:
    _installed()
    return tuple(PLUGINS)


def get(name: str) -> Product[Any, Any]:
    """The plug-in of ``name``, the inventory's `cluster.product`."""
    if name not in PLUGINS and name not in names():  # installed plug-ins are looked for only when needed
        if name in FOR_TESTS:
            raise ConfigError("inventory", [f"cluster.product: {name!r} is a fake for tests, which no production "
                                            "inventory can select; a test enables it in code: "
                                            "`orchestrator.testing.enable()` (docs/pipelines.md)"])
        raise ConfigError("inventory", [f"cluster.product: unknown product {name!r}; known: {', '.join(PLUGINS)}"])
    product: Product[Any, Any] = importlib.import_module(PLUGINS[name]).PRODUCT
    return product


def discover(section: ClusterSection) -> tuple[Facts, str]:
    """What the cluster at the section's endpoint says of itself, and which product it is: each plug-in
    that discovers asks in turn (Elasticsearch first), until one recognises the server."""
    refused: WrongProduct | None = None
    for name in names():
        product = get(name)
        if not product.discovers:
            continue
        try:
            return product.discover(section), name
        except WrongProduct as exc:
            refused = exc
    raise refused or ConfigError("inventory discover", ["no product plug-in can discover a cluster"])


def client_loggers() -> tuple[str, ...]:
    """Every plug-in's client request loggers, for `-v` before a product is known."""
    return tuple(dict.fromkeys(logger for name in names() for logger in get(name).client_loggers))
