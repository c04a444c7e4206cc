"""The Python API, called from a worker thread as a scheduler's task would: plan, tune, status, a
restart cancelled with a token (settings restored, nothing restarted), then resumed."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from orchestrator import api
from orchestrator.errors import Aborted
from tests.integration.conftest import SandboxManager, Shape
from tests.integration.test_restart import prepared, settings, starts_logged


def in_a_thread(work: Callable[[], Any], timeout_s: float = 900) -> Any:
    """Run ``work`` in a worker thread (never the main one) and return what it returned or raise what it raised."""
    out: dict[str, Any] = {}

    def target() -> None:
        try:
            out["value"] = work()
        except BaseException as exc:  # handed to the test's thread
            out["error"] = exc

    worker = threading.Thread(target=target, name="scheduler-task")
    worker.start()
    worker.join(timeout_s)
    assert not worker.is_alive(), f"the API call did not return within {timeout_s} s"
    if "error" in out:
        raise out["error"]
    return out["value"]


def test_the_api_from_a_worker_thread_plans_tunes_restarts_cancels_and_resumes(sandboxes: SandboxManager) -> None:
    info, es = prepared(sandboxes, Shape())
    before, starts = settings(es), starts_logged(info)
    plan = in_a_thread(lambda: api.plan("sandbox"))
    assert plan.safe and len(plan.batches) == 3
    node = plan.batches[0].nodes[0]  # not the elected master
    reports = in_a_thread(lambda: api.tune("sandbox"))
    assert sorted(r.node for r in reports) == sorted(starts) and all(r.error is None for r in reports)
    assert in_a_thread(lambda: api.status("sandbox"))["health"]["status"] == "green"

    cancel = api.Cancel()
    events: list[api.Event] = []

    def on_event(event: api.Event) -> None:
        events.append(event)
        if event.kind == "batch":
            cancel.cancel("the scheduler stopped the task")

    with pytest.raises(Aborted, match="the scheduler stopped the task"):
        in_a_thread(lambda: api.restart("sandbox", nodes=[node], on_event=on_event, cancel=cancel))
    assert starts_logged(sandboxes.status()) == starts, "stopped at a safe point, before any node stopped"
    assert settings(es) == before, "every setting restored"
    assert in_a_thread(lambda: api.status("sandbox"))["run"]["state"] == "aborted"

    result = in_a_thread(lambda: api.resume("sandbox", on_event=events.append))
    assert result.result == "succeeded" and result.journal.is_file()
    assert [n["name"] for n in result.summary["nodes"] if n["restarted"]] == [node]
    assert starts_logged(sandboxes.status()) == {**starts, node: starts[node] + 1}
    assert settings(es) == before
    assert any(e.message.startswith(f"resuming run {result.run_id}") for e in events)
