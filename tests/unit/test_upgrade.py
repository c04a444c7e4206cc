"""The upgrade's pure parts (version paths, order, preflight facts, install commands, the procedure), and
the procedure of `restart --reboot`."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from orchestrator.config.model import Inventory
from orchestrator.config.upgrade import check_command
from orchestrator.errors import ConfigError, OrchestratorError, UnsafeToProceed
from orchestrator.es.product import PRODUCT
from orchestrator.hosts.transport import LocalTransport
from orchestrator.restart.context import RunContext
from orchestrator.restart.events import Event
from orchestrator.restart.install import install_problems
from orchestrator.restart.journal import BatchRecord, RunOptions
from orchestrator.restart.plan import Mode, Upgrade
from orchestrator.restart.procedure import resolve
from orchestrator.restart.reboot import with_reboot
from orchestrator.runs.target import load_procedure
from orchestrator.shards.adapter import ShardClusterAdapter
from orchestrator.shards.plan import build_plan
from orchestrator.shards.snapshot import ClusterSnapshot, EsNode
from orchestrator.shards.steps import check_version, upgrade_plugins
from orchestrator.shards.versions import (
    OPENSEARCH_PATHS,
    UpgradeFacts,
    facts_findings,
    parse_version,
    path_problems,
)
from tests.helpers import assert_no_traceback, orchestrate
from tests.unit.journals import journal_of, plan_of
from tests.unit.snapshots import copies, inventory, node, snapshot

HOUR_MS = 3_600_000
FRESH = UpgradeFacts(read_at_ms=100 * HOUR_MS, newest_snapshot="repo:nightly", newest_snapshot_end_ms=99 * HOUR_MS)


@pytest.mark.parametrize(
    ("versions", "target", "refused"),
    [
        (["8.19.21", "8.19.21"], "9.5.3", None),
        (["8.18.2"], "9.0.1", None),  # 9.0 can be reached from 8.18
        (["8.18.2"], "9.1.0", "8.19 or later"),  # 9.1 and later need 8.19
        (["8.17.0"], "9.5.3", "8.19 or later"),
        (["7.17.9"], "8.19.21", None),
        (["7.16.3"], "8.19.21", "7.17 or later"),
        (["7.17.9"], "9.5.3", "more than one major"),  # a skipped major
        (["9.5.3", "8.19.21"], "8.19.21", "cannot be downgraded"),
        (["8.19.21"], "8.19.20", "cannot be downgraded"),
        (["8.1.0"], "8.19.21", None),  # within a major, any older minor
        (["9.5.3", "8.19.21"], "9.5.3", None),  # half done: the rest goes on
        (["x.y"], "9.5.3", "cannot read its version"),
    ],
)
def test_upgrade_paths(versions: list[str], target: str, refused: str | None) -> None:
    parsed = parse_version(target)
    assert parsed is not None
    problems = path_problems({f"n{i}": v for i, v in enumerate(versions)}, parsed)
    if refused is None:
        assert problems == []
    else:
        assert len(problems) == 1 and refused in problems[0], problems


@pytest.mark.parametrize(
    ("versions", "target", "refused"),
    [
        (["2.19.1"], "3.8.0", None),  # OpenSearch's own path to 3.x
        (["2.18.0"], "3.8.0", "2.19 or later"),
        (["1.3.20"], "2.19.1", None),
        (["1.3.20"], "3.8.0", "1.3 -> 2.x, 2.19 -> 3.x"),  # a skipped major, said with OpenSearch's paths
        (["3.8.0"], "2.19.1", "OpenSearch cannot be downgraded"),
        (["3.8.0"], "4.0.0", None),  # an unknown future major: from any minor of the last
    ],
)
def test_opensearch_upgrade_paths(versions: list[str], target: str, refused: str | None) -> None:
    parsed = parse_version(target)
    assert parsed is not None
    problems = path_problems({f"n{i}": v for i, v in enumerate(versions)}, parsed, OPENSEARCH_PATHS)
    if refused is None:
        assert problems == []
    else:
        assert len(problems) == 1 and refused in problems[0], problems


def upgrade_snapshot(roles: dict[str, tuple[str, ...]], master: str, versions: dict[str, str] | None = None,
                     facts: UpgradeFacts = FRESH) -> ClusterSnapshot:
    nodes = [replace(node(n, roles=r), version=(versions or {}).get(n, "8.19.21")) for n, r in roles.items()]
    names = list(roles)
    shards = [c for i in range(len(names)) for c in copies("i", i, [names[i], names[(i + 1) % len(names)]])]
    return replace(snapshot(nodes, shards, master), upgrade=facts)


def test_upgrade_order_tiers_then_no_data_then_masters_elected_last() -> None:
    roles = {"hot": ("data_hot", "data_content"), "m1": ("master",), "cold": ("data_cold",),
             "frozen": ("data_frozen",), "ingest": ("ingest",), "warm": ("data_warm",), "m2": ("master", "data"),
             "m3": ("master",), "plain": ("data",)}
    snap = upgrade_snapshot(roles, "m1")
    plan = build_plan(inventory(list(roles)), snap, Mode.NODE, upgrade_to="9.5.3")
    assert [b.label for b in plan.batches] == ["frozen", "cold", "warm", "hot", "plain", "ingest", "m2", "m3", "m1"]
    assert plan.upgrade is not None and plan.upgrade.to == "9.5.3"
    assert plan.upgrade.versions["hot"] == "8.19.21"
    assert plan.notes[0].startswith("upgrade 8.19.21 -> 9.5.3")
    assert plan.safe, plan.all_problems()
    # The same cluster restarted (no upgrade) keeps the restart's order: data-only nodes by name.
    assert [b.label for b in build_plan(inventory(list(roles)), snap, Mode.NODE).batches][:2] == ["cold", "frozen"]


def test_nodes_already_upgraded_are_left_out_and_a_downgrade_is_refused() -> None:
    roles = {"a": ("master", "data"), "b": ("master", "data"), "c": ("master", "data")}
    snap = upgrade_snapshot(roles, "a", versions={"b": "9.5.3"})
    plan = build_plan(inventory(list(roles)), snap, Mode.NODE, upgrade_to="9.5.3")
    assert [b.label for b in plan.batches] == ["c", "a"]
    assert any("already on 9.5.3, left out: b" in n for n in plan.notes)
    down = build_plan(inventory(list(roles)), snap, Mode.NODE, upgrade_to="9.4.0")
    assert not down.safe and any("cannot be downgraded" in p for p in down.problems)
    done = build_plan(inventory(list(roles)), upgrade_snapshot(roles, "a", versions=dict.fromkeys(roles, "9.5.3")),
                      Mode.NODE, upgrade_to="9.5.3")
    assert done.problems == ("every node already runs 9.5.3: nothing to upgrade",)


def test_an_upgrades_plan_says_each_problem_and_note_of_its_own_beside_the_clusters() -> None:
    roles = {"a": ("master", "data"), "b": ("master", "data"), "c": ("master", "data")}
    inv = inventory(list(roles))
    snap = upgrade_snapshot(roles, "a", versions={"a": "8.19.20"})
    plan = build_plan(inv, snap, Mode.NODE, upgrade_to="9.5.3")
    assert plan.notes[0] == ("upgrade 8.19.20, 8.19.21 -> 9.5.3: data tiers first (frozen, cold, warm, hot), then "
                             "nodes without data, then master-eligible nodes, the elected master last")
    # The cluster's own problems stay beside the upgrade's.
    old = upgrade_snapshot(roles, "a", versions={"a": "8.18.2"})
    refused = build_plan(inv, replace(old, health=replace(old.health, status="red")), Mode.NODE, upgrade_to="9.5.3")
    assert [p.split(":")[0].split(",")[0] for p in refused.problems] == [
        "cluster health is red", "9.5.3 can be reached from 8.19 or later of 8.x"], refused.problems
    # OpenSearch's paths, when given: 3.x is reached from 2.19 (Elasticsearch's paths know no 2.x or 3.x).
    os_snap = upgrade_snapshot({"a": ("master", "data")}, "a", versions={"a": "2.18.0"})

    def path_said(plan_: object) -> list[str]:
        return [p for p in plan_.problems if "3.8.0" in p]  # type: ignore[attr-defined]

    assert path_said(build_plan(inventory(["a"]), os_snap, Mode.NODE, upgrade_to="3.8.0", paths=OPENSEARCH_PATHS))
    assert path_said(build_plan(inventory(["a"]), os_snap, Mode.NODE, upgrade_to="3.8.0")) == []
    # The snapshot check is on unless turned off.
    stale = replace(snap, upgrade=replace(FRESH, newest_snapshot=None, newest_snapshot_end_ms=None))
    assert any("no successful snapshot" in p for p in build_plan(inv, stale, Mode.NODE, upgrade_to="9.5.3").problems)
    assert build_plan(inv, stale, Mode.NODE, upgrade_to="9.5.3", snapshot_check=False).safe
    # Facts not read: said, not a crash.
    unread = build_plan(inv, replace(snap, upgrade=None), Mode.NODE, upgrade_to="9.5.3")
    assert unread.problems == ("the upgrade's preflight facts were not read (a snapshot saved by `plan` without "
                               "--upgrade-to?)",)
    assert unread.upgrade is not None and unread.upgrade.plugins == {"a": (), "b": (), "c": ()}
    # Not a version: said with what was given, which the plan keeps.
    odd = build_plan(inv, snap, Mode.NODE, upgrade_to="nine")
    assert odd.problems == ("'nine' is not a version such as 9.5.3",) and odd.upgrade is not None
    assert odd.upgrade.to == "nine"


@pytest.mark.parametrize(("done", "said"), [(20, ""), (21, " and 1 more"), (25, " and 5 more")])
def test_nodes_already_upgraded_are_named_up_to_twenty(done: int, said: str) -> None:
    roles = {f"n{i:02}": ("data",) for i in range(done)} | {"m": ("master", "data")}
    snap = upgrade_snapshot(roles, "m", versions=dict.fromkeys([f"n{i:02}" for i in range(done)], "9.5.3"))
    plan = build_plan(inventory(list(roles)), snap, Mode.NODE, upgrade_to="9.5.3")
    assert [b.label for b in plan.batches] == ["m"]
    names = ", ".join(f"n{i:02}" for i in range(min(done, 20)))
    assert f"already on 9.5.3, left out: {names}{said}" in plan.notes, plan.notes


@pytest.mark.parametrize(
    ("facts", "check", "problem", "note"),
    [
        (FRESH, True, None, "repo:nightly, is 1.0 h old"),
        (replace(FRESH, newest_snapshot_end_ms=70 * HOUR_MS), True, "30.0 h old, older than", None),
        (replace(FRESH, newest_snapshot=None, newest_snapshot_end_ms=None), True, "no successful snapshot", None),
        (replace(FRESH, newest_snapshot=None, newest_snapshot_end_ms=None), False, None, "check is off"),
        (replace(FRESH, snapshot_error="403 forbidden"), True, "cannot tell whether a recent snapshot exists", None),
        (replace(FRESH, deprecations=("index_settings logs: uses a 7.x format",)), True, "1 critical item", None),
        (replace(FRESH, deprecations=None), True, None, "no deprecation API"),
        (replace(FRESH, plugins={"a": ("analysis-icu",), "b": ()}), True, None, "on 1 node(s): analysis-icu"),
    ],
)
def test_upgrade_preflight_facts(facts: UpgradeFacts, check: bool, problem: str | None, note: str | None) -> None:
    problems, notes = facts_findings(facts, 24, check)
    assert [p for p in problems if problem and problem in p] if problem else problems == [], problems
    if note:
        assert any(note in n for n in notes), notes


def test_facts_survive_a_saved_snapshot() -> None:
    snap = upgrade_snapshot({"a": ("master", "data")}, "a",
                            facts=replace(FRESH, plugins={"a": ("repository-s3",)}, deprecations=None))
    again = ClusterSnapshot.from_json(snap.to_json())
    assert again.upgrade == snap.upgrade


def upgrade_inventory(install: dict[str, object]) -> Inventory:
    raw = inventory(["es-1"]).model_dump(mode="json")
    return Inventory.model_validate({**raw, "upgrade": {"install": install}})


def test_install_methods_render_idempotent_commands_with_quoted_values() -> None:
    apt = upgrade_inventory({"method": "package"}).upgrade.install
    assert apt is not None
    assert apt.commands("9.5.3", "es-1") == [
        "DEBIAN_FRONTEND=noninteractive apt-get install -y -q --allow-downgrades -o Dpkg::Options::=--force-confold "
        "elasticsearch=9.5.3"]
    assert check_command(apt, "9.5.3", "es-1") == (
        "apt-cache show elasticsearch=9.5.3 >/dev/null && { ! apt-mark showhold | grep -qx elasticsearch || "
        "{ echo 'elasticsearch is held (apt-mark hold): apt-get will not install another version; `apt-mark "
        "unhold elasticsearch` first' >&2; exit 1; }; }")
    dnf = upgrade_inventory({"method": "package", "manager": "dnf"}).upgrade.install
    assert dnf is not None and dnf.commands("9.5.3", "es-1") == ["dnf -y -q install elasticsearch-9.5.3"]
    switch = upgrade_inventory({"method": "switch", "target": "/opt/es-{version}", "link": "/opt/es",
                                "unpack": "/srv/dist/elasticsearch-{version}-linux-x86_64.tar.gz"}).upgrade.install
    assert switch is not None
    assert switch.commands("9.5.3", "es-1") == [
        'test -e /opt/es-9.5.3 || tar -xzf /srv/dist/elasticsearch-9.5.3-linux-x86_64.tar.gz -C "$(dirname '
        '/opt/es-9.5.3)"', "ln -sfn /opt/es-9.5.3 /opt/es"]
    odd = upgrade_inventory({"method": "switch", "target": "/opt/my es/{node}-{version}", "link": "/opt/es"})
    assert odd.upgrade.install is not None
    assert odd.upgrade.install.commands("9.5.3", "es-1") == ["ln -sfn '/opt/my es/es-1-9.5.3' /opt/es"]
    own = upgrade_inventory({"method": "commands", "run": ["/usr/local/bin/es-install {version} {node}"],
                             "check": "test -d /srv/es/{version}"}).upgrade.install
    assert own is not None and own.commands("9.5.3", "es-1") == ["/usr/local/bin/es-install 9.5.3 es-1"]
    assert check_command(own, "9.5.3", "es-1") == "test -d /srv/es/9.5.3"


@pytest.mark.parametrize("install", [{"method": "yum-ish"}, {"method": "switch", "target": "/opt/x"},
                                     {"method": "commands", "run": []}, {"method": "package", "package": "-rf"}])
def test_bad_install_methods_are_refused_when_loaded(install: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        upgrade_inventory(install)


def test_the_upgrade_procedure_installs_between_stop_and_start() -> None:
    procedure = load_procedure(inventory(["es-1"]), PRODUCT, upgrade=True)
    steps = [name for name, _ in procedure.batch]
    assert steps.index("stop_service") < steps.index("install_version") < steps.index("upgrade_plugins") \
        < steps.index("start_service") < steps.index("wait_for_join") < steps.index("check_version")
    # The restart's procedure has no install: an upgrade with it would only restart, and is refused.
    raw = inventory(["es-1"]).model_dump(mode="json")
    with pytest.raises(ConfigError, match="needs the step install_version"):
        load_procedure(Inventory.model_validate({**raw, "upgrade": {"playbook": "elasticsearch-rolling"}}), PRODUCT,
                       upgrade=True)


@pytest.mark.parametrize(
    ("doc", "args", "said"),
    [
        ({"cluster": {"name": "c", "endpoints": ["http://127.0.0.1:9"]}}, ["--to", "9.5"], "is not a version"),
        ({"cluster": {"name": "c", "endpoints": ["http://127.0.0.1:9"]}}, ["--to", "9.5.3; rm -rf /"],
         "is not a version"),
        ({"cluster": {"name": "c", "product": "riak"}}, ["--to", "3.2.0"], "not available for riak clusters yet"),
    ],
)
def test_upgrade_refuses_bad_input_clearly_before_any_call(doc: dict[str, object], args: list[str], said: str,
                                                           tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({**doc, "ssh": {"known_hosts": "/dev/null"},
                                    "nodes": [{"name": "n1", "host": "127.0.0.1"}]}))
    proc = orchestrate("upgrade", "--config", str(path), "--yes", *args, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert said in proc.stderr
    assert_no_traceback(proc)


class NodesOfVersions(ShardClusterAdapter):
    """An adapter whose node info reports given versions (None: the node is not listed yet)."""

    def __init__(self, answers: list[dict[str, str | None]]) -> None:
        super().__init__(rest=None)  # type: ignore[arg-type]
        self.answers = answers

    def nodes_by_id(self, node_ids: Sequence[str]) -> list[EsNode]:
        now = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        return [replace(node(n), version=v) for n, v in now.items() if v is not None and node(n).id in node_ids]


def version_check_context(answers: list[dict[str, str | None]]) -> tuple[RunContext, BatchRecord, list[Event]]:
    plan = plan_of([["es-1"]])
    journal = journal_of(plan)
    journal.spec = replace(journal.spec, options=RunOptions(upgrade_to="9.5.3"))
    inv = Inventory.model_validate({**inventory(["es-1"]).model_dump(mode="json"),
                                    "timeouts": {"join_s": 5, "poll_interval_s": 0.05}})
    events: list[Event] = []
    ctx = RunContext(inv=inv, cluster=NodesOfVersions(answers), transport=LocalTransport(),
                     service=None, journal=journal, emit=events.append)  # type: ignore[arg-type]
    return ctx, journal.batches[0], events


def test_check_version_waits_for_node_info_and_stops_the_run_on_another_version() -> None:
    ctx, batch, events = version_check_context([{"es-1": None}, {"es-1": None}, {"es-1": "9.5.3"}])
    check_version(ctx, batch)
    assert events[-1].message == "es-1: runs 9.5.3"
    ctx, batch, events = version_check_context([{"es-1": "8.19.21"}])
    with pytest.raises(OrchestratorError, match=re.escape("es-1 rejoined running 8.19.21, not 9.5.3")):
        check_version(ctx, batch)
    assert events == []


def test_reboot_steps_go_after_the_tuning_or_where_the_playbook_puts_them() -> None:
    procedure = load_procedure(inventory(["es-1"]), PRODUCT)
    steps = [name for name, _ in resolve(with_reboot(procedure.playbook), PRODUCT).batch]
    assert steps[steps.index("tune_host") + 1:steps.index("tune_host") + 4] == ["reboot_host", "check_tuning",
                                                                               "start_service"]
    placed = procedure.playbook.model_copy(update={"batch": ["stop_service", "reboot_host", "tune_host",
                                                             "start_service", "wait_for_join"]})
    assert with_reboot(placed) is placed
    wrong = procedure.playbook.model_copy(update={"batch": ["reboot_host", "stop_service", "start_service"]})
    with pytest.raises(ConfigError, match="stop_service must come before reboot_host"):
        resolve(wrong, PRODUCT)


class AnsweringTransport:
    """Each command's exit code from a function of the command; every command recorded."""

    def __init__(self, rc_of: Callable[[str], int]) -> None:
        self.rc_of, self.commands = rc_of, list[str]()

    def run(self, node: object, command: str, timeout_s: float | None = None, stdin: bytes | None = None) -> Any:
        from orchestrator.hosts.transport import CommandResult

        self.commands.append(command)
        rc = self.rc_of(command)
        return CommandResult(rc, "", "" if rc == 0 else "no such version")

    def exact_sudo(self, node: object) -> bool:
        return False


def test_install_preflight_names_each_host_that_cannot_install_and_a_missing_method() -> None:
    inv = Inventory.model_validate({**inventory(["es-1", "es-2"]).model_dump(mode="json"),
                                    "upgrade": {"install": {"method": "switch", "link": "/opt/es",
                                                            "target": "/opt/es-{version}-{node}"}}})
    transport = AnsweringTransport(lambda c: 1 if "es-2" in c else 0)
    problems = install_problems(inv, "9.5.3", transport, list(inv.nodes))  # type: ignore[arg-type]
    assert transport.commands == ["test -e /opt/es-9.5.3-es-1", "test -e /opt/es-9.5.3-es-2"]
    assert problems == ["es-2: 9.5.3 cannot be installed (link /opt/es -> /opt/es-9.5.3-es-2): "
                        "`test -e /opt/es-9.5.3-es-2` exited 1: no such version"]
    assert install_problems(inventory(["es-1"]), "9.5.3", transport, [])[0].startswith(  # type: ignore[arg-type]
        "upgrade.install is not set in the inventory")


HOSTILE_PLUGIN_NAMES = ["https://attacker.example/x.zip", "file:///tmp/x.zip", "--verbose", "-h",
                        "analysis-icu; rm -rf /", "../../x", "x.zip", "Analysis-ICU", "analysis-icu\n"]


@pytest.mark.parametrize("name", HOSTILE_PLUGIN_NAMES)
def test_a_plugin_name_from_the_cluster_that_is_no_plain_name_is_refused_before_any_change(name: str) -> None:
    roles = {"a": ("master", "data"), "b": ("master", "data")}
    facts = replace(FRESH, plugins={"a": ("analysis-icu", name), "b": (name,)})
    plan = build_plan(inventory(list(roles)), upgrade_snapshot(roles, "a", facts=facts), Mode.NODE,
                      upgrade_to="9.5.3")
    assert not plan.safe
    refused = [p for p in plan.problems if "plugin" in p]
    assert len(refused) == 1 and ascii(name) in refused[0] and "(on a, b)" in refused[0], plan.problems
    # Even listed by the operator, a URL, path or option is no name: the inventory refuses it when loaded.
    with pytest.raises(ValidationError):
        Inventory.model_validate({**inventory(["a"]).model_dump(mode="json"),
                                  "upgrade": {"allowed_plugins": [name]}})


def test_an_unofficial_plugin_is_reinstalled_only_when_the_inventory_allows_it() -> None:
    roles = {"a": ("master", "data"), "b": ("master", "data")}
    facts = replace(FRESH, plugins={"a": ("acme-auth", "analysis-icu")})
    snap = upgrade_snapshot(roles, "a", facts=facts)
    refused = build_plan(inventory(list(roles)), snap, Mode.NODE, upgrade_to="9.5.3")
    assert [p for p in refused.problems if "acme-auth" in p and "upgrade.allowed_plugins" in p], refused.problems
    allowing = Inventory.model_validate({**inventory(list(roles)).model_dump(mode="json"),
                                         "upgrade": {"allowed_plugins": ["acme-auth"]}})
    plan = build_plan(allowing, snap, Mode.NODE, upgrade_to="9.5.3")
    assert plan.safe, plan.all_problems()
    assert plan.upgrade is not None and plan.upgrade.plugins == {"a": ("acme-auth", "analysis-icu"), "b": ()}


@pytest.mark.parametrize("name", ["https://attacker.example/x.zip", "--verbose", "acme-auth"])
def test_the_plugin_step_never_runs_a_name_it_may_not_install_even_from_a_changed_journal(name: str) -> None:
    plan = plan_of([["es-1"]])
    journal = journal_of(replace(plan, upgrade=Upgrade(to="9.5.3", plugins={"es-1": ("analysis-icu", name)})))
    journal.spec = replace(journal.spec, options=RunOptions(upgrade_to="9.5.3"))
    transport = AnsweringTransport(lambda c: 0)
    ctx = RunContext(inv=inventory(["es-1"]), cluster=None, transport=transport,  # type: ignore[arg-type]
                     service=None, journal=journal, emit=lambda e: None)  # type: ignore[arg-type]
    with pytest.raises(UnsafeToProceed, match="plugin"):
        upgrade_plugins(ctx, journal.batches[0])
    assert all(name not in c for c in transport.commands), transport.commands
