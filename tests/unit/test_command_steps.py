"""A playbook's own command steps (`batch: - command: {...}`), run by the engine over the fake cluster: on
each node's host or here, with the node's names filled in, in a small environment when local, a
failure named by node, step and exit code (or warned and passed over with `ignore_failure`). Mutation
testing found them exercised only on real hosts (tests/integration/test_gates.py)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from orchestrator.config.model import NodeEntry
from orchestrator.config.playbook import Playbook
from orchestrator.errors import HostError
from orchestrator.hosts.service import ServiceControl
from orchestrator.hosts.transport import CommandResult
from orchestrator.restart.context import RunContext
from orchestrator.restart.engine import Engine
from orchestrator.restart.events import Event
from orchestrator.restart.journal import Journal, RunState
from orchestrator.restart.procedure import resolve
from orchestrator.testing.fake import PRODUCT, FakeClock, FakeCluster, FakeTransport
from tests.unit.test_engine import ORIGINAL, inventory, new_journal, state_dir


class FailingHosts(FakeTransport):
    """The fake's hosts, where a command containing ``fails`` exits 2 saying why."""

    def __init__(self, cluster: FakeCluster, fails: str) -> None:
        super().__init__(cluster)
        self.fails = fails

    def run(self, node: NodeEntry, command: str, timeout_s: float | None = None,
            stdin: bytes | None = None) -> CommandResult:
        if self.fails and self.fails in command:
            self.commands.append((node.name, command))
            return CommandResult(2, "", f"drain refused on {node.name}\n")
        return super().run(node, command, timeout_s, stdin)


def run_with(step: dict[str, Any], names: list[str], fails: str = "") -> tuple[FakeCluster, Journal, list[Event],
                                                                                 FailingHosts, Exception | None]:
    inv, cluster = inventory(names), FakeCluster.of(names, settings=dict(ORIGINAL))
    journal = new_journal(inv, cluster)
    playbook = Playbook.model_validate({"name": "with-a-command", "product": "fake", "before_run": ["raise_limit"],
                                        "batch": ["hold_setting", {"command": step}, "stop_service", "start_service",
                                                  "wait_for_join", "release_setting"]})
    journal.spec = replace(journal.spec, playbook=playbook.model_dump(mode="json"))
    hosts, events = FailingHosts(cluster, fails), []
    ctx = RunContext(inv=inv, cluster=cluster, transport=hosts, service=ServiceControl(hosts, inv.service, 60),
                     journal=journal, emit=events.append, clock=FakeClock())
    try:
        Engine(ctx, PRODUCT, resolve(playbook, PRODUCT)).run()
    except Exception as exc:  # each test says which it expects
        return cluster, journal, events, hosts, exc
    return cluster, journal, events, hosts, None


def test_a_host_command_runs_on_each_nodes_host_before_its_stop_with_its_names_filled_in() -> None:
    with state_dir():
        cluster, journal, events, hosts, error = run_with({"name": "drain", "run": "lb-drain {node} --host {host}"},
                                                          ["a", "b"])
        assert error is None and journal.state is RunState.SUCCEEDED, journal.message
        ran = [(n, c) for n, c in hosts.commands if c.startswith("lb-drain")]
        assert ran == [("a", "lb-drain a --host h-a"), ("b", "lb-drain b --host h-b")]
        for name in ("a", "b"):
            said = [e.message for e in events if e.node == name]
            assert said.index(f"{name}: step drain done") < next(i for i, m in enumerate(said) if "stop" in m), said
        assert cluster.settings == ORIGINAL


def test_a_local_command_sees_the_node_and_the_variables_it_declares_never_the_rest(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WANTED_TOKEN", "wanted")
    monkeypatch.setenv("ELASTIC_PASSWORD", "secret-of-this-process")
    with state_dir():
        _, journal, _, hosts, error = run_with({"name": "note", "where": "local", "env": ["WANTED_TOKEN"],
                                                "run": f"env > {tmp_path}/{{node}}.env"}, ["a"])
        assert error is None and journal.state is RunState.SUCCEEDED, journal.message
        seen = dict(line.split("=", 1) for line in (tmp_path / "a.env").read_text().splitlines() if "=" in line)
        assert seen["ORCHESTRATOR_NODE"] == "a" and seen["ORCHESTRATOR_HOST"] == "h-a"
        assert seen["WANTED_TOKEN"] == "wanted" and "ELASTIC_PASSWORD" not in seen and "PATH" in seen
        assert not [c for _, c in hosts.commands if c.startswith("env")], "run here, not on the host"


def test_a_failed_command_stops_the_run_naming_node_step_and_exit_before_the_node_stops() -> None:
    with state_dir():
        cluster, journal, _, _, error = run_with({"name": "drain", "run": "lb-drain {node}"}, ["a", "b"],
                                                 fails="lb-drain")
        assert isinstance(error, HostError)
        assert str(error).startswith("a: step drain failed (exit 2): drain refused on a"), error
        assert journal.state is RunState.FAILED
        assert cluster.nodes["a"].starts == 0 and cluster.nodes["a"].up, "the node was never stopped"


def test_an_ignored_failure_is_warned_and_the_run_goes_on() -> None:
    with state_dir():
        cluster, journal, events, _, error = run_with({"name": "drain", "run": "lb-drain {node}",
                                                       "ignore_failure": True}, ["a", "b"], fails="lb-drain")
        assert error is None and journal.state is RunState.SUCCEEDED, journal.message
        warned = [e.message for e in events if e.kind == "warning"]
        assert warned == ["a: step drain failed (exit 2), ignored: drain refused on a",
                          "b: step drain failed (exit 2), ignored: drain refused on b"], warned
        assert all(n.starts == 1 for n in cluster.nodes.values()) and cluster.settings == ORIGINAL
