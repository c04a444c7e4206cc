"""The fleet DAG of docs/examples, run by Airflow's own `dag.test()` over clusters of the fake cluster
engine (orchestrator.testing): a canary, then waves of mapped tasks in a pool, each task deferring
its waits to the trigger; one failing cluster stops the waves after its own."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from orchestrator.testing.fake import FLEET, LIMIT, FakeCluster
from tests.airflow_home import dag_module

# Airflow's own deprecations (its test client's httpx, say) are not this project's to fix.
pytestmark = [pytest.mark.filterwarnings("ignore::DeprecationWarning"),
              pytest.mark.filterwarnings("ignore:Using `httpx` with `starlette.testclient` is deprecated")]
EXAMPLE = Path(__file__).parents[2] / "docs" / "examples" / "fleet_dag.py"
NODES = ["n1", "n2", "n3"]


@pytest.fixture
def fake_fleet(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("ORCHESTRATOR_STATE", str(tmp_path / "state"))
    monkeypatch.setenv("ORCHESTRATOR_CONFIGS", str(tmp_path / "configs"))
    (tmp_path / "configs").mkdir()
    yield tmp_path / "configs"
    FLEET.clear()


def add_cluster(configs: Path, name: str, fails: bool = False) -> FakeCluster:
    cluster = FakeCluster.of(NODES, join_polls=3)
    cluster.settings[("cluster", LIMIT)] = "normal"
    if fails:
        cluster.nodes["n2"].rejoins = False  # its second node never comes back
    FLEET[name] = cluster
    (configs / f"{name}.yaml").write_text(yaml.safe_dump({
        "cluster": {"name": name, "product": "fake"}, "ssh": {"transport": "local"},
        "nodes": [{"name": n, "host": f"{name}-{n}"} for n in NODES],
        "timeouts": {"join_s": 2 if fails else 30, "recovery_s": 60, "poll_interval_s": 0.05}}))
    return cluster


def task_states(dag_run) -> dict[str, str]:  # type: ignore[no-untyped-def]
    return {f"{ti.task_id}[{ti.map_index}]" if ti.map_index >= 0 else ti.task_id: str(ti.state)
            for ti in dag_run.get_task_instances()}


def test_the_fleet_dag_restarts_wave_after_wave_and_stops_after_a_failed_cluster(fake_fleet: Path) -> None:
    from airflow.models.pool import Pool
    from airflow.models.taskinstance import TaskInstance
    from sqlalchemy import event

    clusters = {name: add_cluster(fake_fleet, name, fails=name == "eu-2")
                for name in ["canary", "eu-1", "eu-2", "us-1", "us-2"]}
    fleet = {"canary": "canary", "waves": [["eu-1", "eu-2"], ["us-1", "us-2"]], "conn_id": None}
    module = dag_module(EXAMPLE, "fleet_dag", {"fleet.yaml": yaml.safe_dump(fleet)})
    Pool.create_or_update_pool("cluster_restarts", slots=2, description="rolling restarts at once",
                               include_deferred=False)

    seen: list[tuple[str, int, str]] = []  # every state a task instance was given, as Airflow set it

    def record(ti: TaskInstance, value: object, old: object, initiator: object) -> None:
        seen.append((ti.task_id, ti.map_index, getattr(value, "value", str(value))))

    event.listen(TaskInstance.state, "set", record)
    try:
        dag_run = module.dag.test()
    finally:
        event.remove(TaskInstance.state, "set", record)

    states = task_states(dag_run)
    assert states == {"canary": "success", "wave_1[0]": "success", "wave_1[1]": "failed",
                      "wave_2[0]": "upstream_failed", "wave_2[1]": "upstream_failed"}, states
    assert str(dag_run.state) == "failed"
    for name in ("canary", "eu-1"):
        assert {n.name: n.starts for n in clusters[name].nodes.values()} == dict.fromkeys(NODES, 1), name
        assert clusters[name].settings == {("cluster", LIMIT): "normal"}, name
    # The failed cluster: its first node restarted, its second started and never rejoined; the run failed
    # there, keeping its settings for `resume`, and its third node was never touched.
    assert {n.name: n.starts for n in clusters["eu-2"].nodes.values()} == {"n1": 1, "n2": 1, "n3": 0}
    for name in ("us-1", "us-2"):
        assert all(n.starts == 0 for n in clusters[name].nodes.values()), f"{name} restarted after a failed wave"
    # Each restart deferred while its nodes rejoined: once per node for the clusters that finished.
    assert deferrals(seen, "canary", -1) == len(NODES)
    assert deferrals(seen, "wave_1", 0) == len(NODES)


def deferrals(seen: list[tuple[str, int, str]], task: str, index: int) -> int:
    """How many times the task went into `deferred` (Airflow sets a state on more than one copy of the
    task instance: repeats of one state in a row are one transition)."""
    states = [state for t, i, state in seen if (t, i) == (task, index)]
    transitions = [s for n, s in enumerate(states) if n == 0 or states[n - 1] != s]
    return transitions.count("deferred")


ONE_CLUSTER_DAG = '''
from datetime import UTC, datetime
from airflow.sdk import DAG
from orchestrator.airflow_provider import RollingRestartOperator

with DAG("one_cluster", schedule=None, start_date=datetime(2026, 1, 1, tzinfo=UTC), catchup=False) as dag:
    RollingRestartOperator(task_id="restart", cluster="solo", stop_after=1)
'''


def test_a_task_with_stop_after_rolls_that_many_batches_per_try_of_one_run(fake_fleet: Path,
                                                                           tmp_path: Path) -> None:
    from datetime import UTC, datetime

    from orchestrator import api

    cluster = add_cluster(fake_fleet, "solo")
    source = tmp_path / "one_cluster.py"
    source.write_text(ONE_CLUSTER_DAG)
    module = dag_module(source, "one_cluster")
    when = datetime(2026, 11, 25, tzinfo=UTC)

    first = module.dag.test(logical_date=when, run_after=when)
    assert task_states(first) == {"restart": "success"}
    assert {n.name: n.starts for n in cluster.nodes.values()} == {"n1": 1, "n2": 0, "n3": 0}
    run_id, state = api.run_of("solo", origin=f"airflow:one_cluster/{first.run_id}/restart/-1") or ("", "")
    assert state == "stopped"

    # Tried again (cleared, or the next task of a DAG that rolls a batch a day): the same run, one batch more.
    again = module.dag.test(logical_date=when, run_after=when)
    assert task_states(again) == {"restart": "success"}
    assert {n.name: n.starts for n in cluster.nodes.values()} == {"n1": 1, "n2": 1, "n3": 0}
    assert api.run_of("solo", origin=f"airflow:one_cluster/{again.run_id}/restart/-1") == (run_id, "stopped")

    last = module.dag.test(logical_date=when, run_after=when)
    assert {n.name: n.starts for n in cluster.nodes.values()} == dict.fromkeys(NODES, 1), "each node once"
    assert api.run_of("solo", origin=f"airflow:one_cluster/{last.run_id}/restart/-1") == (run_id, "succeeded")
    assert cluster.settings == {("cluster", LIMIT): "normal"}

    after = module.dag.test(logical_date=when, run_after=when)  # a try after success: nothing restarted
    assert task_states(after) == {"restart": "success"}
    assert {n.name: n.starts for n in cluster.nodes.values()} == dict.fromkeys(NODES, 1)
    summary = returned_value(after.run_id, "restart")
    assert summary["run_id"] == run_id and summary["result"] == "succeeded"
    assert summary == json.loads(json.dumps(summary)), "the XCom holds JSON's types, as `--json` prints"


def returned_value(dag_run_id: str, task_id: str) -> Any:
    """A task's return value as a downstream task reads it from XCom (Airflow's serde: a tuple stays one)."""
    from airflow.models.xcom import XComModel
    from airflow.sdk.serde import deserialize
    from airflow.utils.session import create_session

    with create_session() as session:
        row = session.scalars(XComModel.get_many(run_id=dag_run_id, key="return_value", task_ids=task_id)).one()
        return deserialize(XComModel.deserialize_value(row))


PLAN_CHECK_DAG = '''
from datetime import UTC, datetime
from airflow.sdk import DAG
from orchestrator.airflow_provider import PlanCheckOperator, RollingRestartOperator

with DAG("checked", schedule=None, start_date=datetime(2026, 1, 1, tzinfo=UTC), catchup=False) as dag:
    for name in ("healthy", "degraded"):
        PlanCheckOperator(task_id=f"plan_{name}", cluster=name) >> RollingRestartOperator(
            task_id=f"restart_{name}", cluster=name)
'''


def test_the_plan_check_fails_the_task_on_an_unsafe_plan_and_nothing_after_it_runs(fake_fleet: Path,
                                                                                   tmp_path: Path) -> None:
    healthy, degraded = add_cluster(fake_fleet, "healthy"), add_cluster(fake_fleet, "degraded")
    degraded.nodes["n3"].up = False  # a node already out of the cluster: no restart may start
    source = tmp_path / "checked.py"
    source.write_text(PLAN_CHECK_DAG)
    dag_run = dag_module(source, "checked").dag.test()
    assert task_states(dag_run) == {"plan_healthy": "success", "restart_healthy": "success",
                                    "plan_degraded": "failed", "restart_degraded": "upstream_failed"}
    assert all(n.starts == 1 for n in healthy.nodes.values())
    assert all(n.starts == 0 for n in degraded.nodes.values()), "nothing changed on the unsafe cluster"
    assert degraded.settings == {("cluster", LIMIT): "normal"}
