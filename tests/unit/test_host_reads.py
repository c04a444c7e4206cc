"""What a plan reads on the hosts (runs/host_reads.py): one transport for all its reads, each host's
capacity and kernel, the nodes' logs; a host that does not answer is asked once, and never fails the plan."""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any

import pytest

from orchestrator.config.model import Inventory, NodeEntry
from orchestrator.errors import HostUnreachable
from orchestrator.hosts.transport import CommandResult
from orchestrator.restart.plan import Mode, Plan
from orchestrator.runs import host_reads

LOG = ("[2026-11-24T19:29:58,000][INFO ][o.e.b.Elasticsearch      ] [a] version[9.5.3], pid[100]\n"
       "[2026-11-24T19:30:02,000][INFO ][o.e.n.Node               ] [a] starting ...\n"
       "[2026-11-24T19:30:03,000][INFO ][o.e.n.Node               ] [a] started {a}\n")


class Hosts:
    """Host a answers as a sandbox host would; host b is down. Counts what each was asked."""

    def __init__(self) -> None:
        self.asked: list[str] = []
        self.opened = self.closed = 0

    def run(self, node: NodeEntry, command: str, timeout_s: float | None = None) -> CommandResult:
        self.asked.append(node.name)
        if node.name == "b":
            raise HostUnreachable(f"{node.host}: connection timed out")
        if command.startswith("grep"):
            return CommandResult(0, LOG, "")
        return CommandResult(0, "link orv1 10000\ndisk vda 0\nkernel btime 1795500000 cpus 2\n", "")

    def close(self) -> None:
        self.closed += 1


INV = Inventory.model_validate({"cluster": {"name": "c"}, "ssh": {"transport": "local"},
                                "nodes": [{"name": "a", "host": "10.0.0.1", "data_paths": ["/d"]},
                                          {"name": "b", "host": "10.0.0.2"}]})
PLAN = Plan(cluster="c", product="elasticsearch", mode=Mode.NODE, batches=(), settings=(), tuning=(),
            estimate_s=0.0, problems=(), node_ids={"a": "id-a", "b": "id-b"})


def logs_of(cluster: object) -> dict[str, str]:
    return {"id-a": "/logs/c.log", "id-b": "/logs/c.log"}


def test_one_transport_each_host_asked_once_and_a_down_host_costs_one_try(monkeypatch: pytest.MonkeyPatch) -> None:
    hosts = Hosts()

    def opened(inv: Any) -> Hosts:
        hosts.opened += 1
        return hosts

    monkeypatch.setattr(host_reads, "transport_of", opened)
    target: Any = SimpleNamespace(inv=INV, product=SimpleNamespace(node_logs=logs_of), cluster=None)
    plan = PLAN
    with host_reads.HostReads(target) as reads:
        capacity = reads.capacity()
        restarts = reads.last_restarts(plan)
    assert list(capacity) == ["a"] and capacity["a"].bytes_s == 450_000_000, "an SSD under 10 GbE"
    assert list(restarts) == ["a"] and restarts["a"].start_s == 6.0  # 1 s launch + 5 s to started
    assert sorted(hosts.asked) == ["a", "a", "b"], "b, down, was asked once for both reads"
    assert (hosts.opened, hosts.closed) == (1, 1)


def test_reads_begin_before_the_cluster_is_read_on_the_run_s_transport_which_stays_open(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A run's plan reads its hosts over the SSH preflight's connections (begun at the same time), and
    leaves them open for the run; the hosts answer while the cluster's state is read."""
    hosts = Hosts()
    monkeypatch.setattr(host_reads, "transport_of", lambda inv: pytest.fail("opened a transport of its own"))
    logs_asked = threading.Event()
    product = SimpleNamespace(node_logs=lambda cluster: logs_asked.set() or logs_of(cluster))
    target: Any = SimpleNamespace(inv=INV, product=product, cluster=None)
    with host_reads.HostReads(target, shared=lambda: hosts) as reads:
        capacity = reads.begin()
        assert logs_asked.wait(5), "the nodes' log files were asked for before the plan needed them"
        assert list(capacity.result(timeout=5)) == ["a"]
        restarts = reads.last_restarts(PLAN)
    assert list(restarts) == ["a"]
    assert sorted(hosts.asked) == ["a", "a", "b"]
    assert hosts.closed == 0, "the run's transport is the run's to close"


def test_a_plan_refused_while_its_hosts_answer_closes_its_connections_when_their_reads_end(
        monkeypatch: pytest.MonkeyPatch) -> None:
    hosts = Hosts()
    answer = threading.Event()
    answering = threading.Event()
    plain_run = hosts.run

    def slow_run(node: NodeEntry, command: str, timeout_s: float | None = None) -> CommandResult:
        answering.set()
        answer.wait(5)
        return plain_run(node, command, timeout_s)

    monkeypatch.setattr(hosts, "run", slow_run)
    monkeypatch.setattr(host_reads, "transport_of", lambda inv: hosts)
    target: Any = SimpleNamespace(inv=INV, product=SimpleNamespace(node_logs=logs_of), cluster=None)
    with pytest.raises(RuntimeError, match="the cluster refused"), host_reads.HostReads(target) as reads:
        capacity = reads.begin()
        assert answering.wait(5)
        raise RuntimeError("the cluster refused")  # as a snapshot's error would, hosts still reading
    assert hosts.closed == 0, "not closed under a read"
    answer.set()
    capacity.result(timeout=5)
    assert hosts.closed == 1, "closed once the reads ended"
