"""Riak: parsing riak-admin output (samples in the format of riak_core_console.erl, Riak KV 2.x/3.x),
the plan, and telling a stalled handoff from a slow one."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from orchestrator.config.loader import load_model
from orchestrator.config.model import Inventory
from orchestrator.errors import ConfigError
from orchestrator.restart.plan import Mode
from orchestrator.riak.handoffs import HandoffWatch
from orchestrator.riak.plan import build_riak_plan
from orchestrator.riak.status import (
    ActiveTransfer,
    RiakOutputError,
    RiakSnapshot,
    Transfers,
    cluster_problems,
    parse_member_status,
    parse_ring_status,
    parse_transfer_limit,
    parse_transfers,
)

MEMBER_STATUS = """\
================================= Membership ==================================
Status     Ring    Pending    Node
-------------------------------------------------------------------------------
valid      34.4%      --      'riak@10.0.1.101'
valid      32.8%      --      'riak@10.0.1.102'
leaving    32.8%      --      'riak@10.0.1.103'
-------------------------------------------------------------------------------
Valid:2 / Leaving:1 / Exiting:0 / Joining:0 / Down:0
"""

RING_READY = """\
================================== Claimant ===================================
Claimant:  'riak@10.0.1.101'
Status:     up
Ring Ready: true

============================== Ownership Handoff ==============================
No pending changes.

============================== Unreachable Nodes ==============================
All nodes are up and reachable

"""

RING_NODE_DOWN = RING_READY.replace("All nodes are up and reachable\n", """\
The following nodes are unreachable: ['riak@10.0.1.103']

WARNING: The cluster state will not converge until all nodes
are up. Once the above nodes come back online, convergence
will continue. If the outages are long-term or permanent, you
can either mark the nodes as down (riak-admin down NODE) or
forcibly remove the nodes from the cluster (riak-admin
force-remove NODE) to allow the remaining nodes to settle.
""")

TRANSFERS_NONE = "No transfers active\n\nActive Transfers:\n\n\n"

TRANSFERS_ACTIVE = """\
'riak@10.0.1.102' waiting to handoff 7 partitions
'riak@10.0.1.101' waiting to handoff 2 partitions

Active Transfers:

transfer type: hinted_handoff
vnode type: riak_kv_vnode
partition: 1210306043414653979137426502093171875652569137152
started: 2014-10-01 16:37:33 [3.21 s ago]
last update: 2014-10-01 16:37:36 [1.21 s ago]
total size: 224 objects
objects transferred: 180

                         10 Objs/s
     riak@10.0.1.102          =======>       riak@10.0.1.103
        |====================================      |  80%
                         1.96 KB/s

transfer type: ownership_handoff
vnode type: riak_kv_vnode
partition: 479555224749202520035584085735030365824602865664
started: 2014-10-01 16:37:35 [900.12 ms ago]
last update: no updates seen
total size: unknown
objects transferred: unknown

                          unknown
     riak@10.0.1.101          =======>       riak@10.0.1.103
        |                                          | N/A%
                          unknown


"""

LIMITS = """\
=============================== Transfer Limit ================================
Limit        Node
-------------------------------------------------------------------------------
    2        'riak@10.0.1.101'
    4        'riak@10.0.1.102'
(offline)    'riak@10.0.1.103'
-------------------------------------------------------------------------------
Note: You can change transfer limits with 'riak-admin transfer_limit <limit>'
      and 'riak-admin transfer_limit <node> <limit>'
"""


def test_member_status_is_parsed() -> None:
    members = parse_member_status(MEMBER_STATUS)
    assert [(m.node, m.status, m.ring_pct) for m in members] == [
        ("riak@10.0.1.101", "valid", 34.4), ("riak@10.0.1.102", "valid", 32.8), ("riak@10.0.1.103", "leaving", 32.8)]


def test_ring_status_is_parsed() -> None:
    ready = parse_ring_status(RING_READY)
    assert ready.claimant == "riak@10.0.1.101" and ready.ring_ready is True
    assert not ready.pending_changes and ready.unreachable == ()
    down = parse_ring_status(RING_NODE_DOWN)
    assert down.unreachable == ("riak@10.0.1.103",)


def test_transfers_are_parsed_with_their_nodes_and_progress() -> None:
    assert parse_transfers(TRANSFERS_NONE).none
    t = parse_transfers(TRANSFERS_ACTIVE)
    assert t.waiting == {"riak@10.0.1.102": 7, "riak@10.0.1.101": 2}
    first, second = t.active
    assert (first.kind, first.source, first.target, first.objects, first.percent) == (
        "hinted", "riak@10.0.1.102", "riak@10.0.1.103", 180, 80)
    assert first.partition == "1210306043414653979137426502093171875652569137152"
    assert first.last_update_s == pytest.approx(1.21)
    assert (second.kind, second.objects, second.percent, second.last_update_s) == ("ownership", None, None, None)


def test_transfers_of_a_down_node_are_parsed() -> None:
    t = parse_transfers("Nodes ['riak@10.0.1.103'] are currently down.\n'riak@10.0.1.101' waiting to handoff 3 "
                        "partitions\n\nActive Transfers:\n\n\n")
    assert t.down == ("riak@10.0.1.103",) and t.waiting == {"riak@10.0.1.101": 3}


def test_transfer_limits_are_parsed_with_offline_nodes() -> None:
    assert parse_transfer_limit(LIMITS) == {"riak@10.0.1.101": 2, "riak@10.0.1.102": 4, "riak@10.0.1.103": None}


@pytest.mark.parametrize("parse", [parse_member_status, parse_ring_status, parse_transfers, parse_transfer_limit])
def test_output_of_a_stopped_node_is_refused_not_guessed(parse: object) -> None:
    with pytest.raises(RiakOutputError):
        parse("Node is not running!\n")  # type: ignore[operator]


def snapshot(member_status: str = MEMBER_STATUS.replace("leaving", "valid "), ring: str = RING_READY,
             transfers: str = TRANSFERS_NONE, limits: str = LIMITS.replace("(offline)", "    2    ")) -> RiakSnapshot:
    return RiakSnapshot(members=parse_member_status(member_status), ring=parse_ring_status(ring),
                        transfers=parse_transfers(transfers), limits=parse_transfer_limit(limits))


def test_a_settled_cluster_has_no_problem_and_each_unsafe_state_is_named() -> None:
    assert cluster_problems(snapshot()) == []
    assert "leaving" in " ".join(cluster_problems(snapshot(member_status=MEMBER_STATUS)))
    assert "unreachable: riak@10.0.1.103" in " ".join(cluster_problems(snapshot(ring=RING_NODE_DOWN)))
    assert "transfers are active" in " ".join(cluster_problems(snapshot(transfers=TRANSFERS_ACTIVE)))
    assert "not ready" in " ".join(cluster_problems(snapshot(ring=RING_READY.replace("Ring Ready: true",
                                                                                     "Ring Ready: false"))))


def inventory(tmp_path: Path, extra: str = "") -> Inventory:
    (tmp_path / "riak.yaml").write_text(
        "cluster: {name: kv, product: riak}\nssh: {known_hosts: /dev/null}\nnodes:\n"
        "  - {name: a, host: 10.0.1.101}\n  - {name: b, host: 10.0.1.102}\n  - {name: c, host: 10.0.1.103}\n"
        + extra)
    return load_model(tmp_path / "riak.yaml", Inventory)


def test_riak_plan_orders_the_claimant_last_and_raises_the_transfer_limit(tmp_path: Path) -> None:
    inv = inventory(tmp_path)
    from orchestrator.riak.product import PRODUCT
    from orchestrator.runs.target import load_procedure

    assert inv.playbook is None and load_procedure(inv, PRODUCT).playbook.name == "riak-rolling"
    plan = build_riak_plan(inv, snapshot(), Mode.NODE)
    assert plan.safe and plan.product == "riak"
    assert [b.nodes for b in plan.batches] == [("b",), ("c",), ("a",)]  # a's node is the claimant
    assert {(s.scope, s.before, s.during) for s in plan.settings} == {
        ("riak@10.0.1.101", 2, 8), ("riak@10.0.1.102", 4, 8), ("riak@10.0.1.103", 2, 8)}


def test_riak_plan_is_unsafe_with_an_unknown_member_or_in_zone_mode(tmp_path: Path) -> None:
    inv = inventory(tmp_path)
    extra_member = MEMBER_STATUS.replace("leaving", "valid  ").replace("Valid:2 / Leaving:1", "Valid:4 / Leaving:0") \
        + "valid      0.0%      --      'riak@10.0.1.104'\n"
    plan = build_riak_plan(inv, snapshot(member_status=extra_member), Mode.NODE)
    assert not plan.safe and "riak@10.0.1.104" in " ".join(plan.problems)
    assert "zone mode" in " ".join(build_riak_plan(inv, snapshot(), Mode.ZONE).problems)


def test_an_elasticsearch_step_in_a_riak_playbook_is_refused(tmp_path: Path) -> None:
    from orchestrator.config.playbook import Playbook
    from orchestrator.restart.procedure import resolve
    from orchestrator.riak.product import PRODUCT

    (tmp_path / "p.yaml").write_text("name: p\nproduct: riak\nbatch: [stop_service, flush, start_service]\n")
    with pytest.raises(ConfigError, match="unknown riak step 'flush'"):
        resolve(load_model(tmp_path / "p.yaml", Playbook), PRODUCT)


def test_a_slow_handoff_is_not_stalled_but_one_without_progress_is() -> None:
    watch = HandoffWatch(stall_s=10)
    one = TRANSFERS_ACTIVE[:TRANSFERS_ACTIVE.index("transfer type: ownership")]
    moving = parse_transfers(one)
    slower = parse_transfers(one.replace("objects transferred: 180", "objects transferred: 190"))
    assert watch.observe(moving, now=0) is None
    assert watch.observe(moving, now=9) is None
    assert watch.observe(slower, now=12) is None  # progress at 12 s: the clock starts again
    said = watch.observe(slower, now=30)
    assert said is not None
    assert "1210306043414653979137426502093171875652569137152" in said
    assert "from riak@10.0.1.102 to riak@10.0.1.103" in said
    assert watch.handed_to("riak@10.0.1.103") == (1, 190)


def test_partitions_waiting_with_no_transfer_running_are_stalled_after_the_limit() -> None:
    watch = HandoffWatch(stall_s=5)
    waiting = parse_transfers("'riak@10.0.1.101' waiting to handoff 3 partitions\n\nActive Transfers:\n\n\n")
    fewer = parse_transfers("'riak@10.0.1.101' waiting to handoff 2 partitions\n\nActive Transfers:\n\n\n")
    assert watch.observe(waiting, now=0) is None
    assert watch.observe(fewer, now=4) is None
    assert watch.observe(fewer, now=8) is None
    said = watch.observe(fewer, now=9.5)
    assert said is not None and "riak@10.0.1.101 (2 partition(s))" in said


def transfer(partition: str, objects: int | None, percent: int | None, source: str = "riak@a",
             target: str = "riak@b") -> ActiveTransfer:
    return ActiveTransfer("ownership", "riak_kv_vnode", partition, source, target, objects, percent, None)


def test_a_handoff_is_stalled_at_exactly_the_limit_and_each_stalled_transfer_is_said_in_full() -> None:
    watch = HandoffWatch(stall_s=10)
    both = Transfers(active=(transfer("p1", None, None), transfer("p2", 7, 40, target="riak@c")))
    assert watch.observe(both, now=0) is None
    assert watch.observe(both, now=9.99) is None
    assert watch.observe(both, now=10) == (
        "ownership handoff of partition p1 (riak_kv_vnode) from riak@a to riak@b made no progress for 10 s "
        "(objects transferred: unknown, ?%); "
        "ownership handoff of partition p2 (riak_kv_vnode) from riak@a to riak@c made no progress for 10 s "
        "(objects transferred: 7, 40%)")


def test_what_was_handed_to_a_node_counts_each_partition_once_and_each_transfers_largest_count() -> None:
    watch = HandoffWatch(stall_s=60)
    watch.observe(Transfers(active=(transfer("p1", 50, 10), transfer("p2", 5, 1))), now=0)
    watch.observe(Transfers(active=(transfer("p1", 80, 20), transfer("p3", None, None))), now=1)
    watch.observe(Transfers(active=(transfer("p1", 60, 30), transfer("p4", 0, 0))), now=2)  # smaller, and none yet
    assert watch.handed_to("riak@b") == (4, 85)  # p1 to p4; 80 (p1's largest) + 5 (p2) + 0 (p4)
    assert watch.handed_to("riak@nobody") == (0, 0)


def test_waiting_partitions_after_a_transfer_ran_start_their_own_clock_and_stall_at_exactly_the_limit() -> None:
    watch = HandoffWatch(stall_s=5)
    waiting = Transfers(waiting={"riak@a": 2, "riak@c": 1})
    assert watch.observe(Transfers(waiting={"riak@a": 2}, active=(transfer("p1", 1, 1),)), now=0) is None
    assert watch.observe(waiting, now=1) is None  # the transfer ended: waiting since now
    assert watch.observe(waiting, now=5.99) is None
    assert watch.observe(waiting, now=6) == (
        "partitions wait to be handed off but no transfer has run for 5 s: riak@a (2 partition(s)), "
        "riak@c (1 partition(s)). Check `riak-admin handoff config` and the logs of these nodes")
    assert watch.observe(Transfers(), now=7) is None and watch.waiting_since is None


def test_riak_plan_leaves_the_transfer_limit_alone_when_asked(tmp_path: Path) -> None:
    plan = build_riak_plan(inventory(tmp_path, "riak: {transfer_limit: null}\n"), snapshot(), Mode.NODE)
    assert plan.safe and plan.settings == ()


# --- Riak 3.x and OpenRiak forms (riak_core_console of riak_kv 3.0.10+ and OpenRiak 3.4) ---------------
MEMBER_STATUS_LOCATIONS = """\
================================= Membership ==================================
Status     Ring    Pending    Node
-------------------------------------------------------------------------------
valid      34.4%      --      'riak@10.0.1.101' (rack_a)
valid      32.8%      --      'riak@10.0.1.102' (rack_b)
down       32.8%      --      'riak@10.0.1.103' (rack_c)
-------------------------------------------------------------------------------
Valid:2 / Leaving:0 / Exiting:0 / Joining:0 / Down:1
ok
"""


def test_member_rows_with_locations_are_read_and_counted_against_the_footer() -> None:
    members = parse_member_status(MEMBER_STATUS_LOCATIONS)
    assert [(m.node, m.status, m.location) for m in members] == [
        ("riak@10.0.1.101", "valid", "rack_a"), ("riak@10.0.1.102", "valid", "rack_b"),
        ("riak@10.0.1.103", "down", "rack_c")]
    unreadable = MEMBER_STATUS_LOCATIONS.replace("'riak@10.0.1.103' (rack_c)", "'riak@10.0.1.103' {rack c}")
    with pytest.raises(RiakOutputError, match="counts 3 member"):
        parse_member_status(unreadable)  # the down member would otherwise vanish from the gate's view


def test_a_repair_transfer_names_its_target_partition() -> None:
    repair = TRANSFERS_ACTIVE.replace("transfer type: hinted_handoff", "transfer type: repair").replace(
        "partition: 1210306043414653979137426502093171875652569137152",
        "source partition: 1187470080331358621040493926581979953470445191168\n"
        "target partition: 1210306043414653979137426502093171875652569137152")
    t = parse_transfers(repair)
    assert t.active[0].kind == "repair"
    assert t.active[0].partition == "1210306043414653979137426502093171875652569137152"


def test_wrapped_lists_and_a_trailing_ok_are_read_as_riak_meant_them() -> None:
    ring = RING_READY.replace("All nodes are up and reachable\n", "The following nodes are unreachable: "
                              "['riak@10.0.1.103',\n                                      'riak@10.0.1.104']\n")
    assert parse_ring_status(ring + "ok\n").unreachable == ("riak@10.0.1.103", "riak@10.0.1.104")
    down = ("Nodes ['riak@long-hostname-number-one.example.com',\n       'riak@long-hostname-number-two.example.com']"
            " are currently down.\n" + TRANSFERS_NONE + "ok\n")
    t = parse_transfers(down)
    assert t.down == ("riak@long-hostname-number-one.example.com", "riak@long-hostname-number-two.example.com")
    assert parse_transfers(TRANSFERS_ACTIVE + "ok\n").active[0].target == "riak@10.0.1.103"


def test_riak_1x_transfer_output_is_refused_clearly() -> None:
    old = "No transfers active\n\nActive Transfers:\n\nvnode type: riak_kv_vnode\npartition: 0\n" \
          "target node: 'riak@10.0.1.102'\n\n"
    with pytest.raises(RiakOutputError, match=r"Riak 1\.x"):
        parse_transfers(old)


@pytest.mark.parametrize("said", ["Node is not running!", "Node did not respond to ping!",
                                  "Node 'riak@10.0.1.101' not responding to pings."])
def test_every_version_of_node_down_is_recognised(said: str) -> None:
    from orchestrator.riak.adapter import NOT_RUNNING

    assert any(marker in said for marker in NOT_RUNNING)


def test_a_riak_3_node_is_asked_with_riak_admin_and_said_so(tmp_path: Path) -> None:
    """On a Riak 3.x package `riak-admin` fails ("relx_nodetool: not found"): the adapter switches that
    node to `riak admin`, through a real shell and the real batching of commands."""
    import os
    import stat

    from orchestrator.hosts.transport import LocalTransport
    from orchestrator.riak.adapter import RiakAdapter

    outputs = {"member-status": MEMBER_STATUS_LOCATIONS.replace("down ", "valid").replace("Down:1", "Down:0")
               .replace("Valid:2", "Valid:3"), "ring-status": RING_READY, "transfers": TRANSFERS_NONE,
               "transfer-limit": "Transfer Limit\n   2   'riak@10.0.1.101'\n   2   'riak@10.0.1.102'\n"
                                 "   2   'riak@10.0.1.103'\n"}
    for name, text in outputs.items():
        (tmp_path / f"{name}.out").write_text(text + "ok\n")
    scripts = {"riak-admin": 'echo "/usr/lib/riak/bin/riak-admin: 1: relx_nodetool: not found"; exit 127\n',
               "riak": f'[ "$1" = admin ] && exec cat "{tmp_path}/$2.out"; exit 1\n'}
    for name, body in scripts.items():
        (tmp_path / name).write_text("#!/bin/sh\n" + body)
        (tmp_path / name).chmod(stat.S_IRWXU)
    adapter = RiakAdapter(inventory(tmp_path), LocalTransport(env={"PATH": f"{tmp_path}:{os.environ['PATH']}"}))
    snap = adapter.snapshot()
    assert [m.location for m in snap.members] == ["rack_a", "rack_b", "rack_c"]
    assert snap.limits == {"riak@10.0.1.101": 2, "riak@10.0.1.102": 2, "riak@10.0.1.103": 2}
    assert adapter.admin_forms == {"a": "riak admin"}


def test_two_inventories_of_one_riak_cluster_keep_the_run_lock_on_the_same_host_whatever_their_order() -> None:
    from orchestrator.hosts.transport import CommandResult
    from orchestrator.riak.adapter import RiakAdapter

    class Hosts:
        """Each host's files, as far as the lock's shell commands need them."""

        def __init__(self) -> None:
            self.where: list[str] = []

        def run(self, node: object, command: str, timeout_s: float | None = None,
                stdin: bytes | None = None) -> CommandResult:
            self.where.append(node.host)  # type: ignore[attr-defined]
            return CommandResult(0, "", "")

    def inventory(hosts: list[str]) -> Inventory:
        return Inventory.model_validate({"cluster": {"name": "kv", "product": "riak"}, "ssh": {"transport": "local"},
                                         "nodes": [{"name": f"n-{h}", "host": h} for h in hosts]})

    seen = []
    for order in (["10.0.1.102", "10.0.1.101", "10.0.1.103"], ["10.0.1.103", "10.0.1.102", "10.0.1.101"]):
        hosts = Hosts()
        adapter = RiakAdapter(inventory(order), hosts)  # type: ignore[arg-type]
        adapter.create_lock("orchestrator-locks", "run", {"run_id": "r"})
        adapter.read_lock("orchestrator-locks", "run")
        seen.append(set(hosts.where))
    assert seen == [{"10.0.1.101"}, {"10.0.1.101"}], "riak@10.0.1.101, the smallest node name, keeps it"


def test_options_that_mean_nothing_to_riak_are_refused_not_ignored(tmp_path: Path) -> None:
    from orchestrator.restart.journal import RunOptions
    from orchestrator.riak.product import PRODUCT as RIAK

    inv = inventory(tmp_path)
    assert RIAK.plan(inv, snapshot(), Mode.NODE, RunOptions(), ()).safe
    yellow = RIAK.plan(inv, snapshot(), Mode.NODE, RunOptions(allow_yellow=True), ())
    unavailable = RIAK.plan(inv, snapshot(), Mode.NODE, RunOptions(allow_unavailable=("logs-*",)), ())
    assert not yellow.safe and "--allow-yellow (or allow_yellow) is for Elasticsearch" in yellow.problems[-1]
    assert not unavailable.safe and "--allow-unavailable is for Elasticsearch" in unavailable.problems[-1]


def test_the_riak_section_is_the_plug_ins_own_and_checked_when_opened(tmp_path: Path) -> None:
    """`riak:` is read by the Riak plug-in's model (the shared inventory knows none of it): node names come
    from it, a wrong value is refused when the inventory is opened for a run, and a node entry takes no
    Riak field."""
    from orchestrator.errors import ConfigError
    from orchestrator.runs.target import open_target

    renamed = inventory(tmp_path, "riak: {node_names: {a: riak@a.example.net}}\n")
    plan = build_riak_plan(renamed, snapshot(), Mode.NODE)
    assert not plan.safe and any("node a (riak@a.example.net) is not a member" in p for p in plan.problems)
    stray = build_riak_plan(inventory(tmp_path, "riak: {node_names: {z: riak@10.0.1.109}}\n"), snapshot(), Mode.NODE)
    assert "riak.node_names names z, which is not a node of the inventory" in stray.problems
    inventory(tmp_path, "riak: {transfer_limit: 500}\n")
    with pytest.raises(ConfigError) as refused:
        open_target(None, tmp_path / "riak.yaml")
    assert any(p.startswith("riak.transfer_limit") for p in refused.value.problems), refused.value.problems
    with pytest.raises(ValidationError, match="riak_node"):
        Inventory.model_validate({"cluster": {"name": "kv", "product": "riak"}, "ssh": {"known_hosts": "/dev/null"},
                                  "nodes": [{"name": "a", "host": "h", "riak_node": "riak@h"}]})
