"""Airflow against the real sandbox, with Airflow's own `dag.test()`: the post-bulk-index DAG of
docs/examples (bulk index -> force-merge -> rolling restart), the restart's waits deferred to its
trigger; and the same DAG's restart task killed mid-run (SIGKILL, a node down) then run again, as a
retry would: it resumes its run, and each node is restarted once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from orchestrator.restart import journal as journals
from tests.airflow_home import dag_module
from tests.integration.conftest import SandboxManager, Shape
from tests.integration.test_restart import prepared, settings, starts_logged

pytestmark = [pytest.mark.filterwarnings("ignore::DeprecationWarning"),
              pytest.mark.filterwarnings("ignore:Using `httpx` with `starlette.testclient` is deprecated")]
REPO = Path(__file__).parents[2]
EXAMPLE = REPO / "docs" / "examples" / "post_index_dag.py"
DAG_ID = "post_index_restart"


def connections(info: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """Two Airflow Connections, as environment variables: the bulk load's (a user that may write) and the
    tool's (its API key: least privilege)."""
    host = ",".join(e.removeprefix("https://") for e in info["endpoints"])
    load = {"conn_type": "generic", "host": host, "login": info["username"],
            "password": Path(info["password_file"]).read_text().strip(), "extra": {"ca_file": info["ca_file"]}}
    tool = {"conn_type": "generic", "host": host,
            "extra": {"api_key": Path(info["tool_api_key_file"]).read_text().strip(), "ca_file": info["ca_file"]}}
    monkeypatch.setenv("AIRFLOW_CONN_SANDBOX_LOAD", json.dumps(load))
    monkeypatch.setenv("AIRFLOW_CONN_SANDBOX_TOOL", json.dumps(tool))


# The run of two nodes: each deferral and resume shows with two (a third node is only CI's time).
RESTARTED = ("es-1", "es-2")


def pipeline(info: dict[str, Any], index: str) -> str:
    return yaml.safe_dump({"conn_id": "sandbox_tool", "index_conn_id": "sandbox_load", "inventory": info["inventory"],
                           "index": index, "docs": 3000, "nodes": list(RESTARTED)})


def deferrals(seen: list[tuple[str, str]], task: str) -> int:
    states = [state for t, state in seen if t == task]
    return [s for n, s in enumerate(states) if n == 0 or states[n - 1] != s].count("deferred")


def test_bulk_index_then_force_merge_then_a_deferred_rolling_restart(sandboxes: SandboxManager,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow.models.taskinstance import TaskInstance
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session
    from sqlalchemy import event, select

    info, es = prepared(sandboxes, Shape())
    before, starts = settings(es), starts_logged(info)
    connections(info, monkeypatch)
    module = dag_module(EXAMPLE, "post_index_dag", {"pipeline.yaml": pipeline(info, "pipeline-1")})
    seen: list[tuple[str, str]] = []

    def record(ti: TaskInstance, value: object, old: object, initiator: object) -> None:
        seen.append((ti.task_id, str(getattr(value, "value", value))))

    event.listen(TaskInstance.state, "set", record)
    try:
        dag_run = module.dag.test()
    finally:
        event.remove(TaskInstance.state, "set", record)

    states = {ti.task_id: str(ti.state) for ti in dag_run.get_task_instances()}
    assert states == dict.fromkeys(["bulk_index", "forcemerge", "rolling_restart"], "success"), states
    assert deferrals(seen, "rolling_restart") >= 2, "the restart deferred at least while each node rejoined"
    assert starts_logged(info) == {n: c + (n in RESTARTED) for n, c in starts.items()}, "each node once, no other"
    assert settings(es) == before, "every setting the run changed is back"
    assert es.count(index="pipeline-1")["count"] == 3000
    shards = es.indices.segments(index="pipeline-1")["indices"]["pipeline-1"]["shards"]
    assert all(copy["num_committed_segments"] <= 5 for copies in shards.values() for copy in copies)
    with create_session() as session:
        rows = session.scalars(select(XComModel).where(XComModel.run_id == dag_run.run_id,
                                                       XComModel.task_id == "rolling_restart")).all()
    summary = next(json.loads(r.value) if isinstance(r.value, str) else r.value for r in rows
                   if r.key == "return_value")
    assert summary["result"] == "succeeded" and all(n["restarted"] for n in summary["nodes"])
    assert Path(summary["report"]).is_file(), "the run's report page is named in the task's result"


RUN_DAG = """
import sys
from datetime import datetime
from pathlib import Path
from tests.airflow_home import dag_module
module = dag_module(Path(sys.argv[1]), "post_index_dag", {"pipeline.yaml": sys.argv[2]})
when = datetime.fromisoformat(sys.argv[3])
done = module.dag.test(logical_date=when, run_after=when, mark_success_pattern=sys.argv[4] or None)
print("DAG RUN", done.state)
"""


def run_dag(args: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", RUN_DAG, *args], cwd=REPO, text=True, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def journal_of_task(since: float) -> journals.Journal | None:
    found = [j for j in journals.newest_first("sandbox", look_back=5) if j.created >= since
             and j.origin.startswith(f"airflow:{DAG_ID}/") and j.origin.endswith("/rolling_restart/-1")]
    return found[0] if found else None


def test_a_restart_task_killed_with_a_node_down_then_retried_restarts_each_node_once(
        sandboxes: SandboxManager, monkeypatch: pytest.MonkeyPatch) -> None:
    info, es = prepared(sandboxes, Shape())
    before, starts = settings(es), starts_logged(info)
    connections(info, monkeypatch)
    when = datetime.now(UTC).replace(microsecond=0).isoformat()
    args = [str(EXAMPLE), pipeline(info, "pipeline-2"), when]
    began = time.time()
    first = run_dag([*args, ""])
    killed_at = None
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and first.poll() is None:
            journal = journal_of_task(began)
            down = [n for n, r in (journal.nodes.items() if journal else ()) if r.phase in ("stopped", "starting")]
            if journal is not None and down:
                os.killpg(first.pid, signal.SIGKILL)  # the worker dies, with a node down
                killed_at = (journal.run_id, down[0])
                break
            time.sleep(0.1)
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
        output = first.communicate(timeout=60)[0]
    assert killed_at is not None, f"the restart never had a node down: {output[-3000:]}"
    run_id, _node_down = killed_at

    # The retry: the same task of the same DAG run, its upstream tasks already done.
    second = run_dag([*args, "bulk_index|forcemerge"])
    out, _ = second.communicate(timeout=900)
    assert second.returncode == 0 and "DAG RUN success" in out, out[-5000:]
    journal = journal_of_task(began)
    assert journal is not None and journal.run_id == run_id, "the retried task resumed its own run"
    assert journal.state is journals.RunState.SUCCEEDED
    assert any(h.event == "resumed" for h in journal.history)
    assert starts_logged(info) == {n: c + (n in RESTARTED) for n, c in starts.items()}, "each node once, no other"
    assert settings(es) == before, "every setting the run changed is back"
