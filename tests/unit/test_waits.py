"""Waits around a stop: retention leases before it (decision over shard stats captured from the sandbox,
and the step), and the server-side wait for the rejoin after it."""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from dataclasses import replace
from pathlib import Path
from typing import Any

from orchestrator.config.model import Inventory
from orchestrator.errors import ClusterError
from orchestrator.hosts.transport import LocalTransport
from orchestrator.restart.context import RunContext
from orchestrator.restart.events import Event
from orchestrator.retry import Clock
from orchestrator.shards.adapter import ShardClusterAdapter
from orchestrator.shards.leases import LeaseAtRisk, bytes_at_risk, kept_in_its_own_view, leases_at_risk, lowest_kept
from orchestrator.shards.snapshot import EsNode
from orchestrator.shards.steps import wait_for_retention_leases
from tests.unit.fake_rest import RecordingRest
from tests.unit.journals import journal_of, plan_of
from tests.unit.snapshots import inventory

FIXTURES = Path(__file__).parents[1] / "fixtures" / "leases"
# The sandbox's node ids in the captured answers (GET _stats/docs,store?level=shards, sample-1 and sample-2).
IDS = {"es-1": "gKIAkoaoTJe-kM7Nzk_aMA", "es-2": "BLhr6CQ2ScaT8GYvhMrYeQ", "es-3": "FoxF3uWgR9qj04QYpiBi7Q"}
NAMES = {v: k for k, v in IDS.items()}


def captured(name: str) -> dict[str, Any]:
    return dict(json.loads((FIXTURES / f"{name}.json").read_text()))


def test_leases_renewed_after_the_flush_put_no_copy_at_risk() -> None:
    stats = captured("current")
    for node_id in IDS.values():
        assert leases_at_risk(stats, {node_id}) == []


def test_right_after_indexing_every_copy_on_the_stopping_node_is_at_risk_named_with_its_holder() -> None:
    stats = captured("after-indexing")
    for name, node_id in IDS.items():
        risks = leases_at_risk(stats, {node_id})
        held = {(index, int(shard)) for index, body in stats["indices"].items()
                for shard, shard_copies in body["shards"].items()
                for c in shard_copies if c["routing"]["node"] == node_id}
        assert {(r.index, r.shard) for r in risks} == held, name
        for r in risks:
            assert r.holder_id != node_id and r.retaining_seq_no is not None
            assert r.retaining_seq_no < r.needed_seq_no and r.size_bytes > 0
        assert re.fullmatch(r"\[sample-\d\]\[\d\] on es-\d: lease at \d+, es-\d keeps >= \d+", risks[0].text(NAMES))
        assert bytes_at_risk(risks) == sum(r.size_bytes for r in risks)


def shard(*copies: dict[str, Any]) -> dict[str, Any]:
    return {"indices": {"i": {"shards": {"0": list(copies)}}}}


def copy(node: str, primary: bool, leases: dict[str, int], checkpoint: int = 99, docs: int = 100,
         state: str = "STARTED") -> dict[str, Any]:
    return {"routing": {"node": node, "primary": primary, "state": state}, "docs": {"count": docs},
            "store": {"size_in_bytes": 10}, "commit": {"user_data": {"local_checkpoint": str(checkpoint)}},
            "retention_leases": {"leases": [{"id": f"peer_recovery/{n}", "retaining_seq_no": s}
                                            for n, s in leases.items()]}}


def test_the_holder_keeps_a_lease_down_to_a_tenth_of_its_documents_behind_its_commit() -> None:
    assert lowest_kept(copy("a", True, {}, checkpoint=99, docs=100)) == 90
    assert lowest_kept({"routing": {}}) is None
    # Exactly at the bound: kept; one below: dropped.
    assert leases_at_risk(shard(copy("a", True, {"b": 90}), copy("b", False, {})), {"b"}) == []
    assert len(leases_at_risk(shard(copy("a", True, {"b": 89}), copy("b", False, {})), {"b"})) == 1
    # No lease at all.
    [risk] = leases_at_risk(shard(copy("a", True, {}), copy("b", False, {})), {"b"})
    assert risk.retaining_seq_no is None and "no lease" in risk.text({})


def test_only_a_copy_that_can_act_as_primary_decides() -> None:
    # The primary stays: a replica's stale view does not matter.
    stats = shard(copy("a", True, {"c": 100}), copy("b", False, {"c": 0}), copy("c", False, {}))
    assert leases_at_risk(stats, {"c"}) == []
    # The primary stops: any staying replica may be promoted, so each one's view counts.
    stats = shard(copy("a", True, {}), copy("b", False, {"a": 100}), copy("c", False, {"a": 0}))
    assert [r.holder_id for r in leases_at_risk(stats, {"a"})] == ["c"]
    # Every copy stops (zone mode with the replicas in the zone): nothing to recover from.
    assert leases_at_risk(shard(copy("a", True, {}), copy("b", False, {})), {"a", "b"}) == []
    # A copy still initializing holds nothing yet.
    assert leases_at_risk(shard(copy("a", True, {}, state="INITIALIZING"), copy("b", False, {})), {"b"}) == []


class LeaseAnswers(ShardClusterAdapter):
    """Shard stats answered in turn (the last one repeated): the stopping nodes' own copies (`lease_views`,
    from the answer in turn) and the stats of whole indices (`lease_stats_of`, counted in ``reads``)."""

    def __init__(self, answers: list[dict[str, Any]]) -> None:
        super().__init__(rest=None)  # type: ignore[arg-type]
        self.answers = answers
        self.reads = 0
        self.indices_read: list[list[str]] = []

    def lease_views(self, node_ids: Collection[str]) -> dict[str, dict[tuple[str, int], Any]]:
        stats = self.answers[0]
        return {n: {(index, int(number)): c for index, body in stats["indices"].items()
                    for number, copies in body["shards"].items() for c in copies if c["routing"]["node"] == n}
                for n in node_ids}

    def lease_stats_of(self, indices: Collection[str]) -> dict[str, Any]:
        self.reads += 1
        self.indices_read.append(sorted(indices))
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]


def lease_context(answers: list[dict[str, Any]], **recovery: Any) -> tuple[RunContext, list[Event], LeaseAnswers]:
    plan = replace(plan_of([["es-1"], ["es-2"], ["es-3"]]), node_ids=IDS)
    inv = Inventory.model_validate({**inventory(list(IDS)).model_dump(mode="json"), "recovery": recovery,
                                    "timeouts": {"lease_wait_s": 45}})
    now = [0.0]
    clock = Clock(monotonic=lambda: now[0], sleep=lambda s: now.__setitem__(0, now[0] + s))
    events: list[Event] = []
    cluster = LeaseAnswers(answers)
    ctx = RunContext(inv=inv, cluster=cluster, transport=LocalTransport(), service=None,  # type: ignore[arg-type]
                     journal=journal_of(plan), emit=events.append, clock=clock)
    return ctx, events, cluster


def test_the_step_waits_for_the_renewal_says_how_long_and_never_fails_the_run() -> None:
    behind, current = captured("after-indexing"), captured("current")
    ctx, events, cluster = lease_context([behind, behind, current], lease_wait_min_bytes="0b")
    wait_for_retention_leases(ctx, ctx.journal.batches[1])
    assert cluster.reads == 3
    assert "waiting for Elasticsearch to renew the retention leases of 4 shard copies" in events[0].message
    assert re.search(r"retention leases renewed after \d+\.\d s", events[-1].message)
    # Never renewed within the timeout: a warning naming the shards, and the run goes on.
    ctx, events, cluster = lease_context([behind], lease_wait_min_bytes="0b")
    wait_for_retention_leases(ctx, ctx.journal.batches[0])
    assert events[-1].kind == "warning" and "4 shard copies" in events[-1].message
    assert "will likely be copied in full" in events[-1].message and "[sample-1][0] on es-1" in events[-1].message
    assert cluster.reads > 10


def test_the_step_does_not_wait_when_copying_is_cheaper_or_nothing_is_at_risk() -> None:
    ctx, events, cluster = lease_context([captured("after-indexing")])  # the default: 1gb
    wait_for_retention_leases(ctx, ctx.journal.batches[0])
    assert cluster.reads == 1 and "not waiting for retention leases: 4 shard copies" in events[-1].message
    ctx, events, cluster = lease_context([captured("current")], lease_wait_min_bytes="0b")
    wait_for_retention_leases(ctx, ctx.journal.batches[0])
    # Every copy on the stopping node sees its own lease kept: no index is read whole.
    assert cluster.reads == 0 and events == []


def test_only_the_indices_whose_copies_may_lose_their_lease_are_read_whole() -> None:
    """The copies on the stopping node, read alone, flag exactly the copies the whole-index check finds (on
    stats captured from the sandbox, current and right after indexing): only their indices are read whole."""
    for name in ("current", "after-indexing"):
        stats = captured(name)
        for node_id in IDS.values():
            mine = {(index, int(number)): c for index, body in stats["indices"].items()
                    for number, copies in body["shards"].items() for c in copies if c["routing"]["node"] == node_id}
            flagged = {key for key, c in mine.items() if not kept_in_its_own_view(c, node_id)}
            assert flagged == {(r.index, r.shard) for r in leases_at_risk(stats, {node_id})}, (name, node_id)
    ctx, _, cluster = lease_context([captured("after-indexing")])
    wait_for_retention_leases(ctx, ctx.journal.batches[0])
    assert cluster.indices_read == [["sample-1", "sample-2"]]


def node(name: str, pid: int) -> EsNode:
    return EsNode(id=f"id-{name}", name=name, host="", ip="", roles=("master", "data"), zone=None, version="9.5.3",
                  process_id=pid, start_time_ms=1000 * pid)


class NodesRest(RecordingRest):
    """Node info as `_nodes/SPEC/...` answers it: the nodes present (``present``, the next list of
    ``answers`` at each node read) that SPEC names by id or name; health requests recorded with their params."""

    def __init__(self, *answers: list[EsNode]) -> None:
        super().__init__()
        self.answers = list(answers)
        self.health_params: list[dict[str, Any]] = []
        self.no_master = False

    def answer(self, what: str, method: str, path: str, params: Any, body: Any) -> Any:
        if path == "/_cluster/health":
            self.health_params.append(dict(params or {}))
            if self.no_master:
                raise ClusterError("cluster health: Elasticsearch answered HTTP 503: master_not_discovered_exception")
            return {"number_of_nodes": len(self.answers[0])}
        present = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        spec = set(path.split("/")[2].split(","))
        return {"nodes": {n.id: {"name": n.name, "process": {"id": n.process_id},
                                 "jvm": {"start_time_in_millis": n.start_time_ms}}
                          for n in present if n.id in spec or n.name in spec}}


def test_a_nodes_process_is_read_from_it_alone_by_its_id_or_by_its_name_in_one_request() -> None:
    """Just after a rejoin the whole node list took 0.1-0.25 s on the sandbox, the node's own answer 5-15 ms, and
    on 3,000 nodes the list is 4 MB. A node whose data path was wiped comes back with a new id: found by its
    name in the same request."""
    plan = plan_of([["es-1"]])
    rest = NodesRest([node("es-1", 11), node("es-2", 20)])
    assert ShardClusterAdapter(rest).live_identity(plan, "es-1") == node("es-1", 11).process_identity  # type: ignore[arg-type]
    assert rest.asked == ["/_nodes/id-es-1,es-1/jvm,process"]
    new_id = replace(node("es-1", 12), id="a-new-id")
    rest = NodesRest([new_id, node("es-2", 20)])
    assert ShardClusterAdapter(rest).live_identity(plan, "es-1") == new_id.process_identity  # type: ignore[arg-type]
    assert rest.asked == ["/_nodes/id-es-1,es-1/jvm,process"]
    rest = NodesRest([node("es-2", 20)])
    assert ShardClusterAdapter(rest).live_identity(plan, "es-1") is None  # type: ignore[arg-type]


def test_a_rejoin_is_awaited_by_one_server_side_wait_for_the_count_with_one_node_of_its_batch_back() -> None:
    """Counted from the plan (3 nodes; its batch of 1 away: 3), not from a count read now, which just after a
    stop can still include the node that left; in a zone's batch of 2, one back is 2."""
    others = [node("es-2", 20), node("es-3", 30)]
    new_es1 = node("es-1", 11)
    ids = {n: f"id-{n}" for n in ("es-1", "es-2", "es-3")}
    by_node = replace(plan_of([["es-1"], ["es-2"], ["es-3"]]), node_ids=ids)
    away = NodesRest(others, [new_es1, *others])
    assert ShardClusterAdapter(away).await_identity(by_node, "es-1", 5) == new_es1.process_identity  # type: ignore[arg-type]
    assert away.asked == ["/_nodes/id-es-1,es-1/jvm,process", "/_cluster/health", "/_nodes/id-es-1,es-1/jvm,process"]
    assert [p["wait_for_nodes"] for p in away.health_params] == [">=3"]
    by_zone = replace(plan_of([["es-1", "es-2"], ["es-3"]]), node_ids=by_node.node_ids)
    zone_away = NodesRest([node("es-3", 30)], [node("es-2", 21), node("es-3", 30)])
    assert ShardClusterAdapter(zone_away).await_identity(by_zone, "es-1", 5) is None  # type: ignore[arg-type]
    assert [p["wait_for_nodes"] for p in zone_away.health_params] == [">=2"]
    there = NodesRest([node("es-1", 10), *others])
    assert ShardClusterAdapter(there).await_identity(by_node, "es-1", 5) == node("es-1", 10).process_identity  # type: ignore[arg-type]
    assert there.health_params == []
    no_time_left = NodesRest(others)
    assert ShardClusterAdapter(no_time_left).await_identity(by_node, "es-1", 0.5) is None  # type: ignore[arg-type]
    assert no_time_left.health_params == []
    # The node was the only master: health cannot answer, node info can.
    masterless = NodesRest(others, [new_es1, *others])
    masterless.no_master = True
    assert ShardClusterAdapter(masterless).await_identity(by_node, "es-1", 5) == new_es1.process_identity  # type: ignore[arg-type]


class ScriptedRest:
    """Answers (or errors) in the order given, one per request."""

    label = "Elasticsearch"
    endpoints = ("https://x:9200",)

    def __init__(self, *answers: Any) -> None:
        self.answers = list(answers)

    def request(self, what: str, method: str, path: str, params: Any = None, body: Any = None) -> Any:
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def refused() -> Exception:
    from orchestrator.shards.rest import HttpError

    return HttpError("cluster health: https://x:9200 refused the credentials (HTTP 401)", 401)


def test_credentials_refused_after_being_accepted_are_a_cluster_without_master_and_waits_go_on() -> None:
    """Without an elected master the native realm cannot read the security index and refuses users and
    API keys with 401 (seen on the sandbox with two of three nodes stopped): mid-run that is the cluster
    briefly unavailable, which a wait rides out; refused at the first request, the credentials are wrong."""
    from orchestrator.errors import ClusterUnreachable, WaitTimeout
    from orchestrator.retry import wait_until
    from orchestrator.shards.rest import HttpError

    green = {"cluster_name": "c", "status": "green", "number_of_nodes": 3, "relocating_shards": 0,
             "initializing_shards": 0, "unassigned_shards": 0, "delayed_unassigned_shards": 0}
    wrong = ShardClusterAdapter(ScriptedRest(refused()))  # type: ignore[arg-type]
    try:
        wrong.health()
        raise AssertionError("a first 401 must be an error")
    except ClusterUnreachable:
        raise AssertionError("a first 401 is wrong credentials, not a transient error") from None
    except HttpError as exc:
        assert exc.status == 401

    clock = FakeClock()
    masterless = ShardClusterAdapter(ScriptedRest(green, refused(), refused(), green))  # type: ignore[arg-type]
    masterless.health()
    assert wait_until(lambda seen: masterless.health(), what="health", timeout_s=60, interval_s=1,
                      clock=clock) == green
    never = ShardClusterAdapter(ScriptedRest(green, *[refused()] * 200))  # type: ignore[arg-type]
    never.health()
    try:
        wait_until(lambda seen: never.health(), what="health", timeout_s=10, interval_s=1, clock=FakeClock())
        raise AssertionError("a wait that only sees 401 must time out")
    except WaitTimeout as exc:
        assert "no elected master" in str(exc) and "accepted earlier" in str(exc)


class FakeClock(Clock):
    def __init__(self) -> None:
        self.now = 0.0
        super().__init__(monotonic=lambda: self.now, sleep=self.advance)

    def advance(self, seconds: float) -> None:
        self.now += max(seconds, 0.01)


def test_a_lease_at_risk_names_its_nodes_or_their_ids_when_unnamed() -> None:
    risk = LeaseAtRisk("logs", 2, node_id="id-stop", holder_id="id-keep", retaining_seq_no=None, needed_seq_no=40,
                       size_bytes=1)
    assert risk.text({}) == "[logs][2] on id-stop: no lease, id-keep keeps >= 40"
    assert risk.text({"id-stop": "es-2", "id-keep": "es-1"}) == "[logs][2] on es-2: no lease, es-1 keeps >= 40"
