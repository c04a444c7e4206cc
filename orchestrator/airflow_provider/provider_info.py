"""What Airflow's providers manager reads of this package (the `apache_airflow_provider` entry point), without
importing Airflow: its name, the connection type with its form's fields, the hook, operators and trigger.
`airflow providers list` shows it; the UI offers the connection type with these fields."""

from __future__ import annotations

from typing import Any

PACKAGE = "rolling-orchestrator"  # the distribution's name: Airflow refuses a provider whose name differs
CONN_TYPE = "orchestrator"
INTEGRATION = "Rolling orchestrator (Elasticsearch, OpenSearch, Riak)"


def _text(label: str, description: str, secret: bool = False) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": ["string", "null"]}
    if secret:
        schema["format"] = "password"  # masked in the UI, and in the logs
    return {"label": label, "description": description, "schema": schema}


# The connection's own fields (kept in its extra). Host, port, schema, login and password are Airflow's.
CONN_FIELDS: dict[str, dict[str, Any]] = {
    "inventory": _text("Inventory", "Path of the cluster's inventory file (nodes, SSH, timeouts), when the task "
                                    "names none"),
    "endpoints": _text("Endpoints", "URLs of the cluster, comma-separated (instead of host and port)"),
    "api_key": _text("API key", "An Elasticsearch API key, instead of login and password", secret=True),
    "ca_file": _text("CA file", "Path of the CA certificate that signed the cluster's HTTP certificate"),
    "verify_certs": {"label": "Verify certificates", "description": "Off only for a test cluster: the plan says so",
                     "schema": {"type": ["boolean", "null"], "default": True}},
    "request_timeout_s": {"label": "Request timeout (s)", "description": "Each request's read timeout",
                          "schema": {"type": ["number", "null"]}},
}


def get_provider_info() -> dict[str, Any]:
    from orchestrator import __version__

    return {
        "package-name": PACKAGE,
        "name": "Rolling orchestrator",
        "description": "Safe rolling restarts, upgrades, reboots and host tuning of Elasticsearch, OpenSearch and "
                       "Riak clusters, and force-merges before them.",
        "versions": [__version__],
        "integrations": [{"integration-name": INTEGRATION, "tags": ["service"]}],
        "operators": [{"integration-name": INTEGRATION,
                       "python-modules": ["orchestrator.airflow_provider.operators"]}],
        "hooks": [{"integration-name": INTEGRATION, "python-modules": ["orchestrator.airflow_provider.hooks"]}],
        "triggers": [{"integration-name": INTEGRATION,
                      "python-modules": ["orchestrator.airflow_provider.triggers"]}],
        "connection-types": [{
            "connection-type": CONN_TYPE,
            "hook-class-name": "orchestrator.airflow_provider.hooks.OrchestratorHook",
            "hook-name": "Rolling orchestrator",
            "conn-fields": CONN_FIELDS,
            "ui-field-behaviour": {
                "hidden-fields": ["extra"],
                "relabeling": {"login": "User", "schema": "Scheme (http or https)"},
                "placeholders": {"host": "es1.example.com,es2.example.com", "port": "9200", "schema": "https"},
            },
        }],
    }
