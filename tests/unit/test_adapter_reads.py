"""The shard adapter's small reads and writes (shards/adapter.py, shards/batch_reads.py) as the tool relies on
them: which nodes and copies each read lists (through the real client against the fake Elasticsearch), and what
each request asks of the cluster (recorded), where a wrong parameter would change what the cluster answers or
does without any error."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from orchestrator.errors import ClusterError, ClusterUnreachable
from orchestrator.es.connect import ElasticsearchRest
from orchestrator.restart.lock import LOCK_INDEX
from orchestrator.shards.adapter import ShardClusterAdapter, index_setting_key, index_setting_of, settled_green
from orchestrator.shards.batch_reads import only_asked
from orchestrator.shards.connection import Connection
from orchestrator.shards.leases import STATS_FIELDS
from orchestrator.shards.rest import HttpError
from orchestrator.shards.settled import MAX_EXPLAINED
from orchestrator.shards.snapshot import ShardCopy
from orchestrator.testing.fake_es.model import FakeCluster
from orchestrator.testing.fake_es.server import FakeEsServer
from tests.unit.fake_rest import RecordingRest
from tests.unit.journals import plan_of


@pytest.fixture(scope="module")
def fake() -> Iterator[tuple[FakeCluster, ShardClusterAdapter]]:
    cluster = FakeCluster.generate(12, copies_per_node=4, zones=3)  # 3 dedicated masters, 9 data nodes
    with FakeEsServer(cluster) as server:
        yield cluster, over_http(server)


def over_http(server: FakeEsServer) -> ShardClusterAdapter:
    """The adapter as a run makes it: the real client, to the fake's one endpoint."""
    return ShardClusterAdapter(ElasticsearchRest(Connection((server.url,))))


def test_a_batch_s_nodes_are_read_alone_and_none_asked_for_reads_nothing(
        fake: tuple[FakeCluster, ShardClusterAdapter]) -> None:
    cluster, adapter = fake
    wanted = [cluster.by_name["es-4"].id, cluster.by_name["es-9"].id]
    read = adapter.nodes_by_id(wanted)
    assert sorted(n.name for n in read) == ["es-4", "es-9"]
    assert {n.version for n in read} == {cluster.version} and all(n.process_id for n in read)
    before = adapter.calls
    assert adapter.nodes_by_id([]) == [] and adapter.calls == before, "no request for no node"


def test_zones_and_master_eligible_nodes_list_every_node_of_the_cluster_that_is_one(
        fake: tuple[FakeCluster, ShardClusterAdapter]) -> None:
    cluster, adapter = fake
    assert adapter.zones() == {n.id: n.zone for n in cluster.nodes.values()}
    assert len(set(adapter.zones().values())) == 3
    masters = adapter.master_eligible()
    assert sorted(n.name for n in masters) == ["es-1", "es-2", "es-3"]
    assert all(n.is_master_eligible for n in masters)


class Asked(RecordingRest):
    """Records each request whole; answers what the test sets per path."""

    def __init__(self, answers: dict[str, Any] | None = None) -> None:
        super().__init__()
        self.requests: list[tuple[str, str, Any, Any]] = []
        self.whats: list[str] = []  # what each request is, as an error of the cluster names it
        self.answers = answers or {}

    def answer(self, what: str, method: str, path: str, params: Any, body: Any) -> Any:
        self.requests.append((method, path, params, body))
        self.whats.append(what)
        found = self.answers.get(path, self.answers.get("*", {}))
        if isinstance(found, Exception):
            raise found
        return found(path, params, body) if callable(found) else found


def test_the_search_probe_is_timed_on_the_nodes_not_on_the_request_cache_and_sends_no_hits_back() -> None:
    rest = Asked()
    query = {"match": {"title": "restart"}}
    assert ShardClusterAdapter(rest).search_once("logs 2026/11", query) is True
    assert rest.requests == [("POST", "/logs%202026%2F11/_search",
                              {"request_cache": "false", "size": "0", "filter_path": "took"}, {"query": query})]
    assert rest.whats == ["search logs 2026/11 (the search probe)"], "how a failed probe is named to the operator"


@pytest.mark.parametrize(("answer", "records"), [
    (HttpError("no such API", 400), None),  # a cluster without the shutdown API refuses the path
    ({"cluster_name": "x", "nodes": {"abc": {"name": "shutdown"}}}, None),  # node info of a node named 'shutdown'
    ({"nodes": [{"node_id": "a", "type": "RESTART"}, "junk", {"node_id": "b", "type": "REMOVE"}]},
     [{"node_id": "a", "type": "RESTART"}, {"node_id": "b", "type": "REMOVE"}]),
    ({"nodes": []}, []),
    ([], None),
])
def test_shutdown_records_are_the_shutdown_api_s_records_or_none_without_it(answer: Any, records: Any) -> None:
    assert ShardClusterAdapter(Asked({"/_nodes/shutdown": answer})).shutdown_records() == records


def test_a_setting_goes_to_its_own_scope_and_an_unknown_scope_is_refused_before_any_request() -> None:
    rest = Asked()
    adapter = ShardClusterAdapter(rest)
    adapter.put_settings("transient", {"cluster.routing.allocation.enable": "primaries"})
    adapter.put_settings("persistent", {"indices.recovery.max_bytes_per_sec": None, "a.b": "1"})
    assert rest.requests == [
        ("PUT", "/_cluster/settings", None, {"transient": {"cluster.routing.allocation.enable": "primaries"}}),
        ("PUT", "/_cluster/settings", None, {"persistent": {"indices.recovery.max_bytes_per_sec": None, "a.b": "1"}})]
    assert rest.whats == ["set cluster.routing.allocation.enable", "set indices.recovery.max_bytes_per_sec, a.b"], \
        "a write the cluster refuses is named by the settings it writes"
    with pytest.raises(ClusterError, match=r"^cannot write a setting in scope 'defaults'$"):
        adapter.put_settings("defaults", {"x": "1"})
    assert len(rest.requests) == 2


def test_index_settings_are_put_once_per_setting_and_value_and_unavailable_indices_are_skipped() -> None:
    rest = Asked()
    delay = "index.unassigned.node_left.delayed_timeout"
    values = {index_setting_key("b", delay): "10m", index_setting_key("a", delay): "10m",
              index_setting_key("c", delay): None, index_setting_key("a", "index.priority"): "5"}
    ShardClusterAdapter(rest).put_settings("index", values)
    assert sorted(rest.requests, key=str) == sorted([
        ("PUT", "/a,b/_settings", {"ignore_unavailable": "true"}, {delay: "10m"}),
        ("PUT", "/c/_settings", {"ignore_unavailable": "true"}, {delay: None}),
        ("PUT", "/a/_settings", {"ignore_unavailable": "true"}, {"index.priority": "5"})], key=str)
    assert sorted(rest.whats) == ["set index.priority of 1 indices", f"set {delay} of 1 indices",
                                  f"set {delay} of 2 indices"], "a refused write names its setting and reach"
    assert index_setting_of(index_setting_key("logs-1", delay)) == ("logs-1", delay)


def test_each_index_s_own_value_of_a_setting_is_read_and_none_where_it_has_none() -> None:
    delay = "index.unassigned.node_left.delayed_timeout"
    answer = {"a": {"settings": {"index": {"uuid": "u1", "unassigned": {"node_left": {"delayed_timeout": "5m"}}}}},
              "b": {"settings": {"index": {"uuid": "u2"}}}}
    rest = Asked({"/_all/_settings": answer})
    assert ShardClusterAdapter(rest).index_settings_of(delay) == {"a": "5m", "b": None}
    assert rest.requests == [("GET", "/_all/_settings",
                              {"filter_path": f"*.settings.index.uuid,*.settings.{delay}"}, None)]
    for not_settings in (None, ["not", "an", "object"]):  # listed, yet without its settings: never "none"
        with pytest.raises(ClusterError, match=f"^read the indices' {delay}: .*c is listed with "
                                               f"{re.escape(repr(str(not_settings)))}, not its settings"):
            ShardClusterAdapter(Asked({"/_all/_settings": {**answer, "c": not_settings}})).index_settings_of(delay)
    answer["a"]["settings"]["index"]["unassigned"]["node_left"]["delayed_timeout"] = 60
    with pytest.raises(ClusterError, match=r"read the indices' index.unassigned.node_left.delayed_timeout: .*"
                                           r"index.unassigned.node_left.delayed_timeout of a is '60'"):
        ShardClusterAdapter(rest).index_settings_of(delay)


@pytest.mark.parametrize(("status", "initializing", "relocating", "settled"), [
    ("green", 0, 0, True), ("green", 1, 0, False), ("green", 0, 2, False), ("yellow", 0, 0, False),
    ("red", 0, 0, False)])
def test_settled_green_is_green_with_nothing_initializing_or_relocating(
        status: str, initializing: int, relocating: int, settled: bool) -> None:
    assert settled_green({"status": status, "initializing_shards": initializing,
                          "relocating_shards": relocating}) is settled


def test_the_health_summary_says_the_status_nodes_and_copies_moving_in_one_line() -> None:
    health = {"cluster_name": "c", "status": "yellow", "number_of_nodes": 5, "initializing_shards": 2,
              "relocating_shards": 1, "unassigned_shards": 3, "number_of_data_nodes": 4}
    summary = ShardClusterAdapter(Asked({"/_cluster/health": health})).health_summary()
    assert summary == {"status": "yellow", "number_of_nodes": 5, "initializing_shards": 2, "relocating_shards": 1,
                       "unassigned_shards": 3, "text": "yellow, 5 nodes, 2 initializing, 3 unassigned"}


def unassigned(index: str, shard: int, primary: bool) -> ShardCopy:
    return ShardCopy(index=index, shard=shard, primary=primary, state="UNASSIGNED", node_id=None, size_bytes=0)


def explained(index: str, shard: int, primary: bool, why: str) -> dict[str, Any]:
    return {"index": index, "shard": shard, "primary": primary, "current_state": "unassigned",
            "unassigned_info": {"reason": why, "last_allocation_status": "no_attempt"},
            "can_allocate": "allocation_delayed" if why == "NODE_LEFT" else "no",
            "allocate_explanation": "allocation is restricted"}


def test_unassigned_copies_are_explained_once_per_shard_and_role_and_one_gone_meanwhile_is_passed_over() -> None:
    copies = [unassigned("a", 0, False), unassigned("a", 0, False), unassigned("a", 1, True),
              unassigned("b", 0, False)]
    asked = []

    def explain(_path: str, _params: Any, body: dict[str, Any]) -> Any:
        asked.append((body["index"], body["shard"], body["primary"]))
        if (body["index"], body["shard"]) == ("a", 1):  # assigned since the health read: the look goes on
            raise HttpError("unable to find any unassigned shards to explain", 400)
        return explained(body["index"], body["shard"], body["primary"], "NODE_LEFT")

    rest = Asked({"/_cluster/allocation/explain": explain})
    out = ShardClusterAdapter(rest).explain_unassigned(copies)
    assert asked == [("a", 0, False), ("a", 1, True), ("b", 0, False)]
    assert set(rest.whats) == {"explain an unassigned shard"}, "what an operator reads if the cluster refuses one"
    assert [(c.index, c.shard, c.primary, c.copies) for c in out] == [("a", 0, False, 2), ("b", 0, False, 1)], \
        "the copies after one gone meanwhile are still explained (why each waits, for the operator)"


def test_an_explain_answer_that_is_not_one_is_the_cluster_s_error_and_an_unreachable_cluster_stops_the_look() -> None:
    copies = [unassigned("a", 0, False)]
    for answer, error in (([], r"explain an unassigned shard: .*\(not an object\)"),
                          ({"unassigned_info": 5}, r"explain an unassigned shard: .*\((AttributeError|TypeError)")):
        with pytest.raises(ClusterError, match=error):
            ShardClusterAdapter(Asked({"/_cluster/allocation/explain": answer})).explain_unassigned(copies)
    gone = ClusterUnreachable("no node answers")
    with pytest.raises(ClusterUnreachable):
        ShardClusterAdapter(Asked({"/_cluster/allocation/explain": gone})).explain_unassigned(copies)


def test_the_explained_copies_are_at_most_the_limit_and_stop_at_the_first_that_blocks_a_planned_node() -> None:
    many = [unassigned(f"i{n:03d}", 0, False) for n in range(MAX_EXPLAINED + 5)]
    rest = Asked({"/_cluster/allocation/explain": lambda _p, _q, body: explained(body["index"], 0, False, "NODE_LEFT")})
    assert len(ShardClusterAdapter(rest).explain_unassigned(many)) == MAX_EXPLAINED
    assert len(rest.requests) == MAX_EXPLAINED
    # With the planned nodes: a copy waiting for a node of another run's does not block and the look goes on; one
    # waiting for a planned node blocks (that node's copies come back first), and one is enough: it stops there.
    copies = [unassigned("a", 0, False), unassigned("b", 0, False), unassigned("c", 0, False)]
    left = {"a": "elsewhere", "b": "planned-1", "c": "planned-2"}

    def explain(_path: str, _params: Any, body: dict[str, Any]) -> Any:
        return {**explained(body["index"], 0, False, "NODE_LEFT"),
                "unassigned_info": {"reason": "NODE_LEFT", "details": f"node_left [{left[body['index']]}]"}}
    rest = Asked({"/_cluster/allocation/explain": explain})
    out = ShardClusterAdapter(rest).explain_unassigned(copies, until_blocking={"planned-1", "planned-2"})
    assert [(c.index, c.left_node) for c in out] == [("a", "elsewhere"), ("b", "planned-1")]
    assert [body["index"] for _, _, _, body in rest.requests] == ["a", "b"]


def test_the_lease_figures_of_a_batch_s_indices_are_theirs_alone_read_in_chunks_and_merged(
        fake: tuple[FakeCluster, ShardClusterAdapter]) -> None:
    cluster, adapter = fake
    two = sorted(cluster.indices)[:2]
    read = adapter.lease_stats_of(two)["indices"]
    assert sorted(read) == two
    for index in two:
        held = {(int(n), c["routing"]["node"]) for n, copies in read[index]["shards"].items() for c in copies}
        assert held == {(c.shard, c.node) for c in cluster.indices[index].copies}
    # Names past what one request line holds: one request per chunk, every index's figures in the answer.
    many = [f"index-{n:04d}-{'x' * 40}" for n in range(300)]
    rest = Asked({"*": lambda path, _q, _b: {"indices": {name: {"shards": {}} for name in
                                                           path.split("/")[1].split(",")}}})
    merged = ShardClusterAdapter(rest).lease_stats_of(many)["indices"]
    assert sorted(merged) == many and len(rest.requests) > 1
    assert all(params == {"level": "shards", "ignore_unavailable": "true", "filter_path": STATS_FIELDS}
               and path.endswith("/_stats/docs,store") for _, path, params, _ in rest.requests)


def test_recoveries_are_read_as_text_and_again_as_json_when_a_node_s_name_holds_a_space() -> None:
    text = ("a 0 peer done 40 40 100 1700000000000 es-1 es-2\n"
            "a 1 existing_store done 0 0 100 1700000000001 es-3 n/a\n")
    rest = Asked({"/_cat/recovery/a": lambda _p, params, _b: text if params["format"] == "txt" else []})
    assert ShardClusterAdapter(rest).recoveries_of(["a"], ["es-1"]) == [
        {"index": "a", "shard": 0, "type": "PEER", "stage": "DONE", "target": "es-1", "source": "es-2",
         "start_ms": 1700000000000, "total_bytes": 100, "reused_bytes": 60, "recovered_bytes": 40}]
    assert rest.requests == [("GET", "/_cat/recovery/a", {"bytes": "b", "active_only": "false", "format": "txt",
                                                          "h": "i,s,ty,st,b,br,tb,start_millis,tnode,snode",
                                                          "ignore_unavailable": "true"}, None)]
    rows = [{"i": "a", "s": "0", "ty": "peer", "st": "index", "b": "100", "br": "10", "tb": "100",
             "start_millis": "5", "tnode": "es 1", "snode": "es 2"},
            {"i": "a", "s": "1", "ty": "peer", "st": "done", "tb": "7", "tnode": "es 3"}, "junk"]
    spaced = Asked({"/_cat/recovery/a": lambda _p, params, _b: "a 0 peer index 100 10 100 5 es 1 es 2\n"
                    if params["format"] == "txt" else rows})
    assert ShardClusterAdapter(spaced).recoveries_of(["a"], ["es 1"], active_only=True) == [
        {"index": "a", "shard": 0, "type": "PEER", "stage": "INDEX", "target": "es 1", "source": "es 2",
         "start_ms": 5, "total_bytes": 100, "reused_bytes": 0, "recovered_bytes": 10}]
    assert [(params["format"], params["active_only"]) for _, _, params, _ in spaced.requests] == [
        ("txt", "true"), ("json", "true")]
    wrong = Asked({"/_cat/recovery/a": lambda _p, params, _b: "a b c\n" if params["format"] == "txt" else {}})
    with pytest.raises(ClusterError, match=r"read recoveries: .*\(a list of rows was expected, not dict\)"):
        ShardClusterAdapter(wrong).recoveries_of(["a"], ["es-1"])


def test_an_answer_naming_a_node_not_asked_for_is_not_the_cluster_s_and_no_node_asked_reads_nothing() -> None:
    assert only_asked(["a"], ["a", "b"], "read") == {"a"}
    with pytest.raises(ClusterError, match=r"^read the batch: .*\(it lists 1 node\(s\) that were not asked for\)"):
        only_asked(["a", "c"], ["a", "b"], "read the batch")
    rest = Asked()
    adapter = ShardClusterAdapter(rest)
    assert adapter.copies_held([]) == [] and adapter.held_by([]) == {} and rest.requests == []


def test_the_copies_the_master_assigns_a_batch_s_nodes_are_theirs_alone_without_the_lock_s() -> None:
    cluster = FakeCluster.generate(4, copies_per_node=3)
    cluster.create_index(LOCK_INDEX, 1, 1, hidden=True)
    ids = [cluster.by_name["es-2"].id, cluster.by_name["es-3"].id]
    on_the_nodes = sorted((c.index, c.shard, c.primary, c.state, c.node) for index in cluster.indices.values()
                          for c in index.copies if c.node in ids and index.name != LOCK_INDEX)
    with FakeEsServer(cluster) as server:
        adapter = over_http(server)
        got = adapter.assigned_to(ids)
        assert sorted((c.index, c.shard, c.primary, c.state, c.node_id) for c in got) == on_the_nodes
        assert on_the_nodes and {c.primary for c in got} == {True, False} and {c.size_bytes for c in got} == {0}
        assert any(c.node in ids for c in cluster.indices[LOCK_INDEX].copies), "the lock's copies were there"
        assert sorted(adapter.indices_on(ids)) == sorted({index for index, *_ in on_the_nodes})
    # Each request names its chunk of nodes in the filter (joined by commas), and an answer naming another node
    # is refused with what was read.
    rest = Asked({"/_cluster/state/routing_nodes": lambda _p, params, _b: {"routing_nodes": {"nodes": {
        field.rsplit(".", 1)[1]: [{"index": "a", "shard": 0, "state": "STARTED", "primary": True}]
        for field in params["filter_path"].split(",")}}}})
    many = [f"node-{n:03d}-{'x' * 20}" for n in range(200)]
    copies = ShardClusterAdapter(rest).assigned_to(many)
    assert sorted(c.node_id for c in copies) == many and len(rest.requests) > 1
    assert set(rest.whats) == {"list the copies the master assigns the batch's nodes"}
    assert all(len(params["filter_path"]) <= 3000 for _, _, params, _ in rest.requests)
    other = Asked({"/_cluster/state/routing_nodes": {"routing_nodes": {"nodes": {"b": []}}}})
    with pytest.raises(ClusterError, match=r"^list the copies the master assigns the batch's nodes: .*"
                                           r"\(it lists 1 node\(s\) that were not asked for\)"):
        ShardClusterAdapter(other).assigned_to(["a"])
    wrong = Asked({"/_cluster/state/routing_nodes": {"routing_nodes": {"nodes": {"a": [{"index": "x"}]}}}})
    with pytest.raises(ClusterError, match=r"^list the copies the master assigns the batch's nodes: "):
        ShardClusterAdapter(wrong).assigned_to(["a"])


def test_a_flush_waits_for_one_under_way_and_passes_over_indices_gone_meanwhile() -> None:
    rest = Asked()
    ShardClusterAdapter(rest).flush_indices(["b", "a"])
    assert rest.requests == [("POST", "/a,b/_flush", {"allow_no_indices": "true", "ignore_unavailable": "true",
                                                      "wait_if_ongoing": "true"}, None)]
    assert rest.whats == ["flush"]


def test_independent_reads_are_all_in_flight_at_once_answered_in_order_the_first_error_raised() -> None:
    """`read_together` sends every read at once, however many (a batch's reads wait on the slowest, not on a
    queue of them): 40 reads that each wait for all the others finish; a pool capped below 40 would leave some
    waiting for a thread that never frees."""
    import threading

    from orchestrator.shards.adapter import read_together

    everyone = threading.Barrier(40, timeout=10)

    def read(i: int) -> Any:
        return lambda: (everyone.wait(), i)[1]

    assert read_together(*(read(i) for i in range(40))) == list(range(40))

    def failing(what: str) -> Any:
        def read() -> None:
            raise ClusterError(what)
        return read

    with pytest.raises(ClusterError, match="the first"):
        read_together(lambda: 1, failing("the first"), failing("the second"))


def test_only_a_yellow_with_nothing_moving_has_its_unassigned_copies_explained() -> None:
    """What the plan reads: a settled yellow's unassigned copies, each explained (shards/settled.py: a yellow
    whose every copy waits for its own node passes); not while copies move (the yellow is not settled yet:
    the gate waits), and not when green (nothing to explain)."""
    cluster = FakeCluster.generate(6, copies_per_node=4)
    with FakeEsServer(cluster) as server:
        adapter = over_http(server)

        def explained_now() -> tuple[str, int, int]:
            server.counts.reset()
            snap = adapter.snapshot()
            asked = server.counts.as_json()["requests"].get("POST /_cluster/allocation/explain", 0)
            return snap.health.status, len(snap.unassigned), asked

        assert explained_now() == ("green", 0, 0)
        # The rest of what only the plan reads is in its snapshot too: the cluster's name and its settings.
        cluster.settings["persistent"]["cluster.routing.allocation.enable"] = "primaries"
        snap = adapter.snapshot()
        assert (snap.cluster_name, snap.persistent.get("cluster.routing.allocation.enable")) == \
            (cluster.name, "primaries")
        elected = cluster.elected_master()
        assert elected is not None and snap.master_id == elected.id
        server.forge["GET /_cluster/health"] = lambda answer: {  # a health that does not say: none delayed
            k: v for k, v in answer.items() if k != "delayed_unassigned_shards"}
        assert adapter.snapshot().health.delayed_unassigned_shards == 0
        server.forge.pop("GET /_cluster/health")
        cluster.settings["persistent"].pop("cluster.routing.allocation.enable")
        cluster.stop("es-2")  # its replicas unassigned, waiting for it: nothing moves
        status, unassigned, asked = explained_now()
        assert (status, unassigned > 0, asked > 0) == ("yellow", True, True)
        # A batch's gate explains them too, and names the elected master; a window's does not: the yellow is
        # the window's own making.
        names = sorted(cluster.by_name)
        plan = replace(plan_of([[n] for n in names]), node_ids={n: cluster.by_name[n].id for n in names})
        for window in (None, ["es-2"]):
            server.counts.reset()
            gate = adapter.gate_snapshot(plan, ("es-3",), window=window)
            asked = server.counts.as_json()["requests"].get("POST /_cluster/allocation/explain", 0)
            assert (bool(gate.unassigned), asked > 0, gate.master_id) == (not window, not window, elected.id)
        for moving in ("initializing_shards", "relocating_shards"):  # a copy on its way: not settled yet
            server.forge["GET /_cluster/health"] = lambda answer, moving=moving: {
                **answer, moving: 1, "delayed_unassigned_shards": 2}
            assert explained_now() == ("yellow", 0, 0)
            health = adapter.snapshot().health  # each of health's figures as it said them
            assert (getattr(health, moving), health.delayed_unassigned_shards, health.unassigned_shards > 0) == \
                (1, 2, True)
            assert (health.initializing_shards + health.relocating_shards) == 1


def test_the_reads_of_the_nodes_ask_only_for_the_fields_they_use() -> None:
    """What a node's zone, the master-eligible nodes, a batch's nodes and the search figures cost the cluster:
    each read asks only for its fields (`filter_path`), less than the whole answer of the same request, which
    grows with every node's settings, plugins and stats (issue 47: reads bounded by what is decided)."""
    cluster = FakeCluster.generate(12, copies_per_node=4, zones=3)
    with FakeEsServer(cluster) as server:
        adapter = over_http(server)
        ids = [cluster.by_name["es-4"].id, cluster.by_name["es-9"].id]

        def read_bytes(read: Any) -> int:
            server.counts.reset()
            read()
            return sum(server.counts.as_json()["bytes"].values())

        plan = replace(plan_of([["es-4"]]), node_ids={n.name: n.id for n in cluster.nodes.values()})
        flat = {"flat_settings": "true"}
        for read, path, asked in (
                (adapter.zones, "/_nodes/_all/none", {}), (adapter.master_eligible, "/_nodes/master:true/none", {}),
                (lambda: adapter.absent(plan), "/_nodes/_all/none", {}),
                (lambda: adapter.nodes_by_id(ids), f"/_nodes/{','.join(ids)}/jvm,process,settings,os", flat),
                (adapter.search_counters, "/_nodes/stats/indices,thread_pool/search", {})):
            # The whole answer to the same request, its other parameters kept (flat settings are shorter).
            whole = read_bytes(lambda path=path, asked=asked: adapter._do("the whole answer", "GET", path, asked))
            assert read_bytes(read) * 3 < whole * 2, (read, path)


@pytest.mark.parametrize(("read", "what"), [
    (lambda adapter: adapter.nodes_by_id(["a1", "b2"]), "read the batch's nodes"),
    (lambda adapter: adapter.zones(), "list the nodes' zones"),
    (lambda adapter: adapter.master_eligible(), "list the master-eligible nodes"),
    (lambda adapter: adapter.master_id(), "find elected master"),
    (lambda adapter: adapter.search_counters(), "read the nodes' search figures"),
    (lambda adapter: adapter.absent(plan_of([["es-1"]])), "list the nodes in the cluster"),
])
def test_an_answer_of_another_shape_to_a_read_of_the_nodes_is_the_cluster_s_error_naming_that_read(
        read: Any, what: str) -> None:
    """What the operator reads when a proxy answers in the cluster's place: which read got the strange answer.
    Each is a GET (a node refuses another method's name, `get` too: methods are case-sensitive)."""
    rest = Asked({"*": ["not", "an", "answer"]})
    with pytest.raises(ClusterError) as refused:
        read(ShardClusterAdapter(rest))
    assert str(refused.value).startswith(f"{what}: the cluster's answer is not what Elasticsearch or OpenSearch"), \
        refused.value
    assert rest.whats == [what] and [r[0] for r in rest.requests] == ["GET"]


def test_the_nodes_of_the_plan_the_cluster_does_not_list_are_absent() -> None:
    cluster = FakeCluster.generate(6, copies_per_node=2)
    plan = replace(plan_of([["es-4"], ["es-5"]]), node_ids={n.name: n.id for n in cluster.nodes.values()})
    with FakeEsServer(cluster) as server:
        adapter = over_http(server)
        assert adapter.absent(plan) == []
        cluster.stop("es-5")
        cluster.stop("es-2")
        assert adapter.absent(plan) == ["es-2", "es-5"]


def test_a_node_s_own_recovery_settings_are_read_as_its_settings_file_sets_them() -> None:
    """A node whose elasticsearch.yml sets its own recovery rate: the plan and a batch's reads see it (the run's
    limits are chosen knowing it), read flat as the node reports them (`flat_settings`; nested, they are missed)."""
    cluster = FakeCluster.generate(4, copies_per_node=2)
    node = cluster.by_name["es-2"]
    node.config = {"indices.recovery.max_bytes_per_sec": "250mb", "node.bandwidth.recovery.network": "1gb"}
    with FakeEsServer(cluster) as server:
        adapter = over_http(server)
        expected = (("indices.recovery.max_bytes_per_sec", "250mb"), ("node.bandwidth.recovery.network", "1gb"))
        assert {n.name: n.recovery_settings for n in adapter.nodes()}["es-2"] == expected
        assert [n.recovery_settings for n in adapter.nodes_by_id([node.id])] == [expected]
        assert {n.name: n.recovery_settings for n in adapter.nodes()}["es-1"] == ()
