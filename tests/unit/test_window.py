"""The window's proof (issue 57), pure and proven as it is written: a node is admitted only when each shard it
holds keeps a started copy outside the window; masters alone; one zone at a time; the budget as given. A
property over random layouts: admitting node after node as the proof allows never leaves a shard with no
started copy. The engine that runs a window: test_window_run.py."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.errors import ConfigError
from orchestrator.restart.plan import Mode, Plan
from orchestrator.restart.records import RunOptions
from orchestrator.shards.snapshot import ClusterSnapshot, Health, ShardCopy
from orchestrator.shards.window import Budget, admission, reach, unproven, window_check
from tests.unit.snapshots import copies, inventory, node, snapshot


def test_a_budget_is_a_count_or_a_percentage_and_never_less_than_one() -> None:
    assert Budget.parse("4").nodes(300) == 4 and Budget.parse("4").nodes(3) == 3
    assert Budget.parse("5%").nodes(3000) == 150 and Budget.parse("5%").nodes(10) == 1
    assert str(Budget.parse("5%")) == "5%" and Budget().nodes(9) == 1
    assert Budget.parse(" 100% ").nodes(7) == 7 and Budget.parse("7%").nodes(50) == 3, "all of them; rounded down"
    assert str(Budget.parse("4")) == "4" and Budget.parse("999999").nodes(3) == 3
    for bad in ("0", "-1", "1.5", "101%", "x", "", "4 nodes", "٣", "1000000"):
        with pytest.raises(ConfigError, match="give a number of nodes"):
            Budget.parse(bad)
    with pytest.raises(ConfigError) as long:
        Budget.parse("9" * 1000)
    said = str(long.value)
    assert said.startswith("--max-unavailable: "), "the error names the option the operator gave"
    assert repr("9" * 40) + ":" in said and "9" * 41 not in said, "a pasted mistake is echoed to 40 characters"


def test_a_node_is_admitted_only_when_each_of_its_shards_keeps_a_started_copy_outside_the_window() -> None:
    nodes = [node(f"es-{i}", zone="z1" if i < 4 else "z2", roles=("data",)) for i in range(1, 7)]
    snap = snapshot(nodes, [*copies("a", 0, ["es-1", "es-2"]), *copies("b", 0, ["es-2", "es-3"]),
                            *copies("c", 0, ["es-4", "es-5"])], "es-6")
    zones = {n.id: n.zone for n in nodes}
    assert admission(snap, "id-es-1", [], zones, set(), 3) == []
    assert "[a][0]" in admission(snap, "id-es-2", ["id-es-1"], zones, set(), 3)[0], "a's copies both away"
    assert admission(snap, "id-es-3", ["id-es-1"], zones, set(), 3) == []
    assert "one zone at a time" in admission(snap, "id-es-4", ["id-es-1"], zones, set(), 3)[0]
    assert "full" in admission(snap, "id-es-3", ["id-es-1"], zones, set(), 1)[0]
    assert "master-eligible" in admission(snap, "id-es-3", ["id-es-1"], zones, {"id-es-3"}, 3)[0]
    assert admission(snap, "id-es-3", [], zones, {"id-es-3"}, 3) == [], "alone, a master is admitted"
    initializing = snapshot(nodes, [ShardCopy("d", 0, True, "STARTED", "id-es-1", 1),
                                    ShardCopy("d", 0, False, "INITIALIZING", "id-es-2", 1)], "es-6")
    assert unproven(initializing, "id-es-1", []) == ["[d][0]"], "an initializing copy proves nothing"


@pytest.mark.parametrize(("lonely", "said"), [
    (5, "shard(s) [s0][0], [s1][0], [s2][0], [s3][0], [s4][0] would have no started copy left"),
    (6, "shard(s) [s0][0], [s1][0], [s2][0], [s3][0], [s4][0] and 1 more would have no started copy left"),
    (8, "shard(s) [s0][0], [s1][0], [s2][0], [s3][0], [s4][0] and 3 more would have no started copy left")])
def test_a_refused_node_names_the_first_five_shards_it_would_leave_without_a_started_copy_and_counts_the_rest(
        lonely: int, said: str) -> None:
    """What the operator reads in `status` and the `wait` event: which shards hold the node back (five at most,
    a large node holds thousands) and how many more."""
    nodes = [node(f"es-{i}", roles=("data",)) for i in range(1, 4)]
    snap = snapshot(nodes, [c for i in range(lonely) for c in copies(f"s{i}", 0, ["es-1", "es-2"])], "es-3")
    assert admission(snap, "id-es-2", ["id-es-1"], {n.id: None for n in nodes}, set(), 3) == [
        f"{said}: it waits for the window's nodes to recover"]


def test_the_live_check_of_a_candidate_weighs_the_cluster_the_window_and_the_candidate_s_own_shards() -> None:
    """`window_check`, what each admission and the last look before each stop ask, over one layout: es-1..es-3
    in zone z1, es-4..es-6 in z2, m-1 a dedicated master; a on es-1 and es-2, b on es-2 and es-3, solo (no
    replica) on es-3, c on es-4 and es-5. A refusal says why, as the operator reads it in `status`."""
    names = ["es-1", "es-2", "es-3", "es-4", "es-5", "es-6", "m-1"]
    nodes = [node(n, zone=None if n == "m-1" else "z1" if n < "es-4" else "z2",
                  roles=("master",) if n == "m-1" else ("data",)) for n in names]
    shards = [*copies("a", 0, ["es-1", "es-2"]), *copies("b", 0, ["es-2", "es-3"]), *copies("solo", 0, ["es-3"]),
              *copies("c", 0, ["es-4", "es-5"])]
    live = snapshot(nodes, shards, "m-1")
    plan = Plan(cluster="c", product="elasticsearch", mode=Mode.NODE, batches=(), settings=(), tuning=(),
                estimate_s=0, problems=(), node_ids={n: f"id-{n}" for n in names})
    inv = inventory(names)  # no zone in the inventory: each node's own attribute counts
    plain, accepting = RunOptions(), RunOptions(allow_unavailable=("solo",))

    def check(candidate: str, window: list[str], snap: ClusterSnapshot = live, options: RunOptions = plain) -> str:
        return " | ".join(window_check(snap, plan, inv, candidate, window, options))

    assert check("es-2", []) == "", "nothing away: each of its shards has a started copy elsewhere"
    assert "[a][0]" in check("es-2", ["es-1"]) and "[b][0]" not in check("es-2", ["es-1"]), \
        "a's other copy is away with es-1; b's is on es-3, outside the window"
    assert "waits for them to recover" in check("es-2", ["es-1"])
    assert "[solo][0]" in check("es-3", []) and "0 replicas" in check("es-3", [])
    assert check("es-3", [], options=accepting) == "", "--allow-unavailable accepts solo"
    assert "one zone at a time" in check("es-6", ["es-1"]) and check("es-6", ["es-4"]) == ""
    assert "master-eligible" in check("m-1", ["es-4"]) and "master-eligible" in check("es-6", ["m-1"])
    assert check("m-1", []) == "", "alone, a master is admitted"
    assert check("es-2", ["es-2", "unknown"]) == "", "the candidate itself, and a name outside the plan, are not away"
    red = snapshot(nodes, shards, "m-1", status="red")
    assert "cluster health is red" in check("es-6", [], red)
    # es-4 away and es-6 the candidate: the 6 others must be in the cluster, es-6 too (its proof read its own
    # stats: it is in the cluster, so one node missing beyond the window is never taken for it stopping).
    six = replace(live, health=Health("green", 6))
    five = replace(live, health=Health("green", 5), absent=("es-5",))
    assert check("es-6", ["es-4"], six) == ""
    assert check("es-6", ["es-4"], five) == ("only 5 nodes are in the cluster, fewer than the 6 outside the window "
                                             "(es-5 not in it)")
    assert "fewer than the 7 outside" in check("es-6", [], six), "an empty window: every node is outside"
    assert check("es-6", ["es-4"], replace(live, health=Health("green", 5))) == \
        "only 5 nodes are in the cluster, fewer than the 6 outside the window", "none named: no parenthesis"
    assert "(es-3, es-5 not in it)" in check("es-6", ["es-4"], replace(five, absent=("es-3", "es-5")))
    assert check("es-2", ["es-1"]).startswith("es-2: restarting it leaves shard(s) [a][0] of index(es) a with no ")
    assert check("es-6", ["m-1"]) == "a master-eligible node is restarted alone: it waits for the window to empty"
    unzoned = replace(live, nodes=tuple(replace(n, zone=None) if n.name == "es-2" else n for n in live.nodes))
    assert check("es-6", ["es-1", "es-2"], unzoned) == "the window holds zone None, z1: one zone at a time"
    beside_and_missing = check("es-6", ["es-1"], five).split(" | ")
    assert len(beside_and_missing) == 2 and "fewer than the 6" in beside_and_missing[0] \
        and "one zone at a time" in beside_and_missing[1], "both said, the cluster's problem first"


def test_the_plan_s_reach_fills_one_window_as_admission_would_and_names_what_held_it_below_the_budget() -> None:
    """`reach`, node by node in the plan's order: another zone than the window's, a master beside others, and
    a shard whose started copies would all be away each hold a node back (and are counted), never the nodes
    after it; a node held back is not counted away; a node holding nothing, or a shard with no started copy
    at all, is decided, never a crash."""
    zoned = [node("es-1", zone="z1", roles=("data",)), node("es-2", zone="z2", roles=("data",)),
             node("es-3", zone="z1", roles=("data",)), node("es-4", zone="z2", roles=("data",))]
    snap = snapshot(zoned, [*copies("a", 0, ["es-1", "es-2"]), *copies("b", 0, ["es-3", "es-4"])], "es-1")
    zones = {n.id: n.zone for n in zoned}
    by_zone = reach(snap, [n.id for n in zoned], zones, set(), 3)
    assert (by_zone.budget, by_zone.together) == (3, 2), "es-2 and es-4 held back, es-3 after them still admitted"
    assert by_zone.limits == ("the window holds zone z1 (2 node(s))",), by_zone.limits
    assert reach(snap, [n.id for n in zoned], zones, set(), 2).limits == (), "the budget reached: nothing held it"
    # A master first, alone: the data node after it waits (a master is in the window).
    plain = [node("m-1", roles=("master",)), node("es-1", roles=("data",)), node("es-2", roles=("data",))]
    snap = snapshot(plain, [*copies("a", 0, ["es-1", "es-2"])], "m-1")
    masters_first = reach(snap, ["id-m-1", "id-es-1"], {n.id: None for n in plain}, {"id-m-1"}, 2)
    assert masters_first.together == 1 and masters_first.limits[0].startswith("a master-eligible node"), masters_first
    # x on es-1 and es-2, y on es-2 and es-3: es-2 is held back and so not away; es-3 then goes.
    chain = [node(f"es-{i}", roles=("data",)) for i in range(1, 5)]
    snap = snapshot(chain, [*copies("x", 0, ["es-1", "es-2"]), *copies("y", 0, ["es-2", "es-3"]),
                            ShardCopy("z", 0, True, "INITIALIZING", "id-es-4", 1)], "es-1")
    found = reach(snap, ["id-es-1", "id-es-2", "id-es-3"], {n.id: None for n in chain}, set(), 3)
    assert found.together == 2 and found.limits == ("shards whose copies sit on few nodes (1 node(s))",), found
    both = snapshot(chain, [*copies("x", 0, ["es-1", "es-2"]), *copies("w", 0, ["es-1", "es-3"])], "es-1")
    assert reach(both, ["id-es-1", "id-es-2", "id-es-3"], {n.id: None for n in chain}, set(), 3).limits == (
        "shards whose copies sit on few nodes (2 node(s))",), "each node held back counted"
    alone = reach(snap, ["id-es-4", "id-es-1"], {n.id: None for n in chain}, set(), 2)
    assert alone.together == 1, "es-4's only copy is not started: no window proves it"
    empty = snapshot([*chain, node("es-9", roles=("data",))], list(snap.shards), "es-1")
    assert reach(empty, ["id-es-9"], {"id-es-9": None}, set(), 1).together == 1, "a node holding nothing goes"


def test_the_plan_reads_how_many_nodes_could_be_away_together_and_what_limits_it() -> None:
    nodes = [node(f"es-{i}", roles=("data",)) for i in range(1, 7)] + [node("m-1", roles=("master",))]
    # Both copies of every shard on es-1 and es-2: those two are never away together.
    snap = snapshot(nodes, [*copies("pair", 0, ["es-1", "es-2"]), *copies("x", 0, ["es-3", "es-4"]),
                            *copies("y", 0, ["es-5", "es-6"])], "m-1")
    order = [n.id for n in nodes]
    zones = {n.id: None for n in nodes}
    wide = reach(snap, order, zones, {"id-m-1"}, 6)
    assert wide.together == 3 and any("few nodes" in why for why in wide.limits), wide
    assert reach(snap, order, zones, {"id-m-1"}, 2).together == 2


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 2**32), data_nodes=st.integers(3, 14), budget=st.integers(1, 6),
       zones=st.integers(1, 3), replicas=st.integers(0, 2))
def test_no_window_the_proof_fills_leaves_a_shard_without_a_started_copy(
        seed: int, data_nodes: int, budget: int, zones: int, replicas: int) -> None:
    """Random layouts (shards of 0-2 replicas on random nodes, zones, masters), random orders: the nodes the
    proof admits one after another, all away at once, leave every shard that had a started copy with one."""
    rng = random.Random(seed)
    nodes = [node(f"es-{i}", zone=f"z{i % zones}", roles=("master", "data") if i < 3 else ("data",))
             for i in range(data_nodes)]
    shards = []
    for s in range(rng.randrange(1, 40)):
        holders = rng.sample(nodes, min(len(nodes), rng.randint(1, replicas + 1)))
        shards += [ShardCopy(f"i{s}", 0, k == 0, rng.choice(["STARTED", "STARTED", "INITIALIZING"]), h.id, 1)
                   for k, h in enumerate(holders)]
    snap = snapshot(nodes, shards, "es-0")
    zone_of = {n.id: n.zone for n in nodes}
    masters = {n.id for n in nodes if "master" in n.roles}
    order = [n.id for n in nodes]
    rng.shuffle(order)
    away: list[str] = []
    for candidate in order:
        if not admission(snap, candidate, away, zone_of, masters, budget):
            away.append(candidate)
    assert len(away) <= budget
    assert len({zone_of[n] for n in away}) <= 1
    assert len(away) == 1 or not set(away) & masters
    started_before = {(c.index, c.shard) for c in shards if c.state == "STARTED"}
    started_after = {(c.index, c.shard) for c in shards if c.state == "STARTED" and c.node_id not in away}
    held_away = {(c.index, c.shard) for c in shards if c.node_id in away}
    assert started_before & held_away <= started_after, "a shard the window holds lost its last started copy"


def test_the_plan_of_a_budget_says_its_reach_and_a_window_by_zone_is_refused_before_anything(tmp_path: object) -> None:
    """`plan --max-unavailable 4` on twelve nodes of the fake Elasticsearch says how many could be away together
    and the estimate beside one at a time, with the window's procedure and the masters last; a window with
    `--by zone` or `--pause-between` is refused before the cluster is asked; Riak refuses any budget above 1."""
    from dataclasses import replace
    from pathlib import Path

    from orchestrator.restart.journal import RunOptions
    from orchestrator.restart.plan import Mode
    from orchestrator.riak.product import unsupported_options
    from orchestrator.runs import plans
    from orchestrator.runs.target import open_target
    from orchestrator.testing.fake_es.hosts import FakeHostTransport, fake_inventory
    from orchestrator.testing.fake_es.model import FakeCluster
    from orchestrator.testing.fake_es.server import FakeEsServer
    from tests.helpers import orchestrate
    from tests.unit.snapshots import inventory

    cluster = FakeCluster.generate(12, copies_per_node=10)
    with FakeEsServer(cluster) as server:
        config = fake_inventory(Path(str(tmp_path)) / "c.yaml", server.url,
                                [(n, cluster.by_name[n].ip) for n in sorted(cluster.by_name)])
        target, budget = plans.windowed(open_target(None, config), "4", Mode.NODE)
        transport = FakeHostTransport(server.url)
        plan = plans.make_plan(target, Mode.NODE, replace(RunOptions(), max_unavailable=budget),
                               host_transport=lambda: transport)
        chosen = sorted(n for n in cluster.by_name if not cluster.by_name[n].is_master)[:6]
        some = plans.make_plan(target, Mode.NODE, replace(RunOptions(), max_unavailable=budget, nodes=tuple(chosen)),
                               host_transport=lambda: transport)
        for by, pause, said in ((Mode.ZONE, 0.0, "--by node"), (Mode.NODE, 5.0, "a pause between")):
            with pytest.raises(ConfigError, match=said):
                plans.windowed(open_target(None, config), "4", by, pause)
    steps = [name for name, _ in target.procedure.batch]
    assert "restrict_allocation" not in steps and steps.index("remember_copies") + 1 == steps.index("stop_service")
    assert steps[-1] == "wait_for_own_recovery" and "delay_allocation" in target.procedure.playbook.before_run
    masters = {n for n in cluster.by_name if cluster.by_name[n].is_master}
    assert {b.nodes[0] for b in plan.batches[-3:]} == masters, "the masters last"
    said = [n for n in plan.notes if n.startswith("--max-unavailable 4")]
    assert len(said) == 2 and "at most 4 of the 12 nodes away at once" in said[0], said
    assert "could be away together" in said[0] and "one node at a time" in said[1]
    assert f"{plan.estimate_s / 60:.0f} min one node at a time" in said[1], (plan.estimate_s, said[1])
    # Said of the plan as the run takes it: the nodes chosen, their estimate.
    some_said = [n for n in some.notes if n.startswith("--max-unavailable 4")]
    assert len(some.batches) == 6 and "at most 4 of the 6 nodes away at once" in some_said[0], some_said
    assert f"{some.estimate_s / 60:.0f} min one node at a time" in some_said[1], (some.estimate_s, some_said[1])
    bad = orchestrate("plan", "--cluster", "no-such-cluster", "--max-unavailable", "0")
    assert bad.returncode == 2 and "give a number of nodes" in bad.stderr + bad.stdout
    riak = unsupported_options(RunOptions(max_unavailable="2"), inventory(["a"]))
    assert riak and "preflist" in riak[0]


def test_a_node_leaves_the_window_once_each_copy_it_held_is_started_on_it_or_placed_elsewhere() -> None:
    """`wait_for_own_recovery`'s verdict: the node's copies from before its stop, read from the routing table."""
    from orchestrator.shards.steps import seconds_of, waits_s
    from orchestrator.shards.window import copy_key, own_copies_waiting

    held = [copy_key("a", 0), copy_key("b", 1), copy_key("gone", 0)]
    back = [ShardCopy("a", 0, False, "STARTED", "n1", 0), ShardCopy("a", 0, True, "STARTED", "n2", 0),
            ShardCopy("b", 1, True, "STARTED", "n3", 0), ShardCopy("b", 1, False, "INITIALIZING", "n1", 0)]
    assert own_copies_waiting(back, "n1", held) == ["[b][1]"], "a copy still recovering onto it keeps it in"
    unassigned = [*back[:3], ShardCopy("b", 1, False, "UNASSIGNED", None, 0)]
    assert own_copies_waiting(unassigned, "n1", held) == ["[b][1]"], "a copy not yet given back keeps it in"
    elsewhere = [*back[:3], ShardCopy("b", 1, False, "STARTED", "n4", 0)]
    assert own_copies_waiting(elsewhere, "n1", held) == [], "placed elsewhere and started: nothing to wait for"
    feeding = [*back[:3], ShardCopy("b", 1, False, "STARTED", "n1", 0),
               ShardCopy("b", 1, False, "INITIALIZING", "n5", 0)]
    assert own_copies_waiting(feeding, "n1", held) == [], "its own copy started: a replica it feeds is no wait"
    assert seconds_of("5m") == 300 and seconds_of("90s") == 90 and seconds_of("1.5h") is None
    assert waits_s(None) == 60 and waits_s("2h") == 7200 and waits_s("nonsense") == 0


def test_a_restart_window_orders_by_zone_the_smallest_first_and_an_upgrade_window_keeps_its_order() -> None:
    from dataclasses import replace

    from orchestrator.restart.plan import SettingChange
    from orchestrator.shards.plan import ALLOCATION_ENABLE
    from orchestrator.shards.window import DELAYED_TIMEOUT, planned_for_a_window
    from tests.unit.journals import plan_of
    from tests.unit.snapshots import inventory

    names = ["es-1", "es-2", "es-3", "es-4", "es-5"]
    zones = ["z1", "z2", "z1", "z2", "z2"]
    nodes = [node(n, zone=z, roles=("data",)) for n, z in zip(names, zones, strict=True)]
    nodes[4] = node("es-5", zone="z2")  # master-eligible: stays last
    run_settings = (SettingChange(ALLOCATION_ENABLE, "persistent", None, "primaries", "each batch"),
                    SettingChange("indices.recovery.max_bytes_per_sec", "persistent", None, "200mb", "for the run"),
                    SettingChange("cluster.routing.allocation.node_concurrent_recoveries", "persistent", None, "4",
                                  "for the run"))
    plan = replace(plan_of([[n] for n in names]), node_ids={n: f"id-{n}" for n in names}, settings=run_settings)
    snap = snapshot(nodes, [], "es-5")
    inv = inventory(names, zones)
    restart = planned_for_a_window(plan, snap, inv, reboots=False)
    assert [b.nodes[0] for b in restart.batches] == ["es-1", "es-3", "es-2", "es-4", "es-5"]
    assert [b.number for b in restart.batches] == [1, 2, 3, 4, 5]
    assert restart.settings[0].key == DELAYED_TIMEOUT and restart.settings[0].during == "900s"
    assert restart.settings[1:] == tuple(c for c in plan.settings if c.key != ALLOCATION_ENABLE), \
        "allocation stays enabled; every other setting of the run kept, in its order"
    rebooting = planned_for_a_window(plan, snap, inv, reboots=True).settings[0].during
    assert rebooting == f"{900 + int(inv.timeouts.reboot_s)}s", "a reboot's time added to each index's wait"
    upgrade = planned_for_a_window(plan, snap, inv, reboots=False, keep_order=True)
    assert [b.nodes[0] for b in upgrade.batches] == names
    # A zone's size counts its nodes that share the window, not its master-eligible ones (they go last, alone):
    # two data nodes in each zone, the master in the first zone, and the first zone still goes first.
    master_in_first = [*nodes[:4], node("es-5", zone="z1")]
    ordered = planned_for_a_window(plan, snapshot(master_in_first, [], "es-5"),
                                   inventory(names, ["z1", "z2", "z1", "z2", "z1"]), reboots=False)
    assert [b.nodes[0] for b in ordered.batches] == ["es-1", "es-3", "es-2", "es-4", "es-5"]


def test_a_playbook_is_windowed_once_and_one_without_a_recovery_wait_is_refused_naming_it() -> None:
    """`windowed` on a playbook already fit for a window (an operator's own, or a resumed run's journaled one)
    adds no second remember_copies or delay_allocation and keeps its own recovery wait; a playbook whose batch
    waits for no recovery is refused by name, since a node leaves the window only once its copies recovered."""
    from orchestrator.config.playbook import load_playbook
    from orchestrator.shards.window import windowed

    once = windowed(load_playbook("elasticsearch-rolling"))
    twice = windowed(once)
    assert (twice.batch, twice.before_run) == (once.batch, once.before_run)
    assert once.batch.count("remember_copies") == 1 and once.before_run.count("delay_allocation") == 1
    no_wait = once.model_copy(update={"name": "quick", "batch": [s for s in once.batch
                                                                   if s != "wait_for_own_recovery"]})
    with pytest.raises(ConfigError) as refused:
        windowed(no_wait)
    assert refused.value.source == "playbook quick"
    assert refused.value.problems == ["--max-unavailable above 1 needs wait_for_recovery in the batch: a node "
                                      "leaves the window once its copies recovered"]


def _notes(nodes: list, shards: list, budget: str, per_node_s: float = 900.0) -> list[str]:
    from orchestrator.shards.window import window_notes
    from tests.unit.journals import plan_of

    names = [n.name for n in nodes]
    plan = plan_of([[n] for n in names], estimate_s=per_node_s)
    zones = [n.zone for n in nodes] if all(n.zone for n in nodes) else None
    return window_notes(snapshot(nodes, shards, names[0]), plan, inventory(names, zones), Budget.parse(budget))


def test_the_plan_s_notes_of_a_window_give_its_reach_what_held_it_and_its_estimate_beside_one_at_a_time() -> None:
    """What `plan --max-unavailable` says: the nodes the budget lets away, how many this snapshot lets away together
    and what held the rest back, and the time it should take: a node's share of the estimate times the nodes in turn
    the window leaves (the nodes over those away together, never fewer than one), beside one at a time."""
    import re
    from pathlib import Path

    # es-1 and es-2 hold the copies of one shard; es-4 is of another zone than the window's: 2 of 4 together.
    held = [node("es-1", zone="z1", roles=("data",)), node("es-2", zone="z1", roles=("data",)),
            node("es-3", zone="z1", roles=("data",)), node("es-4", zone="z2", roles=("data",))]
    limits = reach(snapshot(held, [*copies("a", 0, ["es-1", "es-2"]), *copies("b", 0, ["es-3", "es-4"])], "es-1"),
                   [n.id for n in held], {n.id: n.zone for n in held}, set(), 4).limits
    assert len(limits) == 2, limits
    reached, took = _notes(held, [*copies("a", 0, ["es-1", "es-2"]), *copies("b", 0, ["es-3", "es-4"])], "4")
    assert reached == ("--max-unavailable 4: at most 4 of the 4 nodes away at once; from this snapshot 2 could be "
                       f"away together; held below the budget by {limits[0]}, {limits[1]}")
    assert took.startswith("--max-unavailable 4: about 30 min with the window, 60 min one node at a time ")
    # Where the note sends the operator is a section of the procedure's doc, by its heading.
    section = re.fullmatch(r'.*\(.*docs/restart-procedure\.md, "([^"]+)"\)', took)
    doc = (Path(__file__).parents[2] / "docs" / "restart-procedure.md").read_text()
    assert section and re.search(rf"^#+ {re.escape(section[1])}\b", doc, re.M), took
    # One shard on both nodes: one away at a time whatever the budget, the window's time is one at a time's.
    pair = [node("es-1", roles=("data",)), node("es-2", roles=("data",))]
    alone, same = _notes(pair, copies("a", 0, ["es-1", "es-2"]), "2")
    assert "from this snapshot 1 could be away together; held below" in alone, alone
    assert "about 30 min with the window, 30 min one node at a time" in same, same
    # Three nodes holding nothing, two at once: the budget reached, nothing held back; three nodes in two turns' time
    # of 1.5 nodes (22.5 min, said rounded to even), never less than one node's share.
    free = [node(f"es-{i}", roles=("data",)) for i in (1, 2, 3)]
    reached, took = _notes(free, [], "2")
    assert reached == "--max-unavailable 2: at most 2 of the 3 nodes away at once; from this snapshot 2 could be " \
                      "away together"
    assert "about 22 min with the window, 45 min one node at a time" in took, took
    assert "about 15 min with the window" in _notes(free, [], "3")[1], "all three together: one node's share"
    # Nodes of an hour each: the estimates are said in minutes, whole.
    assert "about 60 min with the window, 180 min one node at a time" in _notes(free, [], "3", 3600.0)[1]


def test_a_window_s_plan_shows_each_index_s_delay_raised_from_its_own_value_for_the_run_and_why() -> None:
    """The row `plan --max-unavailable` shows for the delay a window raises: on each index, from the index's own
    value (put back exactly, not unset), for the run, with why allocation stays enabled."""
    from rich.console import Console

    from orchestrator.cli.render import plan_table
    from orchestrator.shards.window import planned_for_a_window
    from tests.unit.journals import plan_of

    names = ["es-1", "es-2"]
    plan = planned_for_a_window(plan_of([[n] for n in names]), snapshot([node(n) for n in names], [], "es-1"),
                                inventory(names), reboots=False)
    console = Console(record=True, width=200)
    console.print(plan_table(plan, [], []))
    shown = [line.strip() for line in console.export_text().splitlines()]
    row = shown.index("index.unassigned.node_left.delayed_timeout (each index): its own -> 900s, for the run, by index")
    assert shown[row + 1] == ("allocation stays enabled so that a node back recovers while others are away; each "
                              "index waits this long for a node away before copying its copies elsewhere")
