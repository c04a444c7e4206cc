"""`orchestrate fleet` (issue 60) over clusters of the fake cluster engine: a canary, then waves, at most the
fleet's concurrency at once; a failing cluster stops the waves after its own and no more of its wave is begun;
`fleet resume` leaves the clusters that succeeded alone and finishes the rest, each node once."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
import yaml

from orchestrator.config.fleet import Fleet, load_fleet
from orchestrator.errors import ConfigError
from orchestrator.fleet import new_fleet_id, restart_fleet
from orchestrator.testing.fake import LIMIT
from tests.unit.test_airflow_fleet import NODES, add_cluster, fake_fleet  # noqa: F401  (a fixture, used by name)


def write_fleet(configs: Path, **fleet: object) -> Path:
    path = configs.parent / "fleet.yaml"
    path.write_text(yaml.safe_dump(fleet))
    return path


def test_a_canary_then_waves_at_most_concurrency_at_once_each_node_once(fake_fleet: Path) -> None:  # noqa: F811
    names = ["canary", "eu-1", "eu-2", "eu-3", "us-1"]
    clusters = {n: add_cluster(fake_fleet, n) for n in names}
    path = write_fleet(fake_fleet, canary="canary", waves=[["eu-1", "eu-2", "eu-3"], ["us-1"]], concurrency=2)
    running: set[str] = set()
    most = [0]
    order: list[str] = []
    lock = threading.Lock()

    def said(cluster: str, event) -> None:  # type: ignore[no-untyped-def]
        with lock:
            if event.kind == "run" and event.message.startswith("run ") and " started: " in event.message:
                running.add(cluster)
                order.append(cluster)
                most[0] = max(most[0], len(running))
            elif event.ends_run:
                running.discard(cluster)

    result = restart_fleet(load_fleet(path), new_fleet_id(path), on_event=said)
    assert result.succeeded and result.exit_code == 0, result
    assert [c.result for c in result.clusters] == ["succeeded"] * 5
    assert order[0] == "canary" and order[-1] == "us-1" and set(order[1:4]) == {"eu-1", "eu-2", "eu-3"}, order
    assert 1 <= most[0] <= 2, f"never more than the fleet's concurrency at once: {most[0]}"
    for name, cluster in clusters.items():
        assert [n.starts for n in cluster.nodes.values()] == [1] * len(NODES), name
        assert cluster.settings[("cluster", LIMIT)] == "normal"


def test_a_failed_cluster_stops_the_waves_and_resume_leaves_the_succeeded_alone(fake_fleet: Path) -> None:  # noqa: F811
    clusters = {n: add_cluster(fake_fleet, n, fails=n == "eu-1") for n in ("canary", "eu-1", "eu-2", "us-1")}
    path = write_fleet(fake_fleet, canary="canary", waves=[["eu-1", "eu-2"], ["us-1"]], concurrency=1)
    fleet_id = new_fleet_id(path)
    result = restart_fleet(load_fleet(path), fleet_id)
    outcomes = {c.cluster: c for c in result.clusters}
    assert [outcomes[n].result for n in ("canary", "eu-1", "eu-2", "us-1")] == [
        "succeeded", "failed", "not begun", "not begun"], outcomes
    assert result.exit_code == outcomes["eu-1"].exit_code != 0 and "n2" in outcomes["eu-1"].message
    assert [n.starts for n in clusters["us-1"].nodes.values()] == [0, 0, 0], "no later wave begun"
    assert [n.starts for n in clusters["eu-2"].nodes.values()] == [0, 0, 0], "none more of its wave"

    clusters["eu-1"].nodes["n2"].rejoins = True  # the cause fixed
    from orchestrator.fleet import last_fleet_id

    resumed = restart_fleet(load_fleet(path), last_fleet_id(path))
    assert resumed.fleet_id == fleet_id and resumed.succeeded, resumed
    assert {c.cluster: c.result for c in resumed.clusters} == {
        "canary": "already succeeded", "eu-1": "succeeded", "eu-2": "succeeded", "us-1": "succeeded"}
    for name, cluster in clusters.items():
        assert all(n.starts == 1 for n in cluster.nodes.values()), (name, [n.starts for n in cluster.nodes.values()])
        assert cluster.settings[("cluster", LIMIT)] == "normal"


def test_a_fleet_file_that_is_not_one_is_said_with_its_place(tmp_path: Path) -> None:
    for fleet, said in (({"waves": [["a", "a"]]}, "named more than once"),
                        ({"canary": "c", "waves": [["c"]]}, "named more than once"),
                        ({}, "at least one cluster"), ({"waves": [[]]}, "a wave names at least one cluster"),
                        ({"waves": [["../etc"]]}, "not an inventory name"),
                        ({"waves": [["a"]], "concurrency": 0}, "concurrency"),
                        ({"waves": [["a"]], "parallel": 3}, "parallel")):
        path = tmp_path / "fleet.yaml"
        path.write_text(yaml.safe_dump(fleet))
        with pytest.raises(ConfigError) as raised:
            load_fleet(path)
        assert said in str(raised.value), (fleet, str(raised.value))
    assert Fleet(waves=[["a", "b"]], canary="c").stages() == [["c"], ["a", "b"]]


def test_the_command_refuses_a_bad_fleet_file_and_a_resume_without_a_run(tmp_path: Path) -> None:
    from tests.unit.test_cli_properties import run as orchestrate

    bad = tmp_path / "fleet.yaml"
    bad.write_text("waves: [[a, a]]\n")
    proc = orchestrate("fleet", "restart", str(bad), "--yes")
    assert proc.returncode == 2 and "named more than once" in proc.stderr and "Traceback" not in proc.stderr
    good = tmp_path / "other.yaml"
    good.write_text("waves: [[a]]\n")
    import os
    import subprocess
    import sys

    env = {**os.environ, "ORCHESTRATOR_STATE": str(tmp_path / "state")}
    proc = subprocess.run([sys.executable, "-m", "orchestrator", "fleet", "resume", str(good)], capture_output=True,
                          text=True, env=env, timeout=60)
    assert proc.returncode == 8 and "no fleet run of" in proc.stderr and "Traceback" not in proc.stderr


def test_a_cancel_stops_the_cluster_under_way_at_its_safe_point_and_begins_no_other(fake_fleet: Path) -> None:  # noqa: F811
    """Ctrl-C's path (`orchestrate fleet` turns SIGINT into the token): the canary's run stops with every setting
    restored, and no wave is begun."""
    from orchestrator import api

    clusters = {n: add_cluster(fake_fleet, n) for n in ("canary", "eu-1")}
    path = write_fleet(fake_fleet, canary="canary", waves=[["eu-1"]])
    cancel = api.Cancel()

    def said(cluster: str, event) -> None:  # type: ignore[no-untyped-def]
        if event.kind == "batch" and event.data.get("state") == "done":
            cancel.cancel("stopped by the operator")

    result = restart_fleet(load_fleet(path), new_fleet_id(path), on_event=said, cancel=cancel)
    outcomes = {c.cluster: c for c in result.clusters}
    assert outcomes["canary"].result == "failed" and outcomes["canary"].exit_code == 130, outcomes
    assert outcomes["eu-1"].result == "not begun" and result.exit_code == 130
    assert sum(n.starts for n in clusters["canary"].nodes.values()) == 1, "stopped after its first batch"
    assert clusters["canary"].settings[("cluster", LIMIT)] == "normal", "every setting restored"
    assert all(n.starts == 0 for n in clusters["eu-1"].nodes.values())
