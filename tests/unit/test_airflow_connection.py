"""An Airflow Connection's fields as the inventory's `cluster:` keys: secrets only by variable name."""

from __future__ import annotations

import pytest

from orchestrator.airflow_provider.connection import ConnectionFields, cluster_keys, inventory_of, secret_variable
from orchestrator.errors import ConfigError


def test_a_user_and_password_become_keys_and_the_password_a_variable_of_this_process() -> None:
    environ: dict[str, str] = {}
    keys = cluster_keys(ConnectionFields("logs-prod", host="es-1.example,es-2.example", port=9200, login="orch",
                                         password="s3cret", extra={"ca_file": "/etc/ca.pem"}), environ)
    assert keys == {"endpoints": ["https://es-1.example:9200", "https://es-2.example:9200"], "username": "orch",
                    "password": {"env": secret_variable("logs-prod", "PASSWORD")}, "ca_file": "/etc/ca.pem"}
    assert environ == {secret_variable("logs-prod", "PASSWORD"): "s3cret"}
    assert secret_variable("logs-prod", "PASSWORD").startswith("ORCHESTRATOR_AIRFLOW_LOGS_PROD_")
    assert "s3cret" not in repr(keys)


def test_an_api_key_and_listed_endpoints_and_the_inventory_path_come_from_the_extra() -> None:
    environ: dict[str, str] = {}
    fields = ConnectionFields("c", schema="http", extra={"api_key": "k", "endpoints": ["http://10.0.0.1:9200"],
                                                          "inventory": "/etc/orchestrator/logs.yaml"})
    assert cluster_keys(fields, environ) == {"endpoints": ["http://10.0.0.1:9200"],
                                             "api_key": {"env": secret_variable("c", "API_KEY")}}
    assert environ[secret_variable("c", "API_KEY")] == "k"
    assert inventory_of(fields) == "/etc/orchestrator/logs.yaml"


@pytest.mark.parametrize(("fields", "said"), [
    (ConnectionFields("c", host="h", schema="ftp"), "schema 'ftp'"),
    (ConnectionFields("c", extra={"pasword": "x"}), "extra.pasword: unknown key"),
    (ConnectionFields("c", extra={"endpoints": 9200}), "extra.endpoints: give a list"),
    (ConnectionFields("c", extra={"verify_certs": "no"}), "extra.verify_certs: give true or false"),
    (ConnectionFields("c", extra={"verify_certs": 0}), "extra.verify_certs: give true or false"),
    (ConnectionFields("c", extra={"request_timeout_s": "30"}), "extra.request_timeout_s: give a number"),
    (ConnectionFields("c", extra={"request_timeout_s": True}), "extra.request_timeout_s: give a number"),
    # L6 (issue 56): an extra that is a JSON list gave an AttributeError's traceback.
    (ConnectionFields("c", extra=["endpoints"]), "extra: give a JSON object of keys, not list"),  # type: ignore[arg-type]
    # L6: a secret past 128 KiB in this process's environment made each later subprocess fail to start.
    (ConnectionFields("c", password="x" * 200_000), "password: longer than 64 KiB"),
    (ConnectionFields("c", extra={"api_key": "k" * 200_000}), "extra.api_key: longer than 64 KiB"),
])
def test_a_connection_that_cannot_be_read_is_said_by_field(fields: ConnectionFields, said: str) -> None:
    with pytest.raises(ConfigError, match=said):
        cluster_keys(fields, {})


def test_airflow_is_an_extra_and_the_tool_runs_without_importing_it() -> None:
    import subprocess
    import sys
    from importlib.metadata import requires

    airflow = [r for r in requires("rolling-orchestrator") or [] if r.lower().startswith("apache-airflow")]
    assert airflow and all('extra == "airflow"' in r for r in airflow), airflow
    probe = ("import sys, orchestrator.api, orchestrator.cli.main, orchestrator.airflow_provider.connection; "
             "print(sorted(m for m in sys.modules if m == 'airflow' or m.startswith('airflow.')))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]", "the command line, the API and the provider's package import no Airflow"


def test_connections_whose_ids_make_one_variable_name_keep_their_secrets_apart() -> None:
    """The probe's: `prod-es`, `prod_es` and `prod.es` in one triggerer process shared one variable, so each
    run could be given another cluster's password."""
    environ: dict[str, str] = {}
    for conn_id, password in (("prod-es", "a"), ("prod_es", "b"), ("prod.es", "c")):
        cluster_keys(ConnectionFields(conn_id, host="h", login="u", password=password), environ)
    assert sorted(environ.values()) == ["a", "b", "c"]


@pytest.mark.parametrize(("host", "port", "endpoint"), [
    ("[::1]", 9200, "https://[::1]:9200"), ("::1", 9200, "https://[::1]:9200"),
    ("[fd00::5]:9201", 9200, "https://[fd00::5]:9201"), ("10.0.0.1", 9200, "https://10.0.0.1:9200"),
    ("es-1:9300", 9200, "https://es-1:9300"), ("es-1", None, "https://es-1"),
])
def test_a_host_and_port_become_one_endpoint_ipv6_included(host: str, port: int | None, endpoint: str) -> None:
    assert cluster_keys(ConnectionFields("c", host=host, port=port), {})["endpoints"] == [endpoint]


def test_the_forms_endpoints_text_is_a_comma_separated_list() -> None:
    fields = ConnectionFields("c", extra={"extra__orchestrator__endpoints": "http://a:9200, http://b:9200"})
    assert cluster_keys(fields, {})["endpoints"] == ["http://a:9200", "http://b:9200"]
