"""The sandbox's set-up errors are sentences for the operator, not tracebacks."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.errors import SandboxError
from orchestrator.sandbox import hosts, java_home
from orchestrator.sandbox.lifecycle import zone_of


def test_no_suitable_jdk_says_what_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    old = tmp_path / "java-17"
    (old / "bin").mkdir(parents=True)
    (old / "bin" / "java").write_text('#!/bin/sh\necho \'openjdk version "17.0.15"\' >&2\n')
    (old / "bin" / "java").chmod(0o755)
    monkeypatch.setattr(java_home, "JVM_ROOT", tmp_path)
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.delenv("ORCHESTRATOR_JAVA_HOME", raising=False)
    with pytest.raises(SandboxError) as err:
        java_home.find_java_home("9.5.3")
    assert "needs a JDK 21 or later" in str(err.value) and "java 17" in str(err.value)
    assert java_home.required_java("8.19.21") == 17


def test_netns_mode_needs_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hosts.os, "geteuid", lambda: 1000)
    with pytest.raises(SandboxError) as err:
        hosts.check_prerequisites()
    assert "--hosts local" in str(err.value)


@pytest.mark.parametrize(("index", "zones", "zone"), [(1, 3, "zone-1"), (4, 3, "zone-1"), (6, 3, "zone-3"),
                                                      (2, 1, "zone-1")])
def test_nodes_spread_round_robin_over_zones(index: int, zones: int, zone: str) -> None:
    assert zone_of(index, zones) == zone
