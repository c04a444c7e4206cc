"""The real sandbox for integration tests: one at a time, reused while the wanted shape matches."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from elasticsearch import Elasticsearch

from tests.helpers import orchestrate

pytestmark = pytest.mark.integration

# Tests run grouped by the sandbox they need, so each shape is started once: a `sandbox up` costs
# 15-20 s. Unmarked tests use the default 3-node sandbox; `sandbox_last` tests end their group.
SHAPE_ORDER = ["default", "zones", "es8", "local", "riak"]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def key(item: pytest.Item) -> tuple[int, int]:
        marker = item.get_closest_marker("sandbox_shape")
        group = SHAPE_ORDER.index(marker.args[0]) if marker else 0
        return (group, 1 if item.get_closest_marker("sandbox_last") else 0)

    items.sort(key=key)  # stable: file order is kept within a group


@dataclass(frozen=True)
class Shape:
    nodes: int = 3
    zones: int = 1
    es_version: str = "9.5.3"
    hosts: str = "netns"
    product: str = "elasticsearch"


class SandboxManager:
    def __init__(self) -> None:
        self.shape: Shape | None = None

    def status(self) -> dict[str, Any]:
        proc = orchestrate("sandbox", "status", "--json")
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)

    def get(self, shape: Shape, fresh: bool = False) -> dict[str, Any]:
        if self.shape == shape and not fresh:
            info = self.status()
            if info.get("running"):
                return info
        orchestrate("sandbox", "down")
        proc = orchestrate("sandbox", "up", "--nodes", str(shape.nodes), "--zones", str(shape.zones),
                           "--es-version", shape.es_version, "--hosts", shape.hosts, "--product", shape.product,
                           timeout=600)
        assert proc.returncode == 0, f"sandbox up failed:\n{proc.stderr}"
        self.shape = shape
        return self.status()

    def forget(self) -> None:
        self.shape = None

    def down(self) -> None:
        orchestrate("sandbox", "down")
        self.shape = None


@pytest.fixture(scope="session")
def sandboxes() -> Iterator[SandboxManager]:
    manager = SandboxManager()
    yield manager
    manager.down()


@pytest.fixture(autouse=True)
def _no_leftover_lock(sandboxes: SandboxManager) -> None:
    """A failed test must not leave a lock that fails the next one for the wrong reason."""
    yield  # type: ignore[misc]
    if sandboxes.shape is not None:
        orchestrate("unlock", "--cluster", "sandbox", "--yes")


def es_client(info: dict[str, Any]) -> Elasticsearch:
    return Elasticsearch(info["endpoints"], request_timeout=30)
