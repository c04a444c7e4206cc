"""What `orchestrate pending` says of a node, whole, for each case an operator meets (pending/verdict.py): the
process not found or another one, a version the node did not say or a package's own numbering, a change at the
edge of the start's slack, settings compared value by value, needrestart and the kernels installed, and which
installed versions a restart must not start. The common cases: test_pending."""

from __future__ import annotations

from orchestrator.pending.host import HostEvidence
from orchestrator.pending.verdict import (
    REBOOT,
    VERSION,
    NodePending,
    Reason,
    RunningNode,
    judge,
    settings_differ,
    version_problem,
)

STARTED = 1_700_000_000.0
CONF = "/etc/elasticsearch"
YML = f"{CONF}/elasticsearch.yml"


def node(**changes: object) -> RunningNode:
    base: dict[str, object] = dict(name="es-1", addresses=("10.0.0.1",), version="9.5.3", pid=4242, started_s=STARTED,
                                   package="elasticsearch", files=(YML,), settings_file=YML,
                                   settings={"cluster.name": "prod"}, command="java")
    base.update(changes)
    return RunningNode(**base)  # type: ignore[arg-type]


def host(**changes: object) -> HostEvidence:
    ev = HostEvidence(boot_id="b1", pid=4242, command="java", started_s=STARTED + 0.5, package="9.5.3",
                      files={YML: STARTED - 3600}, maps_readable=True, kernel_running="6.1.0-18-amd64")
    for key, value in changes.items():
        setattr(ev, key, value)
    return ev


def said(verdict: NodePending) -> tuple[list[str], list[str]]:
    return [str(r) for r in verdict.reasons], list(verdict.unknown)


ELSEWHERE = "is the node on another host than the inventory says?"


def test_a_process_not_found_or_another_one_is_unknown_saying_which() -> None:
    assert judge("search-a", "elasticsearch", node(), host(pid=None)) == NodePending(
        "search-a", (), (f"its process (4242) was not found on its host: {ELSEWHERE}",))
    assert judge("search-a", "elasticsearch", node(pid=None), host(pid=None)) == NodePending(
        "search-a", (), (f"its process (the service main process) was not found on its host: {ELSEWHERE}",))
    assert judge("search-a", "elasticsearch", node(), host(command="python3")) == NodePending(
        "search-a", (), (f"process 4242 on its host is `python3`, not the node's `java`: {ELSEWHERE}",))


def test_a_version_is_the_package_s_upstream_one_and_a_node_that_does_not_say_its_own_is_unknown() -> None:
    assert said(judge("es-1", "elasticsearch", node(version=None), host())) == (
        [], ["version: the node did not say its version"])
    # Debian's epoch and revision are not the product's version; a revision after a pre-release keeps it.
    assert judge("es-1", "elasticsearch", node(), host(package="1:9.5.3-1")).state == "clean"
    prerelease = judge("es-1", "elasticsearch", node(), host(package="9.6.0-rc1-2"))
    assert prerelease.reasons == (Reason(VERSION, "package elasticsearch is 9.6.0-rc1, the node runs 9.5.3",
                                         "9.6.0-rc1", "9.5.3"),)
    assert said(judge("es-1", "elasticsearch", node(), host(package=""))) == (
        [], ["version: no package elasticsearch installed and no version in the home"])


def test_which_installed_versions_a_restart_must_not_start() -> None:
    assert version_problem("es-1", Reason(VERSION, "x", "9.5.3", "9.5.3")) is None, "the same version"
    assert version_problem("es-1", Reason(VERSION, "x", "", "9.5.3")) is None, "not known: nothing to refuse"
    assert version_problem("es-1", Reason(VERSION, "x", "9.5.2", "")) is None
    assert version_problem("es-1", Reason(REBOOT, "x", "8.0.0", "9.5.3")) is None, "only a version reason"
    assert version_problem("es-1", Reason(VERSION, "x", "9.5.2", "9.5.3")) == (
        "es-1: 9.5.2 is installed, older than the 9.5.3 it runs: it would not start on its data; install 9.5.3 "
        "again")


def test_a_change_at_the_start_s_slack_is_not_a_change_and_one_past_it_says_both_times() -> None:
    at_the_edge = host(files={YML: STARTED + 2.0})
    assert judge("es-1", "elasticsearch", node(), at_the_edge).state == "clean", "within 2 s of the start"
    one = judge("es-1", "elasticsearch", node(), host(files={YML: STARTED + 3.0}, settings_text="cluster.name: prod\n"))
    assert said(one)[0] == [f"configuration: {YML} changed after the node started (started 2023-11-14 22:13:20 UTC, "
                            f"changed 2023-11-14 22:13:23 UTC); {YML}: no setting differs from the running node's"]
    two = judge("es-1", "elasticsearch", node(), host(files={YML: STARTED + 9.0, f"{CONF}/jvm.options": STARTED + 5.0}))
    assert said(two)[0] == [f"configuration: {CONF}/jvm.options, {YML} changed after the node started (started "
                            "2023-11-14 22:13:20 UTC, last changed 2023-11-14 22:13:29 UTC)"]
    unread = judge("es-1", "elasticsearch", node(started_s=None), host(started_s=None))
    assert "configuration: when the process started could not be read" in unread.unknown


def test_settings_are_compared_value_by_value_past_those_the_file_cannot_show() -> None:
    differ = settings_differ("a:\n  first: ${FROM_ENV}\nxpack.security.http.ssl.key: k\nb: false\nc: true\n"
                             "d: [z, y]\ne: " + "v" * 60 + "\nf: " + "w" * 61 + "\n",
                             {"a.first": "x", "b": "false", "c": "false", "d": ["y", "z"], "e": "v" * 60})
    assert differ == ["c: 'true' in the file, 'false' on the running node",
                      f"f: {'w' * 57 + '...'!r} in the file, not set on the running node"], differ
    assert settings_differ("a: [1, 2]\n", {"a": ["3"]}) == ["a: '1,2' in the file, '3' on the running node"]
    assert settings_differ(f"g: {'u' * 60}\n", {}) == [f"g: {'u' * 60!r} in the file, not set on the running node"]
    [broken] = settings_differ("a: [\n", {"a": "x"})
    assert broken.startswith("the file was not compared (line 2, column 1: not valid YAML"), broken


def test_needrestart_names_the_service_with_or_without_its_suffix_and_otherwise_the_code_speaks() -> None:
    listed = host(needrestart={"NEEDRESTART-SVC": ["elasticsearch"]})
    assert said(judge("es-1", "elasticsearch.service", node(), listed))[0] == [
        "replaced code: needrestart -b lists the node's service"]
    unlisted = host(needrestart={"NEEDRESTART-SVC": ["other.service"]},
                    replaced=["/usr/share/elasticsearch/lib/a.jar", "/usr/share/elasticsearch/lib/b.jar"])
    assert said(judge("es-1", "elasticsearch", node(), unlisted))[0] == [
        "replaced code: the process maps /usr/share/elasticsearch/lib/a.jar, /usr/share/elasticsearch/lib/b.jar, "
        "since deleted or replaced (needrestart did not list the service)"]


def test_a_reboot_is_said_with_what_asks_for_it() -> None:
    assert said(judge("es-1", "elasticsearch", node(), host(reboot_required="")))[0] == [
        "reboot: /run/reboot-required"]
    kernel = host(needrestart={"NEEDRESTART-KSTA": ["2"]})
    assert said(judge("es-1", "elasticsearch", node(), kernel))[0] == [
        "reboot: needrestart: kernel ? installed, 6.1.0-18-amd64 running"]
    assert judge("es-1", "elasticsearch", node(), host(needrestart={"NEEDRESTART-SVC": []})).state == "clean", \
        "needrestart without a kernel state asks for no reboot"
    # The newest kernel by its numbers (6.1.0-20 after 6.1.0-9), not by its text.
    newer = host(kernels_installed=("6.1.0-9-amd64", "6.1.0-20-amd64", "6.1.0-18-amd64"))
    assert said(judge("es-1", "elasticsearch", node(), newer))[0] == [
        "reboot: kernel 6.1.0-20-amd64 installed, 6.1.0-18-amd64 running"]


def test_many_files_are_named_three_and_counted() -> None:
    changed = {f"{CONF}/jvm.options.d/{n}.options": STARTED + 10 + n for n in range(5)}
    verdict = judge("es-1", "elasticsearch", node(), host(files=changed))
    assert said(verdict)[0][0].startswith(
        f"configuration: {CONF}/jvm.options.d/0.options, {CONF}/jvm.options.d/1.options, "
        f"{CONF}/jvm.options.d/2.options and 2 more changed after the node started")


def test_the_json_of_a_verdict_says_its_state_reasons_and_what_could_not_be_read() -> None:
    verdict = NodePending("es-1", (Reason(REBOOT, "/run/reboot-required"),), ("configuration: x",))
    assert verdict.to_json() == {"node": "es-1", "state": "pending",
                                 "reasons": [{"reason": "reboot", "evidence": "/run/reboot-required"}],
                                 "unknown": ["configuration: x"]}
    assert NodePending("es-2").to_json() == {"node": "es-2", "state": "clean", "reasons": [], "unknown": []}
