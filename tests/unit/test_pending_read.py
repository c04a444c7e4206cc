"""`orchestrate pending`'s reads and what it says of them (runs/pending.py): which hosts are asked, about
which process and files, within what time and how many at once; what a node that cannot be read is called;
the report's summary, the plan's notes, and the textfile Prometheus reads. The judge itself: test_pending."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from orchestrator.config.model import Inventory, NodeEntry
from orchestrator.errors import HostUnreachable
from orchestrator.hosts.transport import CommandResult
from orchestrator.pending.host import HostAsk, host_command
from orchestrator.pending.verdict import REBOOT, NodePending, Reason, RunningNode
from orchestrator.restart.journal import RunOptions
from orchestrator.runs import pending
from orchestrator.runs.pending import (
    READERS,
    PendingReport,
    nothing_pending,
    pending_notes,
    pending_options,
    read_pending,
    write_textfile,
)

CONF = "/etc/elasticsearch"
# What a host says of a node that runs what is installed and configured: clean.
CLEAN_HOST = ("boot b\npid {pid}\ncomm java\nstarted 1699999000 100 100\nmaps readable\npackage 9.5.3\n"
              f"file 1699990000 {CONF}/elasticsearch.yml\n")


def inventory(*names: str, service: dict[str, Any] | None = None) -> Inventory:
    return Inventory.model_validate({
        "cluster": {"name": "c", "endpoints": ["http://x:9200"]},
        "ssh": {"known_hosts": "/dev/null", "connect_timeout_s": 7},
        **({"service": service} if service else {}),
        "nodes": [{"name": n, "host": f"h-{n}"} for n in names]})


def running(name: str, pid: int) -> RunningNode:
    return RunningNode(name=name, addresses=(f"h-{name}",), version="9.5.3", pid=pid, started_s=1_699_999_000.0,
                       package="elasticsearch", files=(f"{CONF}/elasticsearch.yml", f"{CONF}/jvm.options.d/"),
                       settings_file=f"{CONF}/elasticsearch.yml",
                       version_jars=("/usr/share/elasticsearch/lib", "elasticsearch"),
                       version_file="/usr/share/elasticsearch/VERSION", command="java")


class Product:
    def __init__(self, nodes: list[RunningNode]) -> None:
        self.nodes = nodes
        self.read_through: list[object] = []

    def running_nodes(self, adapter: object) -> list[RunningNode]:
        self.read_through.append(adapter)
        return self.nodes


class Hosts:
    """Each host's answer: its node's process is the one the cluster named, or what ``answers`` says."""

    def __init__(self, answers: dict[str, Any] | None = None, pause_s: float = 0) -> None:
        self.answers = answers or {}
        self.pause_s = pause_s
        self.asked: list[tuple[str, str, float | None]] = []
        self.lock = threading.Lock()
        self.at_once = self.most_at_once = 0
        self.closed = False

    def run(self, entry: NodeEntry, command: str, timeout_s: float | None = None,
            stdin: bytes | None = None) -> CommandResult:
        with self.lock:
            self.asked.append((entry.name, command, timeout_s))
            self.at_once += 1
            self.most_at_once = max(self.most_at_once, self.at_once)
        try:
            time.sleep(self.pause_s)
            answer = self.answers.get(entry.name)
            if isinstance(answer, Exception):
                raise answer
            if isinstance(answer, CommandResult):
                return answer
            return CommandResult(0, CLEAN_HOST.format(pid=100 + int(entry.name.rsplit("-", 1)[1])), "")
        finally:
            with self.lock:
                self.at_once -= 1

    def close(self) -> None:
        self.closed = True


def test_each_named_node_s_host_is_asked_about_that_node_s_own_process_and_files_within_the_ssh_timeout() -> None:
    inv, cluster = inventory("es-1", "es-2", "es-3"), object()
    product, hosts = Product([running("es-1", 101), running("es-2", 102), running("es-3", 103)]), Hosts()
    before = time.time()
    report = read_pending(inv, product, cluster, hosts, names=["es-2", "es-3"])  # type: ignore[arg-type]
    assert product.read_through == [cluster], "the cluster is read through the run's own adapter"
    assert sorted(name for name, _, _ in hosts.asked) == ["es-2", "es-3"], "only the named nodes' hosts"
    asked = dict((name, (command, timeout)) for name, command, timeout in hosts.asked)
    assert asked["es-2"] == (host_command(HostAsk(
        pid=102, unit="elasticsearch", package="elasticsearch",
        files=(f"{CONF}/elasticsearch.yml", f"{CONF}/jvm.options.d/"), settings_file=f"{CONF}/elasticsearch.yml",
        version_jars=("/usr/share/elasticsearch/lib", "elasticsearch"),
        version_file="/usr/share/elasticsearch/VERSION")), 7 + 30), "the SSH connect time, and 30 s to read"
    assert [(n.node, n.state) for n in report.nodes] == [("es-2", "clean"), ("es-3", "clean")]
    assert report.cluster == "c" and before <= report.read_at <= time.time()
    every = read_pending(inv, product, cluster, Hosts())  # type: ignore[arg-type]
    assert [n.node for n in every.nodes] == ["es-1", "es-2", "es-3"], "no names: every inventory node"


def test_a_node_is_matched_by_its_name_where_its_host_is_not_one_it_reports() -> None:
    inv = Inventory.model_validate({"cluster": {"name": "c", "endpoints": ["http://x:9200"]},
                                    "ssh": {"known_hosts": "/dev/null"},
                                    "nodes": [{"name": "es-1", "host": "10.9.9.9"}]})
    report = read_pending(inv, Product([running("es-1", 101)]), object(), Hosts())  # type: ignore[arg-type]
    assert [(n.node, n.state) for n in report.nodes] == [("es-1", "clean")]


def test_a_service_the_inventory_runs_by_its_own_commands_has_no_unit_to_ask_about() -> None:
    inv = inventory("es-1", service={"manager": "commands", "stop": "stop-es", "start": "start-es",
                                     "status": "status-es"})
    hosts = Hosts()
    read_pending(inv, Product([running("es-1", 101)]), object(), hosts)  # type: ignore[arg-type]
    command = hosts.asked[0][1]
    assert command == host_command(HostAsk(
        pid=101, unit="", package="elasticsearch", files=(f"{CONF}/elasticsearch.yml", f"{CONF}/jvm.options.d/"),
        settings_file=f"{CONF}/elasticsearch.yml", version_jars=("/usr/share/elasticsearch/lib", "elasticsearch"),
        version_file="/usr/share/elasticsearch/VERSION"))
    assert "systemctl" not in command


def test_needrestart_listing_the_inventory_s_unit_makes_the_node_pending_as_judged_with_that_unit() -> None:
    said = CLEAN_HOST.format(pid=101) + "needrestart NEEDRESTART-SVC: search.service\n"
    answers = {"es-1": CommandResult(0, said, "")}
    custom = inventory("es-1", service={"unit": "search"})
    report = read_pending(custom, Product([running("es-1", 101)]), object(), Hosts(answers))  # type: ignore[arg-type]
    assert [str(r) for r in report.nodes[0].reasons] == ["replaced code: needrestart -b lists the node's service"]
    other = read_pending(inventory("es-1"), Product([running("es-1", 101)]), object(),  # type: ignore[arg-type]
                         Hosts(answers))
    assert other.nodes[0].state == "clean", "needrestart names another unit than the inventory's"


def test_what_cannot_be_read_is_unknown_saying_why_each_cause_cut_at_300_characters() -> None:
    long = "x" * 400
    answers = {"es-1": HostUnreachable(long), "es-2": CommandResult(2, "", f"  {long}\n")}
    report = read_pending(inventory("es-1", "es-2", "es-3"),  # type: ignore[arg-type]
                          Product([running("es-1", 101), running("es-2", 102)]), object(), Hosts(answers))
    unknown = {n.node: n.unknown for n in report.nodes}
    assert unknown == {
        "es-1": (f"its host did not answer: {str(HostUnreachable(long))[:300]}",),
        "es-2": (f"its host's read failed (exit 2): {'x' * 300}",),
        "es-3": ("the cluster does not list it (down, or not joined): what it runs cannot be read",)}
    assert len(str(HostUnreachable(long))) > 300


def test_hosts_are_read_sixteen_at_once() -> None:
    names = [f"es-{i}" for i in range(1, READERS + 5)]
    hosts = Hosts(pause_s=0.3)
    read_pending(inventory(*names), Product([running(n, 100 + i) for i, n in enumerate(names, 1)]),  # type: ignore[arg-type]
                 object(), hosts)
    assert READERS == 16 and hosts.most_at_once == READERS, hosts.most_at_once


def report(*verdicts: NodePending) -> PendingReport:
    return PendingReport("prod", verdicts, 1_700_000_000.0)


MIXED = report(NodePending("es-1", (Reason(REBOOT, "/run/reboot-required"),)), NodePending("es-2"),
               NodePending("es-3", unknown=("its host did not answer", "and again")), NodePending("es-4"))


def test_the_summary_says_the_result_and_each_node_s_state() -> None:
    assert MIXED.summary() == {"result": "pending", "cluster": "prod", "pending": ["es-1"], "reboot": ["es-1"],
                               "unknown": ["es-3"], "clean": ["es-2", "es-4"]}
    unread = report(NodePending("es-2"), NodePending("es-3", unknown=("x",)))
    assert unread.summary() == {"result": "unknown", "cluster": "prod", "pending": [], "reboot": [],
                                "unknown": ["es-3"], "clean": ["es-2"]}
    assert report(NodePending("es-2")).summary()["result"] == "nothing pending"


def test_with_nothing_pending_the_run_says_so_and_names_the_nodes_it_could_not_read() -> None:
    assert nothing_pending(report(NodePending("es-2"))) == "no node of prod needs a restart"
    assert nothing_pending(report(NodePending("es-2"), NodePending("es-3", unknown=("x",)),
                                  NodePending("es-5", unknown=("y",)))) == (
        "no node of prod needs a restart; what es-3, es-5 run(s) could not be read (`orchestrate pending` says why)")


def test_the_plan_s_notes_without_a_choice_restart_the_pending_nodes_and_list_the_rest() -> None:
    assert pending_notes(MIXED) == (
        "es-1: rebooted with its host (reboot: /run/reboot-required)",
        "left alone, nothing pending: es-2, es-4",
        "es-3: left alone, what it runs could not be read: its host did not answer; and again")


def test_a_pending_run_s_options_name_its_nodes_and_drop_the_exclusions_they_were_chosen_with() -> None:
    chosen = pending_options(MIXED, RunOptions(exclude=("es-9",)))
    assert chosen == RunOptions(nodes=("es-1",), exclude=(), reboot_nodes=("es-1",))


def test_the_textfile_labels_each_sample_with_the_cluster_and_stamps_the_read(tmp_path: Path) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    path = tmp_path / "pending.prom"
    write_textfile(MIXED, path)
    families = {f.name: f for f in text_string_to_metric_families(path.read_text())}
    pending_samples = families["orchestrator_node_restart_pending"].samples
    assert {tuple(sorted(s.labels)) for s in pending_samples} == {("cluster", "node", "reason")}
    assert {s.labels["cluster"] for s in pending_samples} == {"prod"}
    stamp = families["orchestrator_pending_checked_timestamp_seconds"].samples
    assert [(s.labels, s.value) for s in stamp] == [({"cluster": "prod"}, 1_700_000_000.0)]
    assert path.stat().st_mode & 0o777 == 0o644, "node_exporter's user reads it"


class Adapter:
    closed = False

    def close(self) -> None:
        self.closed = True


def test_pending_reads_the_inventory_s_cluster_then_closes_its_hosts_and_its_connection(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from orchestrator.errors import ConfigError
    from orchestrator.es.product import PRODUCT as ELASTICSEARCH

    adapter, product, hosts = Adapter(), Product([running("es-1", 101), running("es-2", 102)]), Hosts()
    connected: list[Inventory] = []
    product.settings = ELASTICSEARCH.settings  # type: ignore[attr-defined]
    product.connect = lambda inv: connected.append(inv) or adapter  # type: ignore[attr-defined]
    monkeypatch.setattr(pending.products, "get", lambda name: product if name == "elasticsearch" else None)
    inv = inventory("es-1", "es-2")
    got = pending.pending_of(inv, ["es-2"], transport=lambda given: connected.append(given) or hosts)
    assert [n.node for n in got.nodes] == ["es-2"] and [a for a, _, _ in hosts.asked] == ["es-2"]
    assert connected == [inv, inv], "the cluster and the hosts of this inventory"
    assert product.read_through == [adapter] and adapter.closed and hosts.closed
    product.connect = lambda inv: object()  # type: ignore[attr-defined]  # an adapter with nothing to close
    assert [n.node for n in pending.pending_of(inv, ["es-1"], transport=lambda given: Hosts()).nodes] == ["es-1"]
    # The product's own section is checked before anything is read.
    bad = inventory("es-1").model_copy(update={"product_settings": {"no_such_setting": 1}})
    asked_before = len(hosts.asked)
    with pytest.raises(ConfigError, match=r"elasticsearch\.no_such_setting"):
        pending.pending_of(bad, None, transport=lambda inv: hosts)
    assert len(hosts.asked) == asked_before


def test_a_run_s_pending_report_reads_its_target_s_cluster_and_closes_the_hosts_it_opened(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from orchestrator.runs.target import Target

    hosts, cluster = Hosts(), object()
    product = Product([running("es-1", 101)])
    opened: list[Inventory] = []

    def transport_of(inv: Inventory) -> Hosts:
        opened.append(inv)
        return hosts

    monkeypatch.setattr(pending, "transport_of", transport_of)
    inv = inventory("es-1")
    target = Target(inv=inv, inventory_path=Path("c.yaml"), product=product,  # type: ignore[arg-type]
                    procedure=None, cluster=cluster)  # type: ignore[arg-type]
    got = pending.target_pending(target)
    assert [n.node for n in got.nodes] == ["es-1"] and product.read_through == [cluster]
    assert opened == [inv] and hosts.closed

