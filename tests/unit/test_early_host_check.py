"""The SSH preflight of a run begins while its plan is made, and `start` takes its answer."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from orchestrator.errors import ConfigError
from orchestrator.runs import restart as runs
from tests.unit.snapshots import inventory


class Connections:
    closed = False

    def close(self) -> None:
        self.closed = True


def test_the_host_check_is_under_way_before_anyone_asks_for_its_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runs, "transport_of", lambda inv: Connections())
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
        transport, problems = early.result()
        assert early.transport() is transport, "the plan's host reads share the run's connections"
        assert problems == ["b: the host key is not the known one"]
        assert checked == [transport], "one check, on the transport the run then uses"
    assert isinstance(transport, Connections) and transport.closed, "closed when the run did not take it"


def test_bad_ssh_settings_are_said_where_the_run_would_have_said_them(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(inv: object) -> None:
        raise ConfigError("inventory", ["ssh.known_hosts: file /nowhere not found"])

    monkeypatch.setattr(runs, "transport_of", refuse)
    with runs.hosts_checked_early(inventory(["a"])) as early:  # nothing raised while the plan is made
        assert early is not None
        with pytest.raises(ConfigError, match="known_hosts"):
            early.result()
        with pytest.raises(ConfigError, match="known_hosts"):
            early.transport()  # the plan's host reads then read nothing: said once, by the run


def test_no_early_check_where_an_operator_is_asked_first(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runs, "check_hosts", lambda inv, transport: pytest.fail("checked early"))
    with runs.hosts_checked_early(inventory(["a"]), begin=False) as early:
        assert early is None


def test_a_run_refused_first_does_not_wait_for_the_hosts_and_their_connections_close(
        monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[Connections] = []
    answer = threading.Event()
    monkeypatch.setattr(runs, "transport_of", lambda inv: made.append(Connections()) or made[-1])
    monkeypatch.setattr(runs, "check_hosts", lambda inv, transport: [] if answer.wait(5) else ["no answer"])
    with runs.hosts_checked_early(inventory(["a"])):
        assert eventually(lambda: bool(made)), "the check began"
        # the plan was refused: out at once, while the host has not answered
    assert not made[0].closed
    answer.set()
    assert eventually(lambda: made[0].closed), "closed once the check ended"


def eventually(condition: Callable[[], bool]) -> bool:
    """Whether ``condition`` holds within 5 s (looked at every 10 ms)."""
    for _ in range(500):
        if condition():
            return True
        threading.Event().wait(0.01)
    return False
