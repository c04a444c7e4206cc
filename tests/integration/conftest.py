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


@dataclass(frozen=True)
class Shape:
    nodes: int = 3
    zones: int = 1
    es_version: str = "9.5.3"
    hosts: str = "netns"


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
                           "--es-version", shape.es_version, "--hosts", shape.hosts, timeout=600)
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


def es_client(info: dict[str, Any]) -> Elasticsearch:
    return Elasticsearch(info["endpoints"], request_timeout=30)
