"""Which nodes need a restart (issue 49): the judge over what a node and its host said, the host's command
run for real on this machine against a process the test starts, the nodes' own answer read for the files
they read at start, and a `--pending` run's choice of nodes and reboots."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.pending.host import HostAsk, HostEvidence, host_command, parse_host
from orchestrator.pending.verdict import (
    CONFIGURATION,
    REBOOT,
    REPLACED_CODE,
    VERSION,
    NodePending,
    Reason,
    RunningNode,
    judge,
    settings_differ,
)
from orchestrator.restart.journal import RunOptions
from orchestrator.runs.pending import PendingReport, pending_notes, pending_options, pending_problems
from orchestrator.shards.answers import Nodes
from orchestrator.shards.running import running_nodes

STARTED = 1_700_000_000.0
CONF = "/etc/elasticsearch"


def node(**changes: object) -> RunningNode:
    base: dict[str, object] = dict(name="es-1", addresses=("10.0.0.1",), version="9.5.3", pid=4242, started_s=STARTED,
                                   package="elasticsearch", files=(f"{CONF}/elasticsearch.yml",),
                                   settings_file=f"{CONF}/elasticsearch.yml",
                                   settings={"cluster.name": "prod", "node.roles": ["master", "data"]},
                                   command="java")
    base.update(changes)
    return RunningNode(**base)  # type: ignore[arg-type]


def evidence(**changes: object) -> HostEvidence:
    ev = HostEvidence(boot_id="b1", pid=4242, command="java", started_s=STARTED + 0.5, package="9.5.3",
                      files={f"{CONF}/elasticsearch.yml": STARTED - 3600}, maps_readable=True,
                      kernel_running="6.1.0-18-amd64")
    for key, value in changes.items():
        setattr(ev, key, value)
    return ev


def kinds(verdict: NodePending) -> list[str]:
    return [r.kind for r in verdict.reasons]


def test_a_node_that_runs_what_is_installed_and_configured_is_clean() -> None:
    verdict = judge("es-1", "elasticsearch", node(), evidence())
    assert verdict.state == "clean" and not verdict.reasons and not verdict.unknown


def test_each_reason_with_its_evidence() -> None:
    version = judge("es-1", "elasticsearch", node(), evidence(package="1:9.6.0-1"))
    assert kinds(version) == [VERSION]
    assert version.reasons[0].evidence == "package elasticsearch is 9.6.0, the node runs 9.5.3"

    edited = judge("es-1", "elasticsearch", node(), evidence(files={
        f"{CONF}/elasticsearch.yml": STARTED + 100, f"{CONF}/jvm.options.d/heap.options": STARTED + 50,
        f"{CONF}/log4j2.properties": STARTED - 10}))
    assert kinds(edited) == [CONFIGURATION]
    said = edited.reasons[0].evidence
    assert said.startswith(f"{CONF}/jvm.options.d/heap.options, {CONF}/elasticsearch.yml changed after the node "
                           "started"), said
    assert "log4j2" not in said
    assert "(started 2023-11-14 22:13:20 UTC, last changed 2023-11-14 22:15:00 UTC)" in said, \
        "the node's start and the last change, each named: the start alone read as the change"
    # The settings file changed but its text was not read: the file is named, no setting guessed.
    assert "no setting differs" not in said

    replaced = judge("es-1", "elasticsearch", node(), evidence(replaced=["/usr/share/elasticsearch/lib/x.jar"]))
    assert kinds(replaced) == [REPLACED_CODE] and "/usr/share/elasticsearch/lib/x.jar" in str(replaced.reasons[0])

    reboot = judge("es-1", "elasticsearch", node(), evidence(reboot_required="linux-image-6.1.0-20-amd64"))
    assert kinds(reboot) == [REBOOT] and reboot.reboot
    assert str(reboot.reasons[0]) == "reboot: /run/reboot-required (for linux-image-6.1.0-20-amd64)"
    kernel = judge("es-1", "elasticsearch", node(), evidence(kernels_installed=("6.1.0-18-amd64", "6.1.0-20-amd64")))
    assert str(kernel.reasons[0]) == "reboot: kernel 6.1.0-20-amd64 installed, 6.1.0-18-amd64 running"
    older = judge("es-1", "elasticsearch", node(), evidence(kernels_installed=("6.1.0-9-amd64", "6.1.0-18-amd64")))
    assert older.state == "clean", "an older kernel kept beside the running one asks for no reboot"


def test_a_file_written_by_the_start_itself_is_not_a_change() -> None:
    """Within a moment of the process's start, a file may be the start's own; a node's keystore it writes
    itself as it starts (created when absent, upgraded): within two minutes it is the node's own."""
    keystore = f"{CONF}/elasticsearch.keystore"
    assert judge("es-1", "elasticsearch", node(), evidence(files={keystore: STARTED + 1})).state == "clean"
    assert judge("es-1", "elasticsearch", node(), evidence(files={keystore: STARTED + 5})).state == "pending"
    own = node(written_at_start=(keystore,))
    assert judge("es-1", "elasticsearch", own, evidence(files={keystore: STARTED + 60})).state == "clean"
    assert judge("es-1", "elasticsearch", own, evidence(files={keystore: STARTED + 600})).state == "pending"


def test_the_settings_that_differ_are_named() -> None:
    text = ("cluster.name: prod\nnode:\n  roles: [data, master]\n  attr.rack: r2\n"
            "indices.query.bool.max_clause_count: 2048\nhttp.port: ${HTTP_PORT}\nxpack.security.enabled: true\n")
    running = {"cluster.name": "prod", "node.roles": ["master", "data"], "node.attr.rack": "r1",
               "xpack.security.enabled": "true"}
    assert settings_differ(text, running) == [
        "node.attr.rack: 'r2' in the file, 'r1' on the running node",
        "indices.query.bool.max_clause_count: '2048' in the file, not set on the running node"]
    verdict = judge("es-1", "elasticsearch", node(settings=running), evidence(
        files={f"{CONF}/elasticsearch.yml": STARTED + 100}, settings_text=text))
    assert f"{CONF}/elasticsearch.yml: node.attr.rack: 'r2' in the file, 'r1' on the running node" in \
        verdict.reasons[0].evidence
    same = judge("es-1", "elasticsearch", node(), evidence(
        files={f"{CONF}/elasticsearch.yml": STARTED + 100}, settings_text="cluster.name: prod\n# a comment\n"))
    assert same.reasons[0].evidence.endswith("no setting differs from the running node's")
    assert settings_differ("[1, 2]", {}) == ["the file is not a mapping of settings"]
    assert settings_differ("a: [", {})[0].startswith("the file was not compared (line 2, column 1: not valid YAML")


def test_what_cannot_be_read_is_unknown_never_clean() -> None:
    gone = judge("es-1", "elasticsearch", node(), evidence(pid=None))
    assert gone.state == "unknown" and "was not found on its host" in gone.unknown[0]
    other = judge("es-1", "elasticsearch", node(), evidence(command="sshd"))
    assert other.state == "unknown" and "is `sshd`, not the node's `java`" in other.unknown[0]
    no_root = judge("es-1", "elasticsearch", node(), evidence(maps_readable=False, files={},
                                                               unreadable=[f"{CONF}/elasticsearch.yml"]))
    assert no_root.state == "unknown"
    assert no_root.unknown == (f"configuration: {CONF}/elasticsearch.yml could not be read (a root shell reads them)",
                               "replaced code: the process's maps could not be read (a root shell reads them)")
    no_version = judge("es-1", "elasticsearch", node(), evidence(package=""))
    assert no_version.unknown == ("version: no package elasticsearch installed and no version in the home",)
    from_home = judge("es-1", "elasticsearch", node(), evidence(package="", home_versions=("9.5.2",)))
    assert str(from_home.reasons[0]) == "version: the home's own version is 9.5.2, the node runs 9.5.3"
    # A reason found is pending, with what could not be read said beside it.
    both = judge("es-1", "elasticsearch", node(), evidence(package="9.6.0", maps_readable=False))
    assert both.state == "pending" and len(both.unknown) == 1


def test_needrestart_speaks_for_the_code_and_the_kernel_where_it_is_installed() -> None:
    said = parse_host("needrestart NEEDRESTART-VER: 3.6\nneedrestart NEEDRESTART-KCUR: 6.1.0-18-amd64\n"
                      "needrestart NEEDRESTART-KEXP: 6.1.0-20-amd64\nneedrestart NEEDRESTART-KSTA: 3\n"
                      "needrestart NEEDRESTART-SVC: elasticsearch.service\npid 4242\ncomm java\nmaps readable\n"
                      "package 9.5.3\nkernel-running 6.1.0-18-amd64\n")
    verdict = judge("es-1", "elasticsearch", node(), said)
    assert [str(r) for r in verdict.reasons] == [
        "replaced code: needrestart -b lists the node's service",
        "reboot: needrestart: kernel 6.1.0-20-amd64 installed, 6.1.0-18-amd64 running"]
    quiet = parse_host("needrestart NEEDRESTART-KSTA: 1\npid 4242\ncomm java\nmaps readable\npackage 9.5.3\n"
                       "needrestart NEEDRESTART-SVC: other.service\n")
    assert judge("es-1", "elasticsearch", node(), quiet).state == "clean"


def test_deleted_segments_and_extracted_libraries_are_not_replaced_code() -> None:
    ev = parse_host("pid 4242\ncomm java\nmaps readable\npackage 9.5.3\n"
                    "replaced /var/lib/elasticsearch/indices/x/0/index/_3.cfs\nreplaced /tmp/jna-1/jna123.so\n"
                    "replaced /var/lib/opensearch/tmp/libzstd-jni-1.5.6-1372.so\n"
                    "replaced /usr/lib/jvm/java-17/lib/server/libjvm.so\n"
                    "replaced /usr/share/elasticsearch/lib/lucene-core-10.jar\n"
                    "replaced /usr/lib/jvm/java-17/lib/modules\n")
    assert "/var/lib/elasticsearch/indices/x/0/index/_3.cfs" not in ev.replaced, "an index's deleted segment"
    verdict = judge("es-1", "elasticsearch", node(temporary=("/var/lib/opensearch/tmp/",)), ev)
    assert verdict.reasons[0].evidence == (
        "the process maps or holds open /usr/lib/jvm/java-17/lib/server/libjvm.so, "
        "/usr/share/elasticsearch/lib/lucene-core-10.jar, /usr/lib/jvm/java-17/lib/modules, since deleted or "
        "replaced")
    extracted = parse_host("pid 4242\ncomm java\nmaps readable\npackage 9.5.3\nreplaced /tmp/jna-1/jna1.so\n"
                           "replaced /var/lib/opensearch/tmp/libzstd-jni-1.5.6-1372.so\n")
    assert judge("es-1", "elasticsearch", node(temporary=("/var/lib/opensearch/tmp/",)), extracted).state == "clean"
    assert judge("es-1", "elasticsearch", node(), extracted).state == "pending", "another directory is not the node's"


@pytest.fixture
def running_process(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], Path]]:
    conf = tmp_path / "conf"
    (conf / "jvm.options.d").mkdir(parents=True)
    (conf / "elasticsearch.yml").write_text("cluster.name: prod\nnode.attr.rack: r1\n")
    (conf / "jvm.options").write_text("-Xms1g\n")
    time.sleep(1.1)  # the files' change times strictly before the process's start, to the second
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    time.sleep(0.3)
    yield process, conf
    process.kill()
    process.wait()


def test_the_host_command_reads_a_real_process_and_its_files(running_process: tuple[subprocess.Popen[bytes], Path],
                                                             tmp_path: Path) -> None:
    """The command an operator's host runs, run here by sh against a process of this test: its start from
    /proc, its files' change times, the settings file's text, a package that is not installed."""
    process, conf = running_process
    home = tmp_path / "home"
    (home / "lib").mkdir(parents=True)
    (home / "lib" / "elasticsearch-9.5.2.jar").write_bytes(b"")
    ask = HostAsk(pid=process.pid, unit="orchestrator-test-no-such-unit", package="orchestrator-test-no-such-package",
                  files=(f"{conf}/elasticsearch.yml", f"{conf}/jvm.options", f"{conf}/jvm.options.d/",
                         f"{conf}/absent.keystore"),
                  settings_file=f"{conf}/elasticsearch.yml", version_jars=(f"{home}/lib", "elasticsearch"))

    def read() -> HostEvidence:
        done = subprocess.run(["sh", "-c", host_command(ask)], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        return parse_host(done.stdout)

    ev = read()
    assert ev.pid == process.pid and ev.command == "python3"[:len(ev.command or "")]
    assert ev.started_s is not None and abs(ev.started_s - time.time()) < 30
    assert set(ev.files) == {f"{conf}/elasticsearch.yml", f"{conf}/jvm.options"}
    assert ev.package == "" and ev.home_versions == ("9.5.2",)
    assert ev.settings_text == "cluster.name: prod\nnode.attr.rack: r1\n"
    assert ev.maps_readable is True and ev.kernel_running == os.uname().release
    running = node(pid=process.pid, started_s=None, version="9.5.2", package=ask.package, files=ask.files,
                   settings_file=ask.settings_file, settings={"cluster.name": "prod", "node.attr.rack": "r1"},
                   command=None)
    assert judge("es-1", ask.unit, running, ev).state == "clean"

    time.sleep(3.2)  # past the start's slack of 2 s, also to the whole second of a change time (stat %Z)
    (conf / "elasticsearch.yml").write_text("cluster.name: prod\nnode.attr.rack: r2\n")
    (conf / "jvm.options.d" / "heap.options").write_text("-Xms2g\n-Xmx2g\n")
    verdict = judge("es-1", ask.unit, running, read())
    assert kinds(verdict) == [CONFIGURATION]
    assert f"{conf}/jvm.options.d/heap.options" in verdict.reasons[0].evidence
    assert "node.attr.rack: 'r2' in the file, 'r1' on the running node" in verdict.reasons[0].evidence


def test_the_nodes_answer_names_the_files_each_node_read_at_start() -> None:
    answer = Nodes.model_validate({"nodes": {"id1": {
        "name": "es-1", "ip": "10.0.0.1", "version": "9.5.3", "process": {"id": 77},
        "jvm": {"start_time_in_millis": 1_700_000_000_123, "input_arguments": [
            "-Xms1g", "-Des.path.home=/usr/share/elasticsearch", "-Des.path.conf=/etc/elasticsearch",
            "-Djava.io.tmpdir=/tmp/elasticsearch-123"]},
        "settings": {"xpack.security.http.ssl.certificate": "certs/http.crt",
                     "xpack.security.transport.ssl.certificate_authorities": ["certs/ca.crt", "/etc/pki/ca.pem"],
                     "xpack.security.http.ssl.key": "/etc/elasticsearch/certs/http.key", "node.name": "es-1"}}}})
    [running] = running_nodes(answer, "elasticsearch")
    assert (running.name, running.pid, running.started_s, running.version) == ("es-1", 77, 1_700_000_000.123, "9.5.3")
    conf = "/etc/elasticsearch"
    assert running.files == (
        f"{conf}/elasticsearch.yml", f"{conf}/jvm.options", f"{conf}/jvm.options.d/", f"{conf}/log4j2.properties",
        f"{conf}/elasticsearch.keystore", f"{conf}/certs/ca.crt", f"{conf}/certs/http.crt", f"{conf}/certs/http.key",
        "/etc/pki/ca.pem")
    assert running.version_jars == ("/usr/share/elasticsearch/lib", "elasticsearch")
    assert running.temporary == ("/tmp/elasticsearch-123/",)
    assert running.written_at_start == (f"{conf}/elasticsearch.keystore",)
    opensearch = Nodes.model_validate({"nodes": {"id1": {"name": "os-1", "jvm": {"input_arguments": [
        "-Dopensearch.path.home=/usr/share/opensearch", "-Dopensearch.path.conf=/etc/opensearch"]},
        "settings": {"plugins.security.ssl.http.pemcert_filepath": "esnode.pem"}}}})
    [os_node] = running_nodes(opensearch, "opensearch")
    assert os_node.settings_file == "/etc/opensearch/opensearch.yml" and "/etc/opensearch/esnode.pem" in os_node.files


def report(*verdicts: NodePending) -> PendingReport:
    return PendingReport("prod", verdicts, STARTED)


def test_a_pending_run_chooses_the_pending_nodes_marks_for_reboot_only_those_whose_hosts_wait_and_its_plan_says_so(
        ) -> None:
    state = report(NodePending("es-1", (Reason(CONFIGURATION, "x changed"), Reason(REBOOT, "/run/reboot-required"))),
                   NodePending("es-2"), NodePending("es-3", (Reason(VERSION, "9.6.0"),)),
                   NodePending("es-4", unknown=("its host did not answer",)))
    assert state.exit_code == 1 and state.pending == ["es-1", "es-3"] and state.reboots == ["es-1"]
    chosen = pending_options(state, RunOptions(canary=True))
    assert chosen == RunOptions(canary=True, nodes=("es-1", "es-3"), reboot_nodes=("es-1",))
    assert chosen.reboots("es-1") and not chosen.reboots("es-3")
    only = pending_options(state, RunOptions(nodes=("es-3*",)))
    assert only is not None and only.nodes == ("es-3",) and only.reboot_nodes == ()
    assert pending_options(state, RunOptions(exclude=("es-1", "es-3"))) is None
    notes = pending_notes(state, chosen)
    assert notes == ("es-1: rebooted with its host (configuration: x changed; reboot: /run/reboot-required)",
                     "es-3: restarted (version: 9.6.0)", "left alone, nothing pending: es-2",
                     "es-4: left alone, what it runs could not be read: its host did not answer")
    # L7: `--nodes es-3*` restarts es-3 alone; es-1 is not said to be restarted, nor its host rebooted.
    assert pending_notes(state, only)[:2] == (
        "es-3: restarted (version: 9.6.0)",
        "es-1: pending (configuration: x changed; reboot: /run/reboot-required), left alone: --nodes or --exclude "
        "leaves it out")
    assert report(NodePending("es-2")).exit_code == 0
    assert report(NodePending("es-2"), NodePending("es-4", unknown=("x",))).exit_code == 9


def test_a_pending_version_a_restart_must_not_start_is_refused_before_any_change() -> None:
    def version(installed: str, running: str = "9.5.3") -> PendingReport:
        said = f"package elasticsearch is {installed}, the node runs {running}"
        return report(NodePending("es-1", (Reason(VERSION, said, installed, running),)), NodePending("es-2"))

    chosen = RunOptions(nodes=("es-1",))
    assert pending_problems(version("9.5.4"), chosen) == []
    assert pending_problems(version("9.5.2"), chosen) == [
        "es-1: 9.5.2 is installed, older than the 9.5.3 it runs: it would not start on its data; install 9.5.3 again"]
    assert pending_problems(version("10.0.0"), chosen) == [
        "es-1: 10.0.0 is installed, another major than the 9.5.3 it runs: roll it out with `orchestrate upgrade "
        "--to 10.0.0` (its checks and order)"]
    assert pending_problems(version("8.19.21"), RunOptions(nodes=("es-2",))) == [], "only the nodes the run restarts"
    assert judge("es-1", "elasticsearch", node(), evidence(package="9.5.4-1")).reasons[0].installed == "9.5.4"


def test_the_textfile_says_each_reason_of_each_node_as_prometheus_reads_it(tmp_path: Path) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    from orchestrator.runs.pending import write_textfile

    path = tmp_path / "pending.prom"
    write_textfile(report(NodePending("es-1", (Reason(REBOOT, "/run/reboot-required"),)), NodePending("es-2"),
                          NodePending("es-3", unknown=("its host did not answer",))), path)
    samples = {(s.labels["node"], s.labels["reason"]): s.value
               for family in text_string_to_metric_families(path.read_text())
               if family.name == "orchestrator_node_restart_pending" for s in family.samples}
    assert {k: v for k, v in samples.items() if v} == {("es-1", "reboot"): 1, ("es-3", "unknown"): 1}
    assert len(samples) == 3 * 5, "every node with every reason, 0 where it has not"
    assert "orchestrator_pending_checked_timestamp_seconds" in path.read_text()


def test_riak_says_the_release_it_runs_in_its_status() -> None:
    from orchestrator.riak.adapter import RIAK_KV_VERSION

    said = ("1-minute stats for 'riak@10.0.0.1'\n-------------------------------------------\n"
            "riak_core_version : <<\"2.9.10\">>\nriak_kv_version : <<\"2.9.10\">>\nring_members : ['riak@10.0.0.1']\n")
    found = RIAK_KV_VERSION.search(said)
    assert found is not None and found.group(1) == "2.9.10"
    assert RIAK_KV_VERSION.search("riak_kv_version : 3.2.0\n").group(1) == "3.2.0"  # type: ignore[union-attr]
    assert RIAK_KV_VERSION.search("riak_kv_version : <<\"$(reboot)\">>\n") is None
    ev = parse_host("pid 9\ncomm beam.smp\nmaps readable\npackage \nhomeversion 2.9.10\nhomeversion ;rm\n")
    assert ev.home_versions == ("2.9.10",)


def test_a_reboot_covers_its_host_every_node_on_it_in_its_batch_or_the_plan_refuses() -> None:
    """M5: a reboot takes down every node on its host. es-1 and es-2 share host h1: rebooting it for es-1's
    batch alone took es-2 down unchecked (the plan said SAFE). Now the plan says which nodes share a host, and
    refuses a reboot whose host runs a node outside that batch; one batch holding both is accepted."""
    from orchestrator.config.model import Inventory
    from orchestrator.runs.plans import with_shared_hosts
    from tests.unit.journals import plan_of

    inv = Inventory.model_validate({"cluster": {"name": "c", "endpoints": ["http://x:9200"]},
                                    "ssh": {"known_hosts": "/dev/null"}, "nodes": [
                                        {"name": "es-1", "host": "h1"}, {"name": "es-2", "host": "h1"},
                                        {"name": "es-3", "host": "h3"}]})
    by_node = plan_of([["es-1"], ["es-2"], ["es-3"]])
    for options in (RunOptions(reboot=True), RunOptions(nodes=("es-1",), reboot_nodes=("es-1",))):
        plan = with_shared_hosts(by_node, inv, options)
        assert plan.problems and "es-1: rebooting host h1 also takes down es-2" in plan.problems[0]
        assert "host h1 runs es-1, es-2: a reboot of it takes each of them down" in plan.notes
    only_es1 = with_shared_hosts(plan_of([["es-1"]]), inv, RunOptions(nodes=("es-1",), reboot_nodes=("es-1",)))
    assert only_es1.problems, "es-2 is not in this run at all"
    together = with_shared_hosts(plan_of([["es-1", "es-2"], ["es-3"]]), inv, RunOptions(reboot=True))
    assert together.problems == () and together.notes
    no_reboot = with_shared_hosts(by_node, inv, RunOptions())
    assert no_reboot.problems == () and no_reboot.notes, "a service restart takes down its node alone"


def test_a_node_given_by_host_name_is_matched_by_pending_as_by_the_plan() -> None:
    """One matcher (config/matching.py): an inventory entry named otherwise than its node, given by the host
    name the node reports, was planned and restarted, yet `pending` called it not listed."""
    from orchestrator.config.model import NodeEntry
    from orchestrator.runs.pending import _match
    from orchestrator.shards.plan import match_nodes
    from tests.unit.snapshots import node as es_node
    from tests.unit.snapshots import snapshot

    entry = NodeEntry.model_validate({"name": "search-a", "host": "h-es-1"})
    running = [node(name="es-1", addresses=("10.0.0.1", "h-es-1")), node(name="es-2", addresses=("10.0.0.2",))]
    assert _match(entry, running) is running[0]
    from orchestrator.config.model import Inventory

    inv = Inventory.model_validate({"cluster": {"name": "c", "endpoints": ["http://x:9200"]},
                                    "ssh": {"known_hosts": "/dev/null"},
                                    "nodes": [{"name": "search-a", "host": "h-es-1"}]})
    mapping, _ = match_nodes(inv, snapshot([es_node("es-1")], [], "es-1"))
    assert mapping == {"search-a": "id-es-1"}


def test_read_pending_says_unknown_for_each_node_it_cannot_read_and_matches_a_node_given_by_host_name() -> None:
    """`read_pending` itself (docs/safety.md: unknown, never clean): a host that does not answer, a host whose
    read fails, a node the cluster does not list are each unknown, saying why; a node given by the host name it
    reports is read; only the node its host's answer is about is judged clean."""
    from orchestrator.config.model import Inventory, NodeEntry
    from orchestrator.errors import HostUnreachable
    from orchestrator.hosts.transport import CommandResult
    from orchestrator.runs.pending import read_pending

    inv = Inventory.model_validate({"cluster": {"name": "c", "endpoints": ["http://x:9200"]},
                                    "ssh": {"known_hosts": "/dev/null"},
                                    "nodes": [{"name": n, "host": f"h-{n}"}
                                              for n in ("gone", "fails", "listed", "absent")]})
    running = [node(name="gone", pid=11, addresses=("10.0.0.1", "h-gone")),
               node(name="fails", pid=12, addresses=("10.0.0.2", "h-fails")),
               node(name="es-listed", pid=13, addresses=("10.0.0.3", "h-listed"))]  # its own name differs

    class Product:
        def running_nodes(self, adapter: object) -> list[RunningNode]:
            return running

    class Hosts:
        def run(self, entry: NodeEntry, command: str, timeout_s: float | None = None,
                stdin: bytes | None = None) -> CommandResult:
            if entry.name == "gone":
                raise HostUnreachable("gone (h-gone): cannot connect: timed out")
            if entry.name == "fails":
                return CommandResult(1, "", "sh: permission denied")
            return CommandResult(0, "boot b\npid 13\ncomm java\nstarted 1699999000 100 100\nmaps readable\n"
                                    f"package 9.5.3\nfile 1699990000 {CONF}/elasticsearch.yml\n", "")

    report = read_pending(inv, Product(), object(), Hosts())  # type: ignore[arg-type]
    verdicts = {n.node: n for n in report.nodes}
    assert verdicts["gone"].state == "unknown" and "its host did not answer" in verdicts["gone"].unknown[0]
    assert verdicts["fails"].state == "unknown" and "(exit 1): sh: permission denied" in verdicts["fails"].unknown[0]
    assert verdicts["absent"].state == "unknown" and "the cluster does not list it" in verdicts["absent"].unknown[0]
    assert verdicts["listed"].state == "clean", verdicts["listed"]
    assert report.exit_code == 9 and report.unknown == ["gone", "fails", "absent"]
