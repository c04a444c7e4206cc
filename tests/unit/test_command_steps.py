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
from orchestrator.restart.plan import Mode
from orchestrator.restart.procedure import resolve
from orchestrator.testing.fake import PRODUCT, FakeClock, FakeCluster, FakeTransport
from tests.unit.test_engine import ORIGINAL, context_of, fake, inventory, new_journal, state_dir


class FailingHosts(FakeTransport):
    """The fake's hosts, where a command containing ``fails`` (or any, on the node of ``fails``: "on b")
    exits 2 saying why."""

    def __init__(self, cluster: FakeCluster, fails: str, said: str = "drain refused on {node}") -> None:
        super().__init__(cluster)
        self.fails, self.said = fails, said
        self.timeouts: dict[str, float | None] = {}

    def run(self, node: NodeEntry, command: str, timeout_s: float | None = None,
            stdin: bytes | None = None) -> CommandResult:
        self.timeouts[command] = timeout_s
        if self.fails and (self.fails in command or self.fails == f"on {node.name}"):
            self.commands.append((node.name, command))
            return CommandResult(2, "", self.said.format(node=node.name) + "\n")
        return super().run(node, command, timeout_s, stdin)


def run_with(step: dict[str, Any], names: list[str], fails: str = "", said: str = "drain refused on {node}",
             zone: bool = False) -> tuple[FakeCluster, Journal, list[Event], FailingHosts, Exception | None]:
    """A run of ``names`` with the command ``step`` before each stop: a node a batch, or (``zone``) all in one."""
    inv = inventory(names, zones=["z1"] * len(names) if zone else None)
    cluster = FakeCluster.of(names, settings=dict(ORIGINAL))
    journal = new_journal(inv, cluster, Mode.ZONE if zone else Mode.NODE)
    playbook = Playbook.model_validate({"name": "with-a-command", "product": "fake", "before_run": ["raise_limit"],
                                        "batch": ["hold_setting", {"command": step}, "stop_service", "start_service",
                                                  "wait_for_join", "release_setting"]})
    journal.spec = replace(journal.spec, playbook=playbook.model_dump(mode="json"))
    hosts, events = FailingHosts(cluster, fails, said), []
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


def test_a_command_of_a_zone_batch_runs_on_every_node_with_its_timeout_and_a_failure_names_the_others() -> None:
    with state_dir():
        _, journal, events, hosts, error = run_with({"name": "drain", "run": "lb-drain {node}", "timeout_s": 42},
                                                    ["a", "b", "c"], zone=True)
        assert error is None and journal.state is RunState.SUCCEEDED, journal.message
        assert {c: t for c, t in hosts.timeouts.items() if c.startswith("lb-drain")} == {
            "lb-drain a": 42, "lb-drain b": 42, "lb-drain c": 42}
        assert sorted((e.kind, e.message, e.node) for e in events if "step drain" in e.message) == [
            ("step", f"{n}: step drain done", n) for n in ("a", "b", "c")]
    with state_dir():
        _, _, _, _, error = run_with({"name": "drain", "run": "lb-drain {node}"}, ["a", "b", "c"], fails="on b",
                                     zone=True)
        assert isinstance(error, HostError)
        assert str(error).startswith("b: step drain failed (exit 2): ")
        assert str(error).endswith("; the other nodes of batch 1: a ok (phase pending), c ok (phase pending)"), error


def test_a_failures_output_is_its_last_300_characters_and_an_ignored_one_is_the_nodes_warning() -> None:
    long = "x" * 400 + "END"
    with state_dir():
        _, _, events, _, error = run_with({"name": "drain", "run": "lb-drain {node}"}, ["a"], fails="lb-drain",
                                          said=long)
        assert str(error) == f"a: step drain failed (exit 2): {long[-300:]}"
    with state_dir():
        _, _, events, _, _ = run_with({"name": "drain", "run": "lb-drain {node}", "ignore_failure": True}, ["a"],
                                      fails="lb-drain")
        assert [(e.kind, e.node) for e in events if "ignored" in e.message] == [("warning", "a")]


def test_every_node_of_a_batch_goes_through_at_once_and_what_stops_one_keeps_its_kind() -> None:
    import threading

    from orchestrator.errors import ConfigError
    from orchestrator.restart.deferral import Deferred, Wait
    from orchestrator.restart.journal import BatchRecord
    from orchestrator.restart.steps import for_each_node

    names = [f"n{i}" for i in range(8)]
    with state_dir():
        inv, cluster = fake(names)
        ctx = context_of(inv, cluster)
        batch = BatchRecord(1, "z1", names)
        together = threading.Barrier(len(names), timeout=5)

        def meet(name: str) -> None:
            together.wait()  # broken unless all 8 are under way at once, whatever the number of cores

        for_each_node(ctx, batch, meet)

        def bad_template(name: str) -> None:
            if name == "n3":
                raise ConfigError("playbook", ["step x: {nope} is not a fact"])

        with pytest.raises(ConfigError) as refused:
            for_each_node(ctx, batch, bad_template)
        assert (refused.value.source, refused.value.problems) == ("playbook", ["step x: {nope} is not a fact"])
        waits = {n: Wait("join", 1, (n,), f"{n} to rejoin", 100.0 + i, 60) for i, n in enumerate(("n2", "n5"))}

        def rejoin(name: str) -> None:
            if name in waits:
                raise Deferred(waits[name])

        with pytest.raises(Deferred) as deferred:
            for_each_node(ctx, batch, rejoin)
        assert (deferred.value.wait.nodes, deferred.value.wait.since) == (("n2", "n5"), 100.0)


def test_a_resumed_run_setting_again_a_value_changed_since_keeps_its_one_undo_record() -> None:
    from orchestrator.restart.steps import set_all_temporarily

    with state_dir():
        inv, cluster = inventory(["a"]), FakeCluster.of(["a"], settings={("cluster", "k"): "orig"})
        journal = new_journal(inv, cluster)
        ctx = context_of(inv, cluster, journal)
        set_all_temporarily(ctx, [("k", "cluster", "orig", "temp")], 1)
        cluster.settings[("cluster", "k")] = "changed-by-someone"
        set_all_temporarily(ctx, [("k", "cluster", "changed-by-someone", "temp")], 1)
        assert [(u.key, u.before, u.applied) for u in journal.undo] == [("k", "orig", "temp")]
        assert cluster.settings[("cluster", "k")] == "temp"


def test_a_nodes_identity_is_one_look_unless_a_wait_is_asked_then_the_node_as_it_joins() -> None:
    """What a stop and a rejoin see of a node: without a wait, one look (a node still booting is not serving);
    with one, the node once it has joined, where the product waits server-side; a node that is down stays None."""
    from orchestrator.restart.steps import live_identity

    with state_dir():
        inv, cluster = fake(["a"])
        ctx = context_of(inv, cluster, new_journal(inv, cluster))
        node = cluster.nodes["a"]
        assert live_identity(ctx, "a") == f"pid {node.pid}", "a serving node, at once"
        node.polls_to_join = 1000  # booting: it would join only after many looks
        assert live_identity(ctx, "a") is None, "one look, no wait: not serving yet"
        assert node.polls_to_join == 999, "looked once"
        assert live_identity(ctx, "a", 5) == f"pid {node.pid}", "the wait gives the node as it joined"
        node.up = False
        assert live_identity(ctx, "a", 5) is None, "a node down is not waited into being"
