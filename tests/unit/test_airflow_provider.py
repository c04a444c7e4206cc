"""The package as an Airflow provider: found by Airflow's providers manager through its entry point, with its
connection type, form fields and hook; a connection of that type read as the inventory's `cluster:` keys."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import tests.airflow_home  # noqa: F401  (before Airflow: its home and database)
from orchestrator.airflow_provider.provider_info import CONN_TYPE, PACKAGE, get_provider_info

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def test_the_provider_info_is_what_airflow_accepts_under_the_distributions_own_name() -> None:
    import importlib.metadata

    import airflow
    import jsonschema
    from packaging.utils import canonicalize_name

    schema = json.loads((Path(airflow.__file__).parent / "provider_info.schema.json").read_text())
    info = get_provider_info()
    jsonschema.validate(info, schema)
    # Airflow raises, for every provider at once, when a provider's name is not its distribution's.
    assert info["package-name"] == canonicalize_name(importlib.metadata.metadata("rolling-orchestrator")["Name"])
    entry = [e for e in importlib.metadata.entry_points(group="apache_airflow_provider") if e.dist is not None
             and canonicalize_name(e.dist.metadata["Name"]) == PACKAGE]
    assert [e.load() for e in entry] == [get_provider_info], "the installed entry point is this function"


def test_airflow_lists_the_provider_its_connection_type_form_fields_and_hook() -> None:
    from airflow.providers_manager import ProvidersManager
    from airflow.sdk.providers_manager_runtime import ProvidersManagerTaskRuntime

    manager = ProvidersManager()  # the API server's: the UI's form
    assert PACKAGE in manager.providers
    hook = ProvidersManagerTaskRuntime().hooks[CONN_TYPE]  # a task's
    assert hook is not None and hook.hook_class_name == "orchestrator.airflow_provider.hooks.OrchestratorHook"
    assert hook.connection_id_attribute_name == "orchestrator_conn_id"
    widgets = manager.connection_form_widgets
    for field in ("inventory", "endpoints", "api_key", "ca_file", "verify_certs", "request_timeout_s"):
        assert f"extra__{CONN_TYPE}__{field}" in widgets, field
    assert widgets[f"extra__{CONN_TYPE}__api_key"].is_sensitive, "the API key is masked"
    assert not widgets[f"extra__{CONN_TYPE}__inventory"].is_sensitive


def test_airflows_own_command_lists_the_provider() -> None:
    listed = subprocess.run([str(Path(sys.executable).with_name("airflow")), "providers", "list", "-o", "json"],
                            capture_output=True, text=True, timeout=120, env={**os.environ})
    assert listed.returncode == 0, listed.stderr[-2000:]
    assert PACKAGE in [p["package_name"] for p in json.loads(listed.stdout)]


def test_a_connection_of_the_providers_type_from_an_environment_variable_is_read_by_its_hook(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from orchestrator.airflow_provider.hooks import OrchestratorHook

    monkeypatch.setenv("AIRFLOW_CONN_PROD_ES", json.dumps({
        "conn_type": CONN_TYPE, "host": "es1.example,es2.example", "port": 9200, "schema": "https",
        "login": "orchestrator", "password": "s3cret",
        # As the form keeps its fields, prefixed; one left empty is not given.
        "extra": {"extra__orchestrator__inventory": "/etc/orchestrator/prod.yaml", "verify_certs": False,
                  "extra__orchestrator__ca_file": ""}}))
    keys, inventory = OrchestratorHook("prod_es").cluster_keys()
    assert inventory == "/etc/orchestrator/prod.yaml"
    assert keys["endpoints"] == ["https://es1.example:9200", "https://es2.example:9200"]
    assert keys["username"] == "orchestrator" and keys["verify_certs"] is False and "ca_file" not in keys
    assert os.environ[keys["password"]["env"]] == "s3cret", "the secret is named, its value in the environment"


def test_airflows_example_dag_discovery_finds_the_distributions_module_and_logs_no_error(
        caplog: pytest.LogCaptureFixture) -> None:
    """Issue 60: Airflow 3.3 imports each provider's distribution name as a module to look for example DAGs; for
    `rolling-orchestrator` there was none, and every DAG parse of a default install logged an ERROR with a
    traceback. Airflow's own discovery, run here, now finds `rolling_orchestrator` (with no example DAGs)."""
    import logging

    from airflow.dag_processing.bundles import manager

    found: list[object] = []
    with caplog.at_level(logging.ERROR):
        manager._add_provider_example_dags_to_bundle(found)  # type: ignore[arg-type]
    assert not [r for r in caplog.records if "rolling_orchestrator" in r.getMessage()], caplog.text
    assert not any("rolling-orchestrator" in str(getattr(b, "name", "")) for b in found)


def test_a_connection_test_asks_the_cluster_what_it_is_and_says_why_not_when_it_cannot(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 60: `airflow connections test` (and the UI's Test button) call the hook's `test_connection`: against
    the fake Elasticsearch it names the product, the cluster and its nodes; against a port nothing listens on it
    fails saying why, never with a traceback."""
    import socket

    from orchestrator.airflow_provider.hooks import OrchestratorHook
    from orchestrator.testing.fake_es.model import FakeCluster
    from orchestrator.testing.fake_es.server import FakeEsServer

    with FakeEsServer(FakeCluster.generate(3, copies_per_node=2)) as server:
        host, port = server.url.removeprefix("http://").rsplit(":", 1)
        monkeypatch.setenv("AIRFLOW_CONN_FAKE_ES", json.dumps({"conn_type": CONN_TYPE, "host": host, "port": int(port),
                                                              "schema": "http", "login": "u", "password": "p"}))
        ok, said = OrchestratorHook("fake_es").test_connection()
    assert ok and said == "elasticsearch cluster fake: 3 node(s) answered", said
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        closed = unused.getsockname()[1]
    monkeypatch.setenv("AIRFLOW_CONN_NOBODY", json.dumps({"conn_type": CONN_TYPE, "host": "127.0.0.1", "port": closed,
                                                          "schema": "http", "extra": {"request_timeout_s": 2}}))
    ok, said = OrchestratorHook("nobody").test_connection()
    assert not ok and "127.0.0.1" in said, said
