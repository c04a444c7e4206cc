"""OpenSearch as a plug-in: the product check of its client, weighted routing in zone mode (journaled,
restored exactly), and the same shard-model decisions as Elasticsearch."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml

from orchestrator import products
from orchestrator.config.playbook import load_playbook
from orchestrator.errors import ClusterError
from orchestrator.hosts.transport import LocalTransport
from orchestrator.opensearch.adapter import WEIGHTS_SCOPE, OpenSearchAdapter, weights_key
from orchestrator.opensearch.connect import OpenSearchRest
from orchestrator.opensearch.routing import restore_search_weights, weigh_away_searches, weights_without
from orchestrator.restart.context import RunContext
from orchestrator.restart.events import Event
from orchestrator.restart.journal import UndoState
from orchestrator.restart.plan import Mode
from orchestrator.restart.procedure import resolve
from orchestrator.restart.steps import restore_settings
from orchestrator.shards.connection import Connection
from orchestrator.shards.rest import HttpError
from tests.unit.journals import journal_of, plan_of
from tests.unit.snapshots import inventory

ZONES = {"id-a": "zone-1", "id-b": "zone-1", "id-c": "zone-2", "id-d": "zone-2", "id-e": "zone-3", "id-f": "zone-3"}


class RoutingCluster:
    """OpenSearch's answers for what the routing steps read and write, with its optimistic versions."""

    label = "OpenSearch"
    endpoints = ("http://x:9200",)

    def __init__(self, weights: dict[str, str] | None, awareness: str | None = "zone") -> None:
        self.weights, self.version = weights, (0 if weights else -1)
        self.awareness = awareness
        self.writes: list[tuple[str, str, Any]] = []

    def request(self, what: str, method: str, path: str, params: Any = None, body: Any = None) -> Any:
        if path == "/_cluster/settings":
            # As in opensearch.yml: a node setting, only among the defaults.
            found = {"cluster.routing.allocation.awareness.attributes": self.awareness} if self.awareness else {}
            defaults = found if params["include_defaults"] == "true" else {}
            return {"persistent": {}, "transient": {}, "defaults": defaults}
        if path.startswith("/_nodes/"):
            return {"nodes": {i: {"name": i[3:], "roles": ["cluster_manager", "data"], "attributes": {"zone": z}}
                              for i, z in ZONES.items()}}
        if path.endswith("/weights"):
            if method == "GET":
                if self.version < 0:
                    return {}  # never set
                return {"weights": self.weights or {}, "_version": self.version}
            if body.get("_version") != self.version:
                raise HttpError(f"{what}: OpenSearch answered HTTP 409: version conflict", 409)
            self.writes.append((method, path, body))
            self.weights = None if method == "DELETE" else dict(body["weights"])
            self.version += 1
            return {"acknowledged": True}
        raise AssertionError(f"unexpected request {method} {path}")


def zone_run(cluster: RoutingCluster, tmp_path: Path, mode: Mode = Mode.ZONE) -> tuple[RunContext, list[Event]]:
    plan = plan_of([["a", "b"], ["c", "d"], ["e", "f"]], product="opensearch", mode=mode)
    events: list[Event] = []
    journal = journal_of(plan, path=tmp_path / f"journal-{len(list(tmp_path.iterdir()))}.json")
    ctx = RunContext(inv=inventory(list("abcdef")), cluster=OpenSearchAdapter(cluster),  # type: ignore[arg-type]
                     transport=LocalTransport(), service=None, journal=journal,  # type: ignore[arg-type]
                     emit=events.append)
    return ctx, events


def test_weights_send_no_search_to_the_zone_leaving_and_keep_the_others() -> None:
    zones = ["zone-1", "zone-2", "zone-3"]
    assert weights_without(zones, {"zone-2"}, None) == {"zone-1": "1.0", "zone-2": "0.0", "zone-3": "1.0"}
    assert weights_without(zones, {"zone-1"}, {"zone-1": "1.0", "zone-2": "2.0", "zone-3": "1.0"}) == \
        {"zone-1": "0.0", "zone-2": "2.0", "zone-3": "1.0"}


@pytest.mark.parametrize("before", [None, {"zone-1": "1.0", "zone-2": "2.0", "zone-3": "1.0"}])
def test_zone_mode_weighs_searches_away_and_restores_the_weights_exactly(before: dict[str, str] | None,
                                                                              tmp_path: Path) -> None:
    cluster = RoutingCluster(dict(before) if before else None)
    ctx, events = zone_run(cluster, tmp_path)
    for batch in ctx.journal.batches:
        weigh_away_searches(ctx, batch)
        zone = f"zone-{batch.number}"
        assert cluster.weights is not None and cluster.weights[zone] == "0.0"
        assert all(w != "0.0" for z, w in cluster.weights.items() if z != zone), cluster.weights
        restore_search_weights(ctx, batch)
        assert cluster.weights == before
    # One undo record per batch, each with the weights from before the run, each restored.
    records = [(u.key, u.before, u.state, u.batch) for u in ctx.journal.undo if u.scope == WEIGHTS_SCOPE]
    assert records == [(weights_key("zone"), before, UndoState.RESTORED, n) for n in (1, 2, 3)]
    # No weights before the run: they are removed, not left at "1.0" everywhere.
    assert (cluster.writes[-1][0] == "DELETE") is (before is None)
    assert any("was unset" in e.message for e in events) is (before is None)


def test_an_interrupted_zone_batch_gets_its_weights_back_with_the_run_s_other_settings(tmp_path: Path) -> None:
    cluster = RoutingCluster(None)
    ctx, _ = zone_run(cluster, tmp_path)
    weigh_away_searches(ctx, ctx.journal.batches[1])
    assert cluster.weights == {"zone-1": "1.0", "zone-2": "0.0", "zone-3": "1.0"}
    restore_settings(ctx)  # what the engine does when a run ends or is aborted
    assert cluster.weights is None


def test_routing_weights_are_left_alone_in_node_mode_and_without_awareness(tmp_path: Path) -> None:
    cluster = RoutingCluster(None)
    ctx, _ = zone_run(cluster, tmp_path, Mode.NODE)
    weigh_away_searches(ctx, ctx.journal.batches[0])
    assert cluster.writes == []
    cluster = RoutingCluster(None, awareness=None)
    ctx, events = zone_run(cluster, tmp_path)
    weigh_away_searches(ctx, ctx.journal.batches[0])
    assert cluster.writes == [] and "routing weights left alone" in events[-1].message


def test_the_opensearch_playbook_loads_and_puts_the_weights_around_the_stop() -> None:
    product = products.get("opensearch")
    procedure = resolve(load_playbook(product.default_playbook), product)
    steps = [name for name, _ in procedure.batch]
    assert steps.index("weigh_away_searches") < steps.index("stop_service")
    assert steps.index("wait_for_recovery") < steps.index("restore_search_weights")
    assert "opensearch" in products.names()


class Answering(http.server.BaseHTTPRequestHandler):
    """A server's answers by path (``paths``, without the query), ``answer`` (its `GET /`) to any other."""

    answer: ClassVar[dict[str, Any]] = {}
    paths: ClassVar[dict[str, Any]] = {}

    def do_GET(self) -> None:
        path = self.path.split("?")[0]
        body = json.dumps(self.paths.get(path, self.answer)).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[tuple[str, type[Answering]]]:
    handler = type("Handler", (Answering,), {"paths": {}})
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", handler
    httpd.shutdown()
    httpd.server_close()


def test_the_opensearch_client_refuses_an_elasticsearch_server_before_any_other_request(
        server: tuple[str, type[Answering]]) -> None:
    url, handler = server
    handler.answer = {"version": {"number": "9.5.3", "build_flavor": "default"}, "tagline": "You Know, for Search"}
    rest = OpenSearchRest(Connection(endpoints=(url,)))
    with pytest.raises(ClusterError, match=r"is not OpenSearch .*set cluster.product: elasticsearch"):
        rest.request("list nodes", "GET", "/_nodes")
    handler.answer = {"version": {"number": "3.8.0", "distribution": "opensearch"}}
    assert rest.request("read the root", "GET", "/")["version"]["number"] == "3.8.0"


def test_the_elasticsearch_client_refuses_an_opensearch_server_and_names_the_product_to_set(
        server: tuple[str, type[Answering]]) -> None:
    from orchestrator.es.connect import ElasticsearchRest

    url, handler = server
    handler.answer = {"version": {"number": "3.8.0", "distribution": "opensearch"}}
    with pytest.raises(ClusterError, match=r"not an Elasticsearch 8\.x/9\.x cluster .*cluster\.product: opensearch"):
        ElasticsearchRest(Connection(endpoints=(url,))).request("list nodes", "GET", "/_nodes")


def test_an_opensearch_plan_is_the_shared_one_and_says_it_is_opensearch() -> None:
    """Runs record their product from the plan: a resumed OpenSearch run must find its own product."""
    from orchestrator.config.model import Inventory
    from orchestrator.restart.journal import RunOptions
    from tests.unit.snapshots import copies, node, snapshot

    names = ["a", "b", "c"]
    snap = snapshot([node(n, zone=f"zone-{i}") for i, n in enumerate(names, 1)],
                    copies("logs", 0, ["a", "b"]) + copies("logs", 1, ["b", "c"]), master="id-a")
    raw = inventory(names, [f"zone-{i}" for i in (1, 2, 3)]).model_dump(mode="json")
    raw["cluster"]["product"] = "opensearch"
    plans = {name: products.get(name).plan(Inventory.model_validate({**raw, "cluster": {**raw["cluster"],
                                                                                         "product": name}}),
                                            snap, Mode.ZONE, RunOptions(), ())
             for name in ("opensearch", "elasticsearch")}
    assert plans["opensearch"].product == "opensearch" and plans["elasticsearch"].product == "elasticsearch"
    assert plans["opensearch"].batches == plans["elasticsearch"].batches and plans["opensearch"].safe
    # The plan says what zone mode does to search routing (Elasticsearch has no such API).
    said = [n for n in plans["opensearch"].notes if "weighed away" in n]
    assert len(said) == 1 and "_cluster/routing/awareness/zone/weights" in said[0]
    assert not any("weighed away" in n for n in plans["elasticsearch"].notes)
    # A window's plan says it too; one node at a time, nothing is weighed.
    raw["cluster"]["product"] = "opensearch"
    windowed, single = (products.get("opensearch").plan(Inventory.model_validate(raw), snap, Mode.NODE,
                                                        RunOptions(max_unavailable=budget), ()) for budget in ("2", ""))
    assert [n for n in windowed.notes if "weighed away from the zone of the window's nodes" in n]
    assert not any("weighed away" in n for n in single.notes)


def test_discovery_recognises_an_opensearch_cluster_and_writes_its_product(server: tuple[str, type[Answering]]) -> None:
    from orchestrator.runs.discover import discover
    from tests.unit.test_discover import answers

    url, handler = server
    handler.answer = {"version": {"number": "3.8.0", "distribution": "opensearch"}}
    handler.paths = {"/_cluster/health": {"cluster_name": "search", "status": "green"},
                     "/_nodes/settings,http": answers("zone"),
                     "/_cluster/settings": {"persistent": {}, "transient": {}, "defaults": {
                         "cluster.routing.allocation.awareness.attributes": "zone"}}}
    text, _notes = discover(url, {})
    doc = yaml.safe_load(text)
    assert doc["cluster"]["product"] == "opensearch" and doc["cluster"]["name"] == "search"
    assert doc["service"] == {"manager": "systemd", "unit": "opensearch"} and doc["tuning"]["profile"] == "opensearch"
    assert [n["zone"] for n in doc["nodes"]] == ["r1", "r0", "r1"]


def test_the_sandbox_assembles_opensearch_2_and_3_each_with_what_it_needs() -> None:
    from orchestrator.errors import SandboxError
    from orchestrator.sandbox.opensearch_home import ensure_opensearch_home, pom

    three, two = pom("3.8.0"), pom("2.19.1")
    # 3.x: its Java agent (the security manager's successor) and a log4j-core of its log4j-api.
    assert "opensearch-agent-bootstrap" in three and "<version>2.25.4</version>" in three
    assert "opensearch-agent" not in two and "<version>2.21.0</version>" in two
    assert all("<version>2.19.1</version>" in two.split(a)[1].split("</dependency>")[0]
               for a in ("<artifactId>opensearch</artifactId>", "transport-netty4-client", "plugin-classloader"))
    with pytest.raises(SandboxError, match=r"2\.x and 3\.x"):
        ensure_opensearch_home("1.3.20")


def test_a_window_weighs_its_zone_away_until_its_last_node_is_back_and_keeps_it_through_a_refused_last_look(
        tmp_path: Path) -> None:
    """Two nodes of zone-1 in the window: the zone's weight is 0 from the first one's batch until the second is
    back (the first, back before it, leaves the weights alone), then exactly as before; one undo record, the run's,
    so a batch's own undo (a last look's refusal) never puts the weights back under another node away."""
    from orchestrator.restart.journal import BatchRecord, Journal, NodeRecord, RunOptions
    from tests.unit.journals import spec_of

    before = {"zone-1": "1.0", "zone-2": "2.0", "zone-3": "1.0"}
    cluster = RoutingCluster(dict(before))
    plan = plan_of([[n] for n in "abcdef"], product="opensearch", mode=Mode.NODE)
    journal = Journal(run_id="r1", cluster=plan.cluster, spec=spec_of(plan, RunOptions(max_unavailable="2")),
                      batches=[BatchRecord(b.number, b.label, list(b.nodes)) for b in plan.batches],
                      nodes={n: NodeRecord(n, b.number) for b in plan.batches for n in b.nodes},
                      path=tmp_path / "journal.json")
    events: list[Event] = []
    ctx = RunContext(inv=inventory(list("abcdef")), cluster=OpenSearchAdapter(cluster),  # type: ignore[arg-type]
                     transport=LocalTransport(), service=None, journal=journal,  # type: ignore[arg-type]
                     emit=events.append)
    a, b, c = journal.batches[:3]
    journal.begin_batch(a)
    weigh_away_searches(ctx, a)
    journal.begin_batch(b)
    weigh_away_searches(ctx, b)
    assert cluster.weights == {**before, "zone-1": "0.0"} and len(cluster.writes) == 1, cluster.writes
    restore_settings(ctx, batch=a.number)  # what a refused last look of a does: its own records only
    assert cluster.weights == {**before, "zone-1": "0.0"}, "the window's weights are the run's, not a's"
    restore_search_weights(ctx, a)  # a back, b still away
    assert cluster.weights == {**before, "zone-1": "0.0"} and "kept while b" in events[-1].message
    journal.end_batch(a)
    restore_search_weights(ctx, b)  # the last of the window back
    assert cluster.weights == before
    journal.end_batch(b)
    journal.begin_batch(c)
    weigh_away_searches(ctx, c)
    assert cluster.weights == {**before, "zone-2": "0.0"}
    restore_settings(ctx)  # the run's end
    assert cluster.weights == before
    assert [(u.before, u.batch) for u in journal.undo if u.scope == WEIGHTS_SCOPE] == [(before, None), (before, None)]
