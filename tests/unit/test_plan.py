"""Planning and safety are pure functions: table-driven tests over built snapshots."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.restart.plan import Mode
from orchestrator.shards.plan import ALLOCATION_ENABLE, build_plan, match_nodes
from orchestrator.shards.safety import (
    batch_problems,
    cluster_problems,
    shards_without_other_copy,
    started_only_on_by_index,
    started_only_on_by_scan,
)
from orchestrator.shards.snapshot import EsNode, ShardCopy
from tests.unit.snapshots import copies, inventory, node, snapshot


@pytest.mark.parametrize(
    ("roles", "master", "expected"),
    [
        # data-only first, then master-eligible, the elected master last
        ({"a": ("data",), "b": ("master", "data"), "c": ("master", "data")}, "b", ["a", "c", "b"]),
        ({"a": ("master", "data"), "b": ("master", "data"), "c": ("master", "data")}, "a", ["b", "c", "a"]),
        ({"a": ("data",), "b": ("data_hot",), "c": ("master",)}, "c", ["a", "b", "c"]),
    ],
)
def test_node_order(roles: dict[str, tuple[str, ...]], master: str, expected: list[str]) -> None:
    nodes = [node(n, roles=r) for n, r in roles.items()]
    shards = copies("i", 0, ["a", "b"]) + copies("i", 1, ["b", "c"]) + copies("i", 2, ["c", "a"])
    plan = build_plan(inventory(list(roles)), snapshot(nodes, shards, master), Mode.NODE)
    assert [b.label for b in plan.batches] == expected
    assert plan.safe, plan.all_problems()
    masters = sum(1 for r in roles.values() if "master" in r)
    assert any("master-eligible" in n for n in plan.notes) == (masters < 3)


def test_zone_mode_batches_one_zone_each_master_zone_last() -> None:
    names = ["n1", "n2", "n3", "n4", "n5", "n6"]
    zones = ["z1", "z2", "z3", "z1", "z2", "z3"]
    nodes = [node(n, zone=z) for n, z in zip(names, zones, strict=True)]
    shards = copies("i", 0, ["n1", "n2"]) + copies("i", 1, ["n3", "n4"]) + copies("i", 2, ["n5", "n6"])
    plan = build_plan(inventory(names, zones), snapshot(nodes, shards, "n2"), Mode.ZONE)
    assert [b.label for b in plan.batches] == ["z1", "z3", "z2"]
    assert [b.nodes for b in plan.batches] == [("n1", "n4"), ("n3", "n6"), ("n5", "n2")]
    assert plan.safe, plan.all_problems()


def test_a_zone_holding_half_the_masters_is_split_and_the_plan_says_why() -> None:
    # Three master-eligible nodes in two zones: z1 holds two of them, so z1 restarts in two batches.
    names = ["m1", "m2", "m3", "d1", "d2", "d3"]
    zones = ["z1", "z2", "z1", "z1", "z2", "z2"]
    roles = {"m": ("master", "data"), "d": ("data",)}
    nodes = [node(n, zone=z, roles=roles[n[0]]) for n, z in zip(names, zones, strict=True)]
    shards = copies("i", 0, ["m1", "m2"]) + copies("i", 1, ["d1", "d2"]) + copies("i", 2, ["m3", "d3"])
    plan = build_plan(inventory(names, zones), snapshot(nodes, shards, "m3"), Mode.ZONE)
    assert [b.label for b in plan.batches] == ["z2", "z1 (1/2)", "z1 (2/2)"]
    assert [b.nodes for b in plan.batches] == [("d2", "d3", "m2"), ("d1", "m1"), ("m3",)]  # elected master last
    assert plan.safe, plan.all_problems()
    assert any("zone z1 holds 2 of the 3 master-eligible nodes" in n and "2 batches" in n for n in plan.notes)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["z1", "z2", "z3"]), st.booleans()), min_size=1, max_size=12),
       st.data())
def test_no_zone_batch_ever_holds_half_the_master_eligible_nodes(layout: list[tuple[str, bool]],
                                                                  data: st.DataObject) -> None:
    names = [f"n{i}" for i in range(len(layout))]
    zones = [z for z, _ in layout]
    nodes = [node(n, zone=z, roles=("master", "data") if m else ("data",))
             for n, (z, m) in zip(names, layout, strict=True)]
    masters = {n.name for n in nodes if n.is_master_eligible}
    master = data.draw(st.sampled_from(sorted(masters) or names))  # the elected one is master-eligible
    plan = build_plan(inventory(names, zones), snapshot(nodes, [], master), Mode.ZONE)
    assert sorted(n for b in plan.batches for n in b.nodes) == sorted(names), "every node exactly once"
    if len(masters) >= 3:
        assert all(len(masters & set(b.nodes)) * 2 < len(masters) for b in plan.batches)
    if masters:
        assert plan.batches[-1].nodes[-1] == master, "the elected master is restarted last"
    assert plan.safe, plan.all_problems()


def test_zone_whose_loss_leaves_a_shard_without_copy_is_unsafe() -> None:
    names = ["n1", "n2", "n3", "n4"]
    zones = ["z1", "z2", "z1", "z2"]
    nodes = [node(n, zone=z, roles=("master", "data") if n in ("n1", "n2") else ("data",))
             for n, z in zip(names, zones, strict=True)]
    shards = copies("logs", 0, ["n1", "n3"]) + copies("logs", 1, ["n2", "n4"])  # both copies in one zone
    plan = build_plan(inventory(names, zones), snapshot(nodes, shards, "n1"), Mode.ZONE)
    assert not plan.safe
    assert any("[logs][0]" in p and "no started copy" in p for p in plan.all_problems())


def test_index_with_zero_replicas_is_unsafe_and_says_what_to_do() -> None:
    nodes = [node("a"), node("b"), node("c")]
    shards = copies("solo", 0, ["a"]) + copies("ok", 0, ["b", "c"])
    plan = build_plan(inventory(["a", "b", "c"]), snapshot(nodes, shards, "c"), Mode.NODE)
    problems = plan.all_problems()
    assert len(problems) == 1
    assert "solo" in problems[0] and "0 replicas" in problems[0] and "number_of_replicas" in problems[0]


@pytest.mark.parametrize(
    ("status", "initializing", "allow_yellow", "expected"),
    [
        ("green", 0, False, []),
        ("red", 0, True, ["red"]),
        ("yellow", 0, False, ["yellow"]),
        ("yellow", 0, True, []),
        ("green", 2, False, ["not settled"]),
    ],
)
def test_cluster_problems(status: str, initializing: int, allow_yellow: bool, expected: list[str]) -> None:
    snap = snapshot([node("a")], [], "a", status=status, initializing=initializing)
    problems = cluster_problems(snap, allow_yellow)
    assert len(problems) == len(expected)
    for p, word in zip(problems, expected, strict=True):
        assert word in p


def test_master_quorum_protected() -> None:
    nodes = [node("a"), node("b"), node("c")]
    snap = snapshot(nodes, [], "a")
    assert batch_problems(snap, ["id-a"], "a") == []
    assert any("quorum" in p for p in batch_problems(snap, ["id-a", "id-b"], "a+b"))


def test_missing_and_extra_nodes_are_named() -> None:
    snap = snapshot([node("a"), node("b"), node("x")], [], "a")
    mapping, problems = match_nodes(inventory(["a", "b", "c"]), snap)
    assert mapping == {"a": "id-a", "b": "id-b"}
    assert any("node c" in p and "not in the cluster" in p for p in problems)
    red = build_plan(inventory(["a", "b", "c"]), snapshot([node("a"), node("b")], [], "a", status="red"), Mode.NODE)
    assert [p.split(" ")[:2] for p in red.problems] == [["node", "c"], ["cluster", "health"]], "both are said"


def test_settings_written_where_they_take_effect_and_remember_the_old_value() -> None:
    snap = snapshot([node("a"), node("b")], copies("i", 0, ["a", "b"]), "a",
                    persistent={"indices.recovery.max_bytes_per_sec": "40mb"},
                    transient={ALLOCATION_ENABLE: "all"})
    plan = build_plan(inventory(["a", "b"]), snap, Mode.NODE)
    by_key = {s.key: s for s in plan.settings}
    assert (by_key[ALLOCATION_ENABLE].scope, by_key[ALLOCATION_ENABLE].before) == ("transient", "all")
    rate = by_key["indices.recovery.max_bytes_per_sec"]
    assert (rate.scope, rate.before, rate.during) == ("persistent", "40mb", "100mb")
    assert by_key["indices.recovery.max_concurrent_file_chunks"].before is None


def test_a_limit_the_cluster_already_has_higher_is_left_alone_and_said() -> None:
    snap = snapshot([node("a", processors=2), node("b", processors=2)], copies("i", 0, ["a", "b"]), "a",
                    persistent={"indices.recovery.max_bytes_per_sec": "1gb",
                                "cluster.routing.allocation.node_concurrent_recoveries": "15"},
                    transient={"indices.recovery.max_concurrent_file_chunks": "2"})
    plan = build_plan(inventory(["a", "b"]), snap, Mode.NODE)
    by_key = {s.key: s for s in plan.settings}
    assert "indices.recovery.max_bytes_per_sec" not in by_key, "1gb in force: the run's 100mb would lower it"
    assert "cluster.routing.allocation.node_concurrent_recoveries" not in by_key, "15 in force, 2 chosen"
    chunks = by_key["indices.recovery.max_concurrent_file_chunks"]
    assert (chunks.scope, chunks.before, chunks.during) == ("transient", "2", "4")
    assert any("indices.recovery.max_bytes_per_sec stays 1gb (in force, persistent): already at least the run's "
               "100mb" in n for n in plan.notes), plan.notes


def test_shards_without_other_copy_ignores_unassigned() -> None:
    snap = snapshot([node("a"), node("b")], copies("i", 0, ["a", "b"]), "a")
    assert shards_without_other_copy(snap, ["id-a"]) == []
    assert shards_without_other_copy(snap, ["id-a", "id-b"]) == ["[i][0]"]


@settings(max_examples=200, deadline=None)
@given(placement=st.lists(st.lists(st.sampled_from("abcde"), min_size=1, max_size=4), min_size=1, max_size=12),
       states=st.lists(st.sampled_from(["STARTED", "STARTED", "INITIALIZING", "UNASSIGNED"]), min_size=48,
                       max_size=48),
       batch=st.sets(st.sampled_from("abcde"), min_size=1))
def test_shards_without_other_copy_is_every_shard_whose_started_copies_are_all_in_the_batch(
        placement: list[list[str]], states: list[str], batch: set[str]) -> None:
    shards = []
    for s, holders in enumerate(placement):
        for i, n in enumerate(holders):
            state = states[(s * 4 + i) % len(states)]
            shards.append(ShardCopy("i", s, i == 0, state, None if state == "UNASSIGNED" else f"id-{n}", 1))
    snap = snapshot([node(n) for n in "abcde"], shards, "a")
    ids = {f"id-{n}" for n in batch}
    started = {s: [c.node_id for c in shards if c.shard == s and c.state == "STARTED"] for s in range(len(placement))}
    expected = sorted(f"[i][{s}]" for s, on in started.items() if on and all(n in ids for n in on))
    assert shards_without_other_copy(snap, ids) == expected
    for each_way in (started_only_on_by_index, started_only_on_by_scan):  # the one a batch's size does not choose
        assert sorted(f"[{i}][{s}]" for i, s in each_way(snap, ids)) == expected, each_way


def test_nodes_and_exclude_choose_a_subset_in_the_plans_order() -> None:
    from orchestrator.errors import ConfigError
    from orchestrator.restart.journal import RunOptions
    from orchestrator.runs.plans import select_nodes

    names = ["d1", "d2", "m1", "m2", "m3"]
    zones = ["z1", "z2", "z1", "z2", "z3"]
    roles = {"d": ("data",), "m": ("master", "data")}
    nodes = [node(n, zone=z, roles=roles[n[0]]) for n, z in zip(names, zones, strict=True)]
    shards = copies("i", 0, ["d1", "d2"]) + copies("i", 1, ["m1", "m2"]) + copies("i", 2, ["m3", "d1"])
    full = build_plan(inventory(names, zones), snapshot(nodes, shards, "m3"), Mode.NODE)
    assert [b.label for b in full.batches] == ["d1", "d2", "m1", "m2", "m3"]
    some = select_nodes(full, RunOptions(nodes=("d*", "m3"), exclude=("d2",)))
    assert [b.nodes for b in some.batches] == [("d1",), ("m3",)] and [b.number for b in some.batches] == [1, 2]
    assert "restarting 2 of 5 nodes; left out (--nodes/--exclude): d2, m1, m2" in some.notes[-1]
    zoned = select_nodes(build_plan(inventory(names, zones), snapshot(nodes, shards, "m3"), Mode.ZONE),
                         RunOptions(exclude=("m1",)))
    assert [(b.label, b.nodes) for b in zoned.batches] == [("z1", ("d1",)), ("z2", ("d2", "m2")), ("z3", ("m3",))]
    assert select_nodes(full, RunOptions()) is full
    with pytest.raises(ConfigError, match="no node is left"):
        select_nodes(full, RunOptions(nodes=("x*",)))


def test_a_shard_whose_other_copy_is_away_says_wait_not_check_awareness() -> None:
    """A node down leaves the replicas it held unassigned: restarting the node with the primaries would
    leave no started copy. The refusal says why (the other copy is away), not that placement is wrong."""
    nodes = [node("a"), node("b"), node("c")]
    down_replica = ShardCopy("logs", 0, False, "UNASSIGNED", None, 1000)
    snap = snapshot(nodes, [*copies("logs", 0, ["a"]), down_replica, *copies("kept", 0, ["a", "c"])], "c",
                    status="yellow")
    said = " ".join(batch_problems(snap, ["id-a"], "a"))
    assert "[logs][0]" in said and "their other copies are not started" in said, said
    assert "allocation awareness" not in said
    together = snapshot(nodes, copies("logs", 0, ["a", "b"]), "c")
    assert "check allocation awareness" in " ".join(batch_problems(together, ["id-a", "id-b"], "a+b"))


def test_a_refused_plan_says_each_reason_once(capsys: pytest.CaptureFixture[str], tmp_path: object,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """`restart` shows the plan, then refuses it: each UNSAFE reason is in the error, not also in the table."""
    from types import SimpleNamespace

    from orchestrator.cli.restart_cmd import show_and_confirm
    from orchestrator.errors import PreflightFailed
    from orchestrator.shards.product import ShardProduct
    from orchestrator.testing.fake import FakeCluster

    nodes = [node("a"), node("b"), node("c")]
    snap = snapshot(nodes, copies("logs", 0, ["a"]), "c")  # no replica: restarting a is refused
    unsafe = build_plan(inventory(["a", "b", "c"]), snap, Mode.NODE)
    assert not unsafe.safe
    target = SimpleNamespace(name="c-empty-state", product=ShardProduct(), cluster=FakeCluster.of(["a"]),
                             procedure=SimpleNamespace(batch=[("stop_service", None)]))
    monkeypatch.setenv("ORCHESTRATOR_STATE", str(tmp_path))
    with pytest.raises(PreflightFailed) as err:
        show_and_confirm(target, unsafe, json_out=False, yes=True, question="?")  # type: ignore[arg-type]
    shown = capsys.readouterr().out + str(err.value)
    reason = next(p for p in unsafe.all_problems() if "[logs][0]" in p)
    assert shown.count(reason) == 1, shown
    assert "Plan for cluster" in shown and "UNSAFE" in shown


def test_a_plan_is_read_only_and_its_typed_parts_survive_the_journal() -> None:
    """No string-keyed side channel: the gate rule and the copies accepted unassigned are typed fields,
    written to the journal and read back as they were; a plan's mappings cannot be changed in place."""
    import json
    from dataclasses import replace

    from orchestrator.restart.plan import GateRule, Plan

    nodes = [node(n, roles=("master", "data")) for n in ("a", "b", "c")]
    shards = copies("i", 0, ["a", "b"]) + copies("i", 1, ["b", "c"])
    built = build_plan(inventory(["a", "b", "c"]), snapshot(nodes, shards, "a"), Mode.NODE)
    plan = replace(built, accepted_unassigned=2, gate=GateRule(3, 600.0))
    again = Plan.from_json(json.loads(json.dumps(plan.to_json())))
    assert again == plan and again.gate == GateRule(3, 600.0) and again.accepted_unassigned == 2
    assert "figures" not in plan.to_json()
    with pytest.raises(TypeError):
        plan.node_ids["es-9"] = "x"  # type: ignore[index]
    with pytest.raises(TypeError):
        built.batches[0].figures["bytes"] = 0  # type: ignore[index]


def test_a_plan_from_a_saved_state_ends_without_freeing_it_and_loses_no_output(tmp_path: object) -> None:
    """`plan --snapshot` ends its process without freeing the state it read (cli/main.py: run): its whole
    output still arrives, in JSON and as the table, and its exit code is the plan's (6: unsafe)."""
    import json
    from pathlib import Path

    import yaml

    from tests.helpers import orchestrate
    from tests.unit.snapshots import generated_state
    from tests.unit.test_events_schema import validate

    where = Path(str(tmp_path))
    state, inv = generated_state(30, 3000, 3)
    (where / "state.json").write_text(json.dumps(state))
    (where / "inv.yaml").write_text(yaml.safe_dump(inv))
    args = ("plan", "--config", str(where / "inv.yaml"), "--snapshot", str(where / "state.json"))
    as_json = orchestrate(*args, "--json", timeout=120)
    assert as_json.returncode == 0, as_json.stderr
    line = json.loads(as_json.stdout)
    assert len(line["batches"]) == 30
    assert (line["event"], line["result"], line["exit_code"]) == ("summary", "safe", 0), "a summary, as others'"
    validate(line)
    as_table = orchestrate(*args, "--by", "zone", timeout=120)
    assert as_table.returncode == 0 and "z2" in as_table.stdout and as_table.stdout.endswith("\n")
    state["shards"][0]["state"] = "UNASSIGNED"  # a primary's copy gone: yellow, and the plan refuses
    (where / "state.json").write_text(json.dumps({**state, "health": {"status": "yellow", "number_of_nodes": 30}}))
    refused = orchestrate(*args, "--json", timeout=120)
    assert refused.returncode == 6 and json.loads(refused.stdout)["safe"] is False, refused.stderr
    line = json.loads(refused.stdout)
    assert (line["result"], line["exit_code"]) == ("unsafe", 6) and len(refused.stdout.splitlines()) == 1


def test_the_plan_says_tuning_is_persistent_and_where_and_no_tune_leaves_it_out(tmp_path: object) -> None:
    """The plan names the files the tuning writes; `--no-tune` takes the step out of the plan's steps."""
    import json
    from pathlib import Path

    import yaml

    from tests.helpers import orchestrate
    from tests.unit.snapshots import generated_state

    where = Path(str(tmp_path))
    state, inv = generated_state(3, 30, 3)
    (where / "state.json").write_text(json.dumps(state))
    (where / "inv.yaml").write_text(yaml.safe_dump(inv))
    args = ("plan", "--config", str(where / "inv.yaml"), "--snapshot", str(where / "state.json"))
    tuned = orchestrate(*args, env={"COLUMNS": "300"}, timeout=120)
    assert tuned.returncode == 0, tuned.stderr
    assert "PERSISTENT" in tuned.stdout and "/etc/sysctl.d/99-orchestrator.conf" in tuned.stdout
    assert "/etc/systemd/system/orchestrator-thp.service" in tuned.stdout and "tune_host" in tuned.stdout
    untuned = orchestrate(*args, "--no-tune", "--json", timeout=120)
    line = json.loads(untuned.stdout)
    assert line["tuning"][0].startswith("left out of this run (--no-tune)"), line["tuning"]
    as_table = orchestrate(*args, "--no-tune", env={"COLUMNS": "300"}, timeout=120).stdout
    assert "tune_host" not in as_table and "stop_service -> start_service" in as_table


def test_a_plan_warns_of_one_or_two_master_eligible_nodes_and_of_no_other_count() -> None:
    from orchestrator.shards.safety import master_notes

    def with_masters(count: int) -> list[str]:
        nodes = [node(f"es-{i}", roles=("master", "data") if i <= count else ("data",)) for i in range(1, 5)]
        return master_notes(snapshot(nodes, [], "es-1"))

    assert with_masters(2) == [
        "the cluster has 2 master-eligible node(s): while one of them restarts the cluster may have no elected "
        "master (requests fail until it is back). Three master-eligible nodes avoid that."]
    assert with_masters(1)[0].startswith("the cluster has 1 master-eligible node(s)")
    assert with_masters(0) == [] and with_masters(3) == [] and with_masters(4) == []


def test_inventory_nodes_are_matched_by_name_then_by_one_host_and_every_mismatch_is_said() -> None:
    from orchestrator.config.model import Inventory

    def inv(entries: list[tuple[str, str]]) -> Inventory:
        return Inventory.model_validate({"cluster": {"name": "c", "endpoints": ["http://x:9200"]},
                                         "ssh": {"known_hosts": "/dev/null"},
                                         "nodes": [{"name": n, "host": h} for n, h in entries]})

    nodes = [node("es-1"), node("es-2"), node("es-3")]
    snap = snapshot(nodes, [], "es-1")
    # By name; else by host or IP, when exactly one node has it.
    assert match_nodes(inv([("es-1", "x"), ("two", "h-es-2"), ("three", "10.0.0.3")]), snap) == (
        {"es-1": "id-es-1", "two": "id-es-2", "three": "id-es-3"}, [])
    mapping, problems = match_nodes(inv([("es-1", "x"), ("gone", "h-gone"), ("es-3", "y")]), snap)
    assert mapping == {"es-1": "id-es-1", "es-3": "id-es-3"}
    assert problems == ["node gone (h-gone) is not in the cluster: is it running and joined? (matched by node.name, "
                        "then by host or IP)"], "the unmatched node es-2 is said by that, not twice"
    twice = snapshot([node("es-1"), EsNode(**{**vars(node("es-2")), "host": "h-es-1"})], [], "es-1")
    assert match_nodes(inv([("a", "h-es-1"), ("es-2", "z")]), twice) == ({"es-2": "id-es-2"}, [
        "node a: host h-es-1 matches 2 Elasticsearch nodes; give the node its Elasticsearch node.name"])
    assert match_nodes(inv([("es-1", "x"), ("es-2", "y")]), snap)[1] == [
        "the cluster has node(s) not in the inventory: es-3. Add them, or they would never be restarted and could "
        "hold the only copy of a shard."]
    assert match_nodes(inv([("es-2", "y")]), snap)[1][0].startswith(
        "the cluster has node(s) not in the inventory: es-1, es-3. ")


def test_data_only_nodes_restart_first_then_master_eligible_ones_the_elected_master_last() -> None:
    from orchestrator.shards.plan import restart_order

    nodes = {n.name: n for n in (node("m1"), node("d1", roles=("data",)), node("m2"), node("d2", roles=("data",)))}
    assert restart_order(["m2", "m1", "d2", "d1"], nodes, "id-m1") == ["d1", "d2", "m2", "m1"]
    assert restart_order(["m2", "m1", "d2", "d1"], nodes, None) == ["d1", "d2", "m1", "m2"]
    # By role before name: a master-eligible node named to sort first still waits for the data-only ones.
    named = {n.name: n for n in (node("a-master"), node("z-data", roles=("data",)), node("b-master"))}
    assert restart_order(["a-master", "z-data", "b-master"], named, "id-b-master") == ["z-data", "a-master",
                                                                                      "b-master"]


def test_the_plan_warns_of_each_unsafe_way_the_cluster_is_reached(tmp_path: Path) -> None:
    from orchestrator.config.model import Inventory
    from orchestrator.shards.plan import connection_warnings

    loose = tmp_path / "password"
    loose.write_text("s3cr3t")
    loose.chmod(0o644)
    tight = tmp_path / "key"
    tight.write_text("k")
    tight.chmod(0o600)

    def warned(cluster: dict[str, object], ssh: dict[str, object] | None = None) -> list[str]:
        return connection_warnings(Inventory.model_validate({
            "cluster": {"name": "c", **cluster}, "ssh": {"known_hosts": "/dev/null", **(ssh or {})},
            "nodes": [{"name": "a", "host": "h-a"}]}))

    assert warned({"endpoints": ["https://x:9200"]}) == []
    assert warned({"endpoints": ["https://x:9200"], "username": "u", "password": {"file": str(tight)}}) == []
    assert warned({"endpoints": ["https://x:9200"], "verify_certs": False}) == [
        "WARNING: TLS certificates are NOT verified (cluster.verify_certs: false): anyone in the middle can read "
        "the credentials and change the answers"]
    assert warned({"endpoints": ["http://x:9200", "https://y:9200", "http://z:9200"], "username": "u",
                   "password": {"file": str(loose)}}) == [
        f"WARNING: cluster.password: the secret file {loose} is readable by others (mode 644); `chmod 600 {loose}`",
        "WARNING: credentials are sent in clear text over plain http (http://x:9200, http://z:9200)"]
    assert warned({"endpoints": ["http://x:9200"], "api_key": {"file": str(tight)}}) == [
        "WARNING: credentials are sent in clear text over plain http (http://x:9200)"]
    assert warned({"endpoints": ["https://x:9200"], "api_key": {"file": str(loose)}}) == [
        f"WARNING: cluster.api_key: the secret file {loose} is readable by others (mode 644); `chmod 600 {loose}`"]
    four = [f"http://h{i}:9200" for i in range(1, 5)]
    assert warned({"endpoints": four, "api_key": {"file": str(tight)}}) == [
        "WARNING: credentials are sent in clear text over plain http (http://h1:9200, http://h2:9200, "
        "http://h3:9200)"], "three are named, not a long list"
    assert warned({"endpoints": ["http://x:9200"]}) == [], "no credentials, nothing sent in clear"
    assert warned({"endpoints": ["https://x:9200"]}, {"sudo": True, "sudo_password": {"file": str(loose)}}) == [
        f"WARNING: ssh.sudo_password: the secret file {loose} is readable by others (mode 644); `chmod 600 {loose}`"]


def test_a_plans_batches_are_numbered_from_one_and_carry_their_copies_bytes_and_estimate() -> None:
    from dataclasses import replace

    from orchestrator.shards.limits import RATE
    from orchestrator.shards.plan import estimate_batch_s
    from orchestrator.units import parse_size

    gib = 2**30
    shards = (copies("big", 0, ["a", "b"], size=3 * gib + 123_456_789) + copies("big", 1, ["b", "a"], size=gib)
              + copies("small", 0, ["a", "b"], size=7))
    snap = replace(snapshot([node("a", roles=("data",)), node("b"), node("m")], shards, "m"),
                   health=replace(snapshot([], [], "m").health, number_of_nodes=3, unassigned_shards=4))
    plan = build_plan(inventory(["a", "b", "m"]), snap, Mode.NODE)
    rate = parse_size(next(s.during for s in plan.settings if s.key == RATE))

    held = 4 * gib + 123_456_789 + 7
    assert [b.number for b in plan.batches] == [1, 2, 3]
    assert [b.label for b in plan.batches] == ["a", "b", "m"]
    assert [b.figures for b in plan.batches] == [{"shard_copies": 3, "bytes": held},
                                                 {"shard_copies": 3, "bytes": held},
                                                 {"shard_copies": 0, "bytes": 0}], "m holds nothing"
    # Each batch's estimate is the model's for the bytes its node holds (the model: the next test), said to a
    # tenth: the two data nodes alike, the node that holds nothing the least.
    a, b, m = plan.batches
    assert a.estimate_s == b.estimate_s == round(estimate_batch_s(held, rate), 1) > m.estimate_s
    assert m.estimate_s == estimate_batch_s(0, rate)
    assert plan.estimate_s == round(sum(b.estimate_s for b in plan.batches), 1)
    assert (plan.cluster, plan.product, plan.mode, plan.accepted_unassigned) == ("c", "elasticsearch", Mode.NODE, 4)
    assert plan.upgrade is None and plan.node_ids == {"a": "id-a", "b": "id-b", "m": "id-m"}


def test_a_batchs_estimate_is_stop_start_and_the_tenth_a_flush_does_not_keep_at_the_rate() -> None:
    from orchestrator.restart.plan import EST_START_TO_JOIN_S, EST_STOP_S
    from orchestrator.shards.plan import estimate_batch_s

    fixed = EST_STOP_S + EST_START_TO_JOIN_S
    assert estimate_batch_s(0, 100) == fixed + 2.0, "a recovery is never taken as less than 2 s"
    assert estimate_batch_s(10**10, 10**8) == pytest.approx(fixed + 10.0), "a tenth of 10 GB at 100 MB/s"
    assert estimate_batch_s(1000, 1) == pytest.approx(fixed + 100.0)
    assert estimate_batch_s(1000, 0) == pytest.approx(fixed + 100.0), "a rate of 0 is taken as 1 byte/s"


def test_only_the_chosen_nodes_are_planned_and_the_shutdown_api_is_said() -> None:
    from dataclasses import replace

    snap = snapshot([node("a"), node("b"), node("c")], copies("i", 0, ["a", "b", "c"]), "a")
    assert [b.label for b in build_plan(inventory(["a", "b", "c"]), snap, Mode.NODE, only=["b"]).batches] == ["b"]
    plan = build_plan(inventory(["a", "b", "c"]), replace(snap, has_shutdown_api=True), Mode.NODE)
    assert "the cluster has the node shutdown API; this version restricts allocation with `primaries`, which " \
           "works on every cluster" in plan.notes
    assert not any("shutdown API" in n for n in build_plan(inventory(["a", "b", "c"]), snap, Mode.NODE).notes)


def test_the_inventorys_allow_yellow_or_the_flags_lets_a_yellow_plan_and_a_planned_nodes_delay_does_not() -> None:
    from dataclasses import replace

    from orchestrator.shards.settled import UnassignedCopy

    nodes = [node("a"), node("b"), node("c")]
    shards = copies("i", 0, ["a", "b"])
    inv = inventory(["a", "b", "c"])
    yellow = snapshot(nodes, shards, "a", status="yellow")

    def yellow_said(plan_: object) -> bool:
        return any("cluster health is yellow" in p for p in plan_.problems)  # type: ignore[attr-defined]

    assert yellow_said(build_plan(inv, yellow, Mode.NODE))
    assert not yellow_said(build_plan(inv, yellow, Mode.NODE, allow_yellow=True))
    assert not yellow_said(build_plan(inv.model_copy(update={"allow_yellow": True}), yellow, Mode.NODE))
    # A copy delayed for a node the run restarts is not settled: that node comes back first.
    delayed = UnassignedCopy(index="i", shard=1, primary=False, can_allocate="allocation_delayed",
                             reason="NODE_LEFT", left_node="id-c")
    waiting = replace(yellow, health=replace(yellow.health, unassigned_shards=1), unassigned=(delayed,))
    assert yellow_said(build_plan(inv, waiting, Mode.NODE))
    gone = replace(waiting, unassigned=(replace(delayed, left_node="id-elsewhere"),))
    assert not yellow_said(build_plan(inv, gone, Mode.NODE)), "a node that left for good: settled"


def test_each_batchs_unavailable_indices_are_named_with_the_batch_and_every_acceptance_is_kept() -> None:
    nodes = [node("a"), node("b"), node("c")]
    shards = copies("logs-a", 0, ["a"]) + copies("logs-b", 0, ["b"]) + copies("i", 0, ["a", "b", "c"])
    snap = snapshot(nodes, shards, "c")
    refused = build_plan(inventory(["a", "b", "c"]), snap, Mode.NODE)
    assert [p.split(":")[0] for b in refused.batches for p in b.problems] == ["a", "b"]
    accepted = build_plan(inventory(["a", "b", "c"]), snap, Mode.NODE, allow_unavailable=("logs-*",))
    assert accepted.safe, accepted.all_problems()
    assert [n for n in accepted.notes if "will be unavailable" in n] == [
        "a: index logs-a will be unavailable while it restarts (accepted by --allow-unavailable 'logs-*')",
        "b: index logs-b will be unavailable while it restarts (accepted by --allow-unavailable 'logs-*')"]


def test_zones_come_from_the_inventory_or_the_nodes_and_every_split_and_zoneless_node_is_said() -> None:
    # Six master-eligible nodes: z1 and z2 each hold three, more than the two one batch may take down.
    names = ["a1", "a2", "a3", "b1", "b2", "b3"]
    nodes = [node(n, zone="z1" if n[0] == "a" else "z2") for n in names]
    plan = build_plan(inventory(names), snapshot(nodes, [], "a1"), Mode.ZONE)  # the zones the nodes report
    assert [b.label for b in plan.batches] == ["z2 (1/2)", "z2 (2/2)", "z1 (1/2)", "z1 (2/2)"]
    assert [n.split(" holds")[0] for n in plan.notes if "master quorum" in n] == ["zone z2", "zone z1"]
    assert plan.safe, plan.all_problems()
    unzoned = [node(n, zone=None if n in ("a2", "b1") else "z1") for n in names]
    refused = build_plan(inventory(names), snapshot(unzoned, [], "a1"), Mode.ZONE)
    assert [p.split(" has no zone")[0] for p in refused.problems] == ["zone mode: node a2", "zone mode: node b1"]
    assert sorted(n for b in refused.batches for n in b.nodes) == ["a1", "a3", "b2", "b3"]


def test_the_allocation_setting_is_restricted_per_batch_and_each_limit_raised_for_the_run() -> None:
    from orchestrator.restart.plan import SettingChange
    from orchestrator.shards.limits import RATE

    def settings_of(persistent: dict[str, object], transient: dict[str, object]) -> dict[str, SettingChange]:
        snap = snapshot([node("a"), node("b")], copies("i", 0, ["a", "b"]), "a", persistent=persistent,
                        transient=transient)
        return {s.key: s for s in build_plan(inventory(["a", "b"]), snap, Mode.NODE).settings}

    unset = settings_of({}, {})
    assert unset[ALLOCATION_ENABLE] == SettingChange(
        key=ALLOCATION_ENABLE, scope="persistent", before=None, during="primaries", when="per batch",
        why="a stopped node's replicas are not rebuilt elsewhere while it restarts")
    assert (unset[RATE].scope, unset[RATE].before, unset[RATE].when) == ("persistent", None, "for the run")
    assert settings_of({ALLOCATION_ENABLE: "all"}, {})[ALLOCATION_ENABLE].scope == "persistent"
    assert settings_of({}, {ALLOCATION_ENABLE: "all"})[ALLOCATION_ENABLE].scope == "transient"
    # A value Elasticsearch would refuse is no limit in force: the run sets its own.
    odd = settings_of({RATE: "fast"}, {})[RATE]
    assert (odd.before, odd.during) == ("fast", "100mb")


def test_an_index_accepted_as_unavailable_passes_the_gate_and_every_refusal_names_its_batch() -> None:
    """--allow-unavailable reaches the gate before each batch: an index without a replica on the batch's node is
    refused without it and passes with it; each refusal starts with the batch it is about."""
    from orchestrator.restart.journal import RunOptions
    from orchestrator.shards.safety import gate, stop_check

    nodes = [node("a"), node("b"), node("c")]
    snap = snapshot(nodes, [*copies("scratch", 0, ["a"]), *copies("logs", 0, ["a", "b"])], "c")
    refused = batch_problems(snap, ["id-a"], "batch 1 (a)")
    assert refused and all(p.startswith("batch 1 (a): ") for p in refused) and "[scratch][0]" in refused[0]
    assert batch_problems(snap, ["id-a"], "batch 1 (a)", accepted=("scratch*",)) == []
    plan = build_plan(inventory(["a", "b", "c"]), snap, Mode.NODE)
    [label] = [b.label for b in plan.batches if list(b.nodes) == ["a"]]
    assert next(p for p in gate(snap, plan, ["a"], RunOptions()) if "[scratch][0]" in p).startswith(f"{label}: ")
    assert stop_check(snap, plan, ["a"], RunOptions())[0].startswith(f"{label}: restarting it leaves shard(s) ")
    assert stop_check(snap, plan, ["a", "b"], RunOptions())[0].startswith("a, b: ")  # no batch of its own
    assert gate(snap, plan, ["a"], RunOptions(allow_unavailable=("scratch*",))) == []
    quorum = batch_problems(snapshot(nodes, [], "c"), ["id-a", "id-b"], "a+b")
    assert quorum and quorum[0].startswith("a+b: 2 of 3 master-eligible nodes")


def test_what_the_gate_says_of_a_red_cluster_a_yellow_it_cannot_explain_and_a_node_not_in_it() -> None:
    """The refusals an operator reads before a batch, whole: red (never passed), a yellow still moving, so not yet
    explained (wait, or --allow-yellow), and the nodes the cluster lacks, named when the cluster names them."""
    from dataclasses import replace

    from orchestrator.restart.journal import RunOptions
    from orchestrator.shards.safety import gate

    nodes = [node("a"), node("b"), node("c")]
    held = copies("logs", 0, ["a", "b"])
    assert cluster_problems(snapshot(nodes, held, "c", status="red"), allow_yellow=True) == [
        "cluster health is red: some primary shard has no started copy. Fix that first; restarting a node now could "
        "lose the last copy of data."]
    assert cluster_problems(snapshot(nodes, held, "c", status="yellow", initializing=1), allow_yellow=False) == [
        "cluster health is yellow. Wait for green (or fix the allocation), or pass --allow-yellow if this yellow is "
        "expected.", "the cluster is not settled: 1 shard(s) initializing, 0 relocating. Wait until recoveries finish."]
    plan = build_plan(inventory(["a", "b", "c"]), snapshot(nodes, held, "c"), Mode.NODE)
    two = snapshot(nodes[:2], held, "b")
    assert gate(replace(two, absent=("c",)), plan, ["a"], RunOptions()) == [
        "only 2 of 3 nodes are in the cluster (c not in it)"]
    assert gate(two, plan, ["a"], RunOptions()) == ["only 2 of 3 nodes are in the cluster"]


def test_an_allow_yellow_run_passes_the_yellow_it_started_on_and_holds_while_more_copies_are_unassigned() -> None:
    """--allow-yellow accepts the copies unassigned when the run started (the plan keeps their count), not more: a
    batch waits while the previous one's copies are still unassigned; without --allow-yellow the yellow is refused."""
    from dataclasses import replace

    from orchestrator.restart.journal import RunOptions
    from orchestrator.shards.safety import gate
    from orchestrator.shards.snapshot import Health

    nodes = [node("a"), node("b"), node("c")]
    held = copies("logs", 0, ["a", "b"])
    started_on = replace(snapshot(nodes, held, "c"), health=Health("yellow", 3, unassigned_shards=2))
    plan = build_plan(inventory(["a", "b", "c"]), started_on, Mode.NODE)
    assert plan.accepted_unassigned == 2
    yellow = replace(started_on, unassigned=())
    assert gate(yellow, plan, ["a"], RunOptions(allow_yellow=True)) == []
    assert any(p.startswith("cluster health is yellow") for p in gate(yellow, plan, ["a"], RunOptions()))
    more = replace(yellow, health=Health("yellow", 3, unassigned_shards=5))
    assert gate(more, plan, ["a"], RunOptions(allow_yellow=True)) == [
        "3 shard copies are unassigned beyond the 2 accepted when the run started: the previous batch has not "
        "recovered"]


def test_of_five_master_eligible_nodes_two_may_go_together_three_may_not() -> None:
    nodes = [node(n) for n in "abcde"]
    snap = snapshot(nodes, [], "e")
    assert batch_problems(snap, ["id-a", "id-b"], "a+b") == []
    [said] = batch_problems(snap, ["id-a", "id-b", "id-c"], "a+b+c")
    assert said.startswith("a+b+c: 3 of 5 master-eligible nodes would be down at once, losing the master quorum.")
