"""The SSH preflight of a run begins while its plan is made, and `start` takes its answer."""

from __future__ import annotations

import threading

import pytest

from orchestrator.runs import restart as runs
from tests.unit.snapshots import inventory


class Connections:
    closed = False

    def close(self) -> None:
        self.closed = True


def test_the_host_check_is_under_way_before_anyone_asks_for_its_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runs, "make_transport", lambda inv: Connections())
    began = threading.Event()
    checked: list[object] = []

    def check(inv: object, transport: object) -> list[str]:
        checked.append(transport)
        began.set()
        return ["b: the host key is not the known one"]

    monkeypatch.setattr(runs, "check_hosts", check)
    with runs.hosts_checked_early(inventory(["a", "b"])) as early:
        assert early is not None
        assert began.wait(5), "the check had not begun while the plan would be made"
        assert early.problems() == ["b: the host key is not the known one"]
        assert checked == [early.transport], "one check, on the transport the run then uses"
    assert early.transport.closed, "closed when the run did not take it"


def test_no_early_check_where_an_operator_is_asked_first(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runs, "check_hosts", lambda inv, transport: pytest.fail("checked early"))
    with runs.hosts_checked_early(inventory(["a"]), begin=False) as early:
        assert early is None
