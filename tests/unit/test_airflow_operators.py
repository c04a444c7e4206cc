"""The Airflow operators' own behaviour around the Python API they call: what a failure says."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from orchestrator import api
from orchestrator.forcemerge.run import MergeReport, MergeResult
from orchestrator.testing.fake import LIMIT
from tests.unit.test_airflow_fleet import add_cluster, fake_fleet  # noqa: F401  (a fixture, used by name)

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def test_a_partial_force_merge_fails_the_task_naming_each_failed_index_and_why(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow.sdk.exceptions import AirflowException

    from orchestrator.airflow_provider.operators import ForceMergeOperator

    report = MergeReport([MergeResult("logs-1", "merge", "", 40, 5, 3.0),
                          MergeResult("logs-2", "merge", "", 30, error="the task failed: disk full"),
                          MergeResult("logs-3", "skip", "already at 1 segment", 1)])

    def merged(**_: Any) -> MergeReport:
        return report

    monkeypatch.setattr(api, "forcemerge", merged)
    task = ForceMergeOperator(task_id="merge", cluster="prod", indices="logs-*")
    with pytest.raises(AirflowException) as raised:
        task.execute({})
    assert str(raised.value) == "force-merge partial: logs-2: the task failed: disk full"


def test_a_failure_tells_the_airflow_user_to_clear_the_task_not_to_type_a_command() -> None:
    from orchestrator.airflow_provider.operators import RollingRestartOperator
    from orchestrator.errors import UnsafeToProceed

    task = RollingRestartOperator(task_id="restart", cluster="prod")
    failure = UnsafeToProceed("es-2 did not rejoin", resume="continues the remaining batches")
    assert str(failure) == "es-2 did not rejoin; `orchestrate resume` continues the remaining batches", "a terminal"
    said = str(task.failed(failure))
    assert said == ("UnsafeToProceed: es-2 did not rejoin; a new try of this task (clear it, or let it retry) "
                    "continues the remaining batches")
    other = str(task.failed(UnsafeToProceed("a message that names `orchestrate resume` as a word of its own")))
    assert "`orchestrate resume`" in other, "the tool's own words are never rewritten by pattern"


def test_deferrable_follows_airflows_default_deferrable_unless_given(monkeypatch: pytest.MonkeyPatch) -> None:
    from orchestrator.airflow_provider.operators import RollingRestartOperator

    monkeypatch.delenv("AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE", raising=False)
    assert RollingRestartOperator(task_id="a", cluster="prod").deferrable is False, "Airflow's default: false"
    monkeypatch.setenv("AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE", "true")
    assert RollingRestartOperator(task_id="b", cluster="prod").deferrable is True
    assert RollingRestartOperator(task_id="c", cluster="prod", deferrable=False).deferrable is False


def test_a_deferral_times_out_and_the_task_fails_saying_what_is_left_in_force(
        fake_fleet: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811  (the fixture)
    """With no triggerer running, a deferred task must not wait for ever with allocation restricted."""
    import time

    from airflow.sdk.bases.operator import TRIGGER_FAIL_REPR, TriggerFailureReason
    from airflow.sdk.exceptions import AirflowException, TaskDeferred

    from orchestrator.airflow_provider.operators import DEFER_GRACE_S, RollingRestartOperator

    cluster = add_cluster(fake_fleet, "slow")
    task = RollingRestartOperator(task_id="restart", cluster="slow", deferrable=True)
    context: Any = {"ti": SimpleNamespace(dag_id="d", run_id="r", task_id="restart", map_index=-1)}
    monkeypatch.setattr("orchestrator.airflow_provider.operators.get_current_context", lambda: context)
    before = time.time()
    with pytest.raises(TaskDeferred) as deferred:
        task.execute(context)
    timeout = deferred.value.timeout
    assert timeout is not None, "every deferral has a timeout"
    join_s = 30  # the inventory's timeouts.join_s: the wait it deferred is n1's rejoin
    assert join_s + DEFER_GRACE_S - 5 <= timeout.total_seconds() <= join_s + DEFER_GRACE_S + time.time() - before

    # The scheduler fails the deferral when its timeout passes: the task resumes to fail, in our words.
    with pytest.raises(AirflowException) as failed:
        task.resume_execution(TRIGGER_FAIL_REPR, {"error": TriggerFailureReason.TRIGGER_TIMEOUT}, context)
    said = str(failed.value)
    assert "is a triggerer running?" in said and "n1" in said
    assert f"{LIMIT} (back to normal)" in said, said
    assert "clear it" in said
    assert cluster.settings[("cluster", LIMIT)] != "normal", "the run left allocation restricted, as it says"


@pytest.mark.parametrize(("dag", "settings", "tasks"), [
    ("post_index_dag", "pipeline.yaml", {"bulk_index", "forcemerge", "rolling_restart"}),
    ("fleet_dag", "fleet.yaml", {"canary", "wave_1", "wave_2"}),
])
def test_each_example_dag_loads_with_the_settings_shipped_beside_it(dag: str, settings: str, tasks: set[str]) -> None:
    """What `orchestrate docs examples --to DIR` gives is a DAG that loads as it is (its settings filled in)."""
    from tests.airflow_home import dag_module

    examples = Path(__file__).parents[2] / "docs" / "examples"
    module = dag_module(examples / f"{dag}.py", dag, {settings: (examples / settings).read_text()})
    assert set(module.dag.task_ids) == tasks
    restarts = [t for t in module.dag.tasks if type(t).__name__ == "RollingRestartOperator"]
    assert restarts and all(t.deferrable for t in restarts), "the examples defer, as their docs say"


def test_a_deferrable_task_outside_its_maintenance_window_defers_until_it_opens_then_restarts_each_node_once(
        fake_fleet: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811  (the fixture)
    """Started when its only window is two days ahead, the task changes nothing, frees its worker until the
    window opens (Airflow's DateTimeTrigger at that moment), and, back from it inside the window, finishes."""
    from datetime import UTC, datetime, timedelta

    import yaml
    from airflow.sdk.exceptions import TaskDeferred

    from orchestrator.airflow_provider.operators import RollingRestartOperator

    cluster = add_cluster(fake_fleet, "nightly")
    now = datetime.now(UTC)
    ahead = (now + timedelta(days=2)).strftime("%a")
    inventory = fake_fleet / "nightly.yaml"
    inventory.write_text(yaml.safe_dump({**yaml.safe_load(inventory.read_text()),
                                         "maintenance": {"windows": [f"{ahead} 00:00-23:59 UTC"]}}))
    task = RollingRestartOperator(task_id="restart", cluster="nightly", deferrable=True)
    context: Any = {"ti": SimpleNamespace(dag_id="d", run_id="r", task_id="restart", map_index=-1)}
    monkeypatch.setattr("orchestrator.airflow_provider.operators.get_current_context", lambda: context)
    with pytest.raises(TaskDeferred) as deferred:
        task.execute(context)
    opens = (now + timedelta(days=2)).replace(hour=0, minute=0, second=0, microsecond=0)
    assert deferred.value.trigger.moment == opens and deferred.value.method_name == "window_opened"
    assert [n.starts for n in cluster.nodes.values()] == [0] * len(cluster.nodes), "nothing done outside it"
    assert cluster.settings[("cluster", LIMIT)] == "normal"

    # Back from the trigger inside the window (the inventory's window today, as the calendar would have it); its
    # nodes rejoin at once here, so that the task does not defer again on a rejoin (other tests follow those).
    cluster.join_polls = 0
    inventory.write_text(yaml.safe_dump({**yaml.safe_load(inventory.read_text()),
                                         "maintenance": {"windows": ["daily 00:00-24:00 UTC"]}}))
    result = task.window_opened(context, event=None)
    assert result["result"] == "succeeded", result
    assert [n.starts for n in cluster.nodes.values()] == [1] * len(cluster.nodes)
    assert cluster.settings[("cluster", LIMIT)] == "normal"
