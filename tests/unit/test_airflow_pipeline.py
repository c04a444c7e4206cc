"""The post-index DAG of docs/examples, whole: its bulk load, its force-merge to at most 5 segments and its
deferred rolling restart, run by Airflow's own `dag.test()` against the fake Elasticsearch server as a
cluster (`product: fake-elasticsearch`, docs/pipelines.md), as a data engineer tests a pipeline of their
own. The same DAG runs on real nodes in tests/integration/test_airflow.py."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml

from orchestrator.testing.fake_es.model import FakeCluster
from orchestrator.testing.fake_es.server import FakeEsServer
from tests.airflow_home import dag_module

pytestmark = [pytest.mark.filterwarnings("ignore::DeprecationWarning"),
              pytest.mark.filterwarnings("ignore:Using `httpx` with `starlette.testclient` is deprecated")]
EXAMPLE = Path(__file__).parents[2] / "docs" / "examples" / "post_index_dag.py"
INDEX = "logs-2026.11.25"


def test_the_post_index_dag_loads_merges_and_restarts_a_fake_elasticsearch(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ORCHESTRATOR_STATE", str(tmp_path / "state"))
    with FakeEsServer(FakeCluster.generate(3, copies_per_node=4)) as server:
        inventory = tmp_path / "logs.yaml"
        inventory.write_text(yaml.safe_dump({
            "cluster": {"name": "logs", "product": "fake-elasticsearch", "endpoints": [server.url]},
            "ssh": {"transport": "local"}, "tuning": {"profile": "none"},
            "nodes": [{"name": n.name, "host": n.ip} for n in server.cluster.nodes.values()],
            "timeouts": {"join_s": 30, "recovery_s": 60, "poll_interval_s": 0.05}}))
        where = urlsplit(server.url)
        monkeypatch.setenv("AIRFLOW_CONN_LOGS_ES", json.dumps({  # the connection of type orchestrator, as documented
            "conn_type": "orchestrator", "host": where.hostname, "port": where.port, "schema": "http",
            "login": "loader", "password": "not-checked-by-the-fake"}))
        pids = {n.name: n.pid for n in server.cluster.nodes.values()}
        settings = copy.deepcopy(server.cluster.settings)
        module = dag_module(EXAMPLE, "post_index_dag", {"pipeline.yaml": yaml.safe_dump(
            {"conn_id": "logs_es", "inventory": str(inventory), "index": INDEX, "docs": 10000})})

        dag_run = module.dag.test()

        states = {ti.task_id: str(ti.state) for ti in dag_run.get_task_instances()}
        assert states == {"bulk_index": "success", "forcemerge": "success", "rolling_restart": "success"}, states
        index = server.cluster.indices[INDEX]
        assert sum(shard[0].docs for shard in index.shards) == 10000, "every document loaded"
        loads = server.counts.requests["PUT /_bulk"]
        assert loads >= 10, "the load left more segments than the merge's target: one per bulk request"
        assert max(c.segments for c in index.copies) == 5, "merged down to at most 5 segments per shard"
        assert {n.name: n.pid for n in server.cluster.nodes.values()} == {k: v + 10_000 for k, v in pids.items()}, \
            "each node restarted exactly once"
        assert server.cluster.settings == settings, "every setting the run changed put back"
        assert server.cluster.health()["status"] == "green"


def test_the_fake_elasticsearch_restarts_with_elasticsearch_rolling_steps_in_its_order() -> None:
    """Its playbook names its own product (a playbook is for one), and is elasticsearch-rolling otherwise."""
    from orchestrator.config.playbook import load_playbook
    from orchestrator.testing.fake_es.product import PRODUCT

    fake, real = load_playbook(PRODUCT.default_playbook, None), load_playbook("elasticsearch-rolling", None)
    assert fake.product == "fake-elasticsearch" and real.product == "elasticsearch"
    assert [s.name for s in fake.steps()] == [s.name for s in real.steps()]
    assert fake.before_run == real.before_run
