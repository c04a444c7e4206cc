"""The sandbox's set-up errors are sentences for the operator, not tracebacks."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from orchestrator.errors import SandboxError
from orchestrator.sandbox import hosts, java_home
from orchestrator.sandbox.host_cgroups import check_cpu_quota
from orchestrator.sandbox.layout import SandboxPaths
from orchestrator.sandbox.lifecycle import up
from orchestrator.sandbox.node_setup import zone_of
from orchestrator.sandbox.shape import SandboxShape


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


def test_a_cpu_limit_without_the_cpu_controller_is_refused_before_anything(tmp_path: Path) -> None:
    with pytest.raises(SandboxError, match="--host-cpus needs the cgroup v1 CPU controller"):
        check_cpu_quota(0.5, tmp_path / "cpu.cfs_quota_us")
    check_cpu_quota(0, tmp_path / "cpu.cfs_quota_us")  # no limit asked: nothing needed
    (tmp_path / "cpu.cfs_quota_us").write_text("-1\n")
    check_cpu_quota(0.5, tmp_path / "cpu.cfs_quota_us")


@pytest.mark.parametrize(("index", "zones", "zone"), [(1, 3, "zone-1"), (4, 3, "zone-1"), (6, 3, "zone-3"),
                                                      (2, 1, "zone-1")])
def test_nodes_spread_round_robin_over_zones(index: int, zones: int, zone: str) -> None:
    assert zone_of(index, zones) == zone


@pytest.mark.parametrize(("shape", "said"), [
    (SandboxShape(nodes=13), "--nodes must be between 1 and 12"),
    (SandboxShape(nodes=3, zones=4), "--zones must be between 1 and the number of nodes"),
    (SandboxShape(nodes=3, masters=4), "--masters must be between 1"),
    (SandboxShape(product="riak", masters=1), "--masters is for an Elasticsearch or OpenSearch sandbox"),
    (SandboxShape(product="riak", mode="local"), "the Riak sandbox needs --hosts netns"),
    (SandboxShape(product="opensearch", bastion=True), "--bastion is for an Elasticsearch sandbox"),
    (SandboxShape(mode="local", packages=True), "--packages is for an Elasticsearch or OpenSearch sandbox"),
    (SandboxShape(product="riak", also_versions=("9.5.3",)), "--also-version is for an Elasticsearch"),
    (SandboxShape(product="opensearch", secured=True), "a secured sandbox is for Elasticsearch"),
    (SandboxShape(host_cpus=0.001), "--host-cpus must be 0 (no limit) or between 0.01 and 64"),
    (SandboxShape(host_cpus=65), "--host-cpus must be 0 (no limit) or between 0.01 and 64"),
    (SandboxShape(host_cpus=-1), "--host-cpus must be 0 (no limit) or between 0.01 and 64"),
    (SandboxShape(mode="local", host_cpus=0.5), "--host-cpus is for an Elasticsearch or OpenSearch sandbox with "
                                                "--hosts netns"),
    (SandboxShape(product="riak", host_cpus=0.5), "--host-cpus is for an Elasticsearch or OpenSearch sandbox"),
])
def test_a_shape_that_cannot_be_built_is_refused_before_anything_is_touched(tmp_path: Path, shape: SandboxShape,
                                                                           said: str) -> None:
    assert [p for p in shape.problems() if said in p], shape.problems()
    paths = SandboxPaths(root=tmp_path / "sandbox")
    with pytest.raises(SandboxError, match=re.escape(said)):
        up(paths, shape, 60, lambda _m: None)
    assert not (tmp_path / "sandbox").exists(), "nothing written"


def test_the_shapes_the_suite_builds_can_be_built() -> None:
    for shape in (SandboxShape(), SandboxShape(nodes=6, zones=2, masters=3), SandboxShape(bastion=True, secured=True),
                  SandboxShape(product="opensearch", packages=True, also_versions=("3.8.0",)),
                  SandboxShape(product="riak"), SandboxShape(mode="local", nodes=1),
                  SandboxShape(nodes=1, host_cpus=0.5), SandboxShape(host_cpus=0.01), SandboxShape(host_cpus=64)):
        assert shape.problems() == [], shape
