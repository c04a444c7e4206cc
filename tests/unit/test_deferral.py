"""Deferral: a run leaves its long waits to a watcher and is resumed when they are over, through the
Python API a scheduler's task uses, over fake clusters reached by an inventory (orchestrator.testing)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from orchestrator import api
from orchestrator.errors import PreflightFailed, WaitTimeout
from orchestrator.restart import journal as journals
from orchestrator.restart.deferral import Wait
from orchestrator.restart.journal import BatchState, RunState
from orchestrator.restart.lock import LOCK_INDEX, RUN_DOC, read_holder
from orchestrator.testing.fake import FLEET, HELD, LIMIT, FakeCluster

NODES = ["a", "b", "c"]


@pytest.fixture
def fleet(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("ORCHESTRATOR_STATE", str(tmp_path / "state"))
    yield tmp_path
    FLEET.clear()


def fake_cluster(where: Path, name: str, join_polls: int = 3, join_s: float = 30) -> tuple[FakeCluster, Path]:
    cluster = FakeCluster.of(NODES, join_polls=join_polls)
    cluster.settings[("cluster", LIMIT)] = "normal"
    FLEET[name] = cluster
    path = where / f"{name}.yaml"
    path.write_text(yaml.safe_dump({
        "cluster": {"name": name, "product": "fake"}, "ssh": {"transport": "local"},
        "nodes": [{"name": n, "host": f"h-{n}"} for n in NODES],
        "timeouts": {"join_s": join_s, "recovery_s": 60, "poll_interval_s": 0.05}}))
    return cluster, path


def watch_until_handed_back(config: Path, run_id: str, looks: int = 200) -> str:
    watcher = api.watcher(config=config, run_id=run_id)
    for _ in range(looks):
        look = watcher.look()
        if look.hand_back:
            return str(look.verdict)
        time.sleep(0.05)
    raise AssertionError(f"the wait of run {run_id} was never handed back")


def test_a_deferred_run_leaves_each_rejoin_to_its_watcher_and_restarts_each_node_once(fleet: Path) -> None:
    cluster, config = fake_cluster(fleet, "eu-1")
    result = api.restart(config=config, defer=True, origin="dag/run/restart/-1")
    waits: list[Wait] = []
    while result.result == "deferred":
        wait = Wait.from_json(result.summary["waiting"])
        waits.append(wait)
        journal = journals.latest("eu-1", result.run_id)
        assert journal is not None and journal.state is RunState.DEFERRED
        holder = read_holder(cluster)
        assert holder is not None and holder.deferred and holder.run_id == result.run_id
        # Deferred while its node is down: nothing restored, the batch's setting still held.
        assert cluster.settings[("cluster", HELD)] == "held"
        assert watch_until_handed_back(config, result.run_id) == "over"
        result = api.resume(config=config, defer=True)
    assert result.result == "succeeded"
    assert [(w.kind, w.batch, w.nodes) for w in waits] == [("join", 1, ("a",)), ("join", 2, ("b",)),
                                                           ("join", 3, ("c",))]
    assert {n.name: n.starts for n in cluster.nodes.values()} == dict.fromkeys(NODES, 1)
    assert cluster.settings == {("cluster", LIMIT): "normal"}, "every temporary setting put back"
    assert (LOCK_INDEX, RUN_DOC) not in cluster.locks
    assert api.run_of(config=config, origin="dag/run/restart/-1") == (result.run_id, "succeeded")
    assert api.run_of(config=config, origin="another task") is None


def test_a_wait_out_of_time_fails_the_run_as_a_held_wait_would_keeping_its_settings(fleet: Path) -> None:
    cluster, config = fake_cluster(fleet, "eu-2", join_s=1)
    cluster.nodes["a"].rejoins = False
    result = api.restart(config=config, defer=True)
    assert result.result == "deferred"
    started = time.time()
    assert watch_until_handed_back(config, result.run_id) == "time_up"
    assert time.time() - started < 5, "the timeout counts from when the wait began"
    with pytest.raises(WaitTimeout, match="a to rejoin"):
        api.resume(config=config, defer=True)
    journal = journals.latest("eu-2", result.run_id)
    assert journal is not None and journal.state is RunState.FAILED
    assert cluster.settings[("cluster", HELD)] == "held", "a failed wait keeps the batch's settings for resume"
    holder = read_holder(cluster)
    assert holder is not None and holder.failed


def test_a_deferred_run_blocks_new_runs_and_an_operator_s_resume_takes_it_back(fleet: Path) -> None:
    cluster, config = fake_cluster(fleet, "eu-3")
    result = api.restart(config=config, defer=True)
    assert result.result == "deferred"
    with pytest.raises(PreflightFailed, match="deferred"):
        api.restart(config=config)
    watcher = api.watcher(config=config, run_id=result.run_id)
    done = api.resume(config=config)  # by hand, without deferral: the wait is held, the run finishes
    assert done.result == "succeeded"
    look = watcher.look()
    assert look.verdict == "not_deferred" and "succeeded" in look.text
    assert {n.name: n.starts for n in cluster.nodes.values()} == dict.fromkeys(NODES, 1)


def test_a_trigger_renews_a_deferred_lock_as_often_as_the_run_would_by_the_stale_time_its_inventory_sets(
        fleet: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With `timeouts.lock_stale_s: 30` the run renews every 3 s, and so does its trigger: a deferred run's lock
    never looks stale (30 s renewals would leave it stale between two)."""
    cluster, config = fake_cluster(fleet, "eu-2", join_polls=1000, join_s=3600)
    raw = yaml.safe_load(config.read_text())
    raw["timeouts"]["lock_stale_s"] = 30
    config.write_text(yaml.safe_dump(raw))
    result = api.restart(config=config, defer=True)
    assert result.result == "deferred"
    watcher = api.watcher(config=config, run_id=result.run_id)
    now = [time.time()]
    monkeypatch.setattr(time, "time", lambda: now[0])
    renewals = []
    for _ in range(20):  # a minute of looks, 3 s apart
        before = (cluster.read_lock(LOCK_INDEX, RUN_DOC) or {}).get("renewed")
        assert watcher.look().verdict == "not_yet"
        renewals.append((cluster.read_lock(LOCK_INDEX, RUN_DOC) or {}).get("renewed") != before)
        holder = read_holder(cluster)
        assert holder is not None and not holder.is_stale(now[0]), "never stale while its trigger watches"
        now[0] += 3.0
    assert all(renewals[1:]), renewals


def test_a_window_admits_its_nodes_in_the_worker_and_defers_once_while_it_drains(fleet: Path) -> None:
    """With a budget, each admission is a live proof only the run can make: the task holds its worker while nodes
    are admitted, and defers once, when nothing is left to admit, for the window's nodes to rejoin; back from it,
    the rest is waited in the worker. Each node restarted once, every setting put back."""
    names = ["a", "b", "c", "d", "e"]
    cluster = FakeCluster.of(names, join_polls=6)
    cluster.settings[("cluster", LIMIT)] = "normal"
    FLEET["eu-5"] = cluster
    config = fleet / "eu-5.yaml"
    config.write_text(yaml.safe_dump({
        "cluster": {"name": "eu-5", "product": "fake"}, "ssh": {"transport": "local"},
        "nodes": [{"name": n, "host": f"h-{n}"} for n in names],
        "timeouts": {"join_s": 30, "recovery_s": 60, "poll_interval_s": 0.05}}))
    result = api.restart(config=config, defer=True, max_unavailable="2")
    assert result.result == "deferred", result.summary
    wait = Wait.from_json(result.summary["waiting"])
    journal = journals.latest("eu-5", result.run_id)
    assert journal is not None and journal.state is RunState.DEFERRED
    assert not [b.label for b in journal.batches if b.state is BatchState.PENDING], "every node admitted first"
    away = [n for b in journal.batches if b.state is BatchState.RUNNING for n in b.nodes]
    assert wait.kind == "join" and away and set(wait.nodes) == set(away), (wait, away)
    assert "e" in wait.nodes, "the last node admitted is among those the trigger waits for"
    assert watch_until_handed_back(config, result.run_id) == "over"
    result = api.resume(config=config, defer=True)
    assert result.result == "succeeded", result.summary
    assert {n.name: n.starts for n in cluster.nodes.values()} == dict.fromkeys(names, 1)
    assert cluster.settings == {("cluster", LIMIT): "normal"}, "every temporary setting put back"
