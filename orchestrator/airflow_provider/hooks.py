"""The provider's hook: an Airflow Connection of type `orchestrator` read as the inventory's `cluster:` keys
(connection.py), for the operators and the trigger."""

from __future__ import annotations

from typing import Any, ClassVar

from airflow.sdk import BaseHook

from orchestrator.airflow_provider.connection import ConnectionFields, cluster_keys, inventory_of
from orchestrator.airflow_provider.provider_info import CONN_TYPE


class OrchestratorHook(BaseHook):
    """``orchestrator_conn_id``: a connection whose host, port, schema, login and password say where and as whom
    the cluster is reached, and whose extra fields the rest (docs/pipelines.md, "The connection")."""

    conn_name_attr = "orchestrator_conn_id"
    default_conn_name = "orchestrator_default"
    conn_type = CONN_TYPE
    hook_name = "Rolling orchestrator"
    # Connections made before the provider had its type (`elasticsearch`, say) are read the same way.
    accepted_types: ClassVar[tuple[str, ...]] = (CONN_TYPE, "elasticsearch", "opensearch", "http", "https", "generic")

    def __init__(self, orchestrator_conn_id: str = default_conn_name, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.orchestrator_conn_id = orchestrator_conn_id

    def fields(self) -> ConnectionFields:
        conn = self.get_connection(self.orchestrator_conn_id)
        return ConnectionFields(conn_id=self.orchestrator_conn_id, host=conn.host, port=conn.port,
                                schema=conn.schema, login=conn.login, password=conn.password,
                                extra=conn.extra_dejson)

    def cluster_keys(self) -> tuple[dict[str, Any], str | None]:
        """The `cluster:` keys the connection gives (its secrets put in this process's environment), and the
        inventory file it names (None: none)."""
        fields = self.fields()
        return cluster_keys(fields), inventory_of(fields)


    def test_connection(self) -> tuple[bool, str]:
        """`airflow connections test` and the UI's Test button: the cluster is asked what it is (each product
        plug-in in turn, as `orchestrate inventory discover` asks), changing nothing."""
        from orchestrator import products
        from orchestrator.config.model import ClusterSection
        from orchestrator.errors import OrchestratorError

        try:
            keys, _ = self.cluster_keys()
            section = ClusterSection.model_validate({"name": "airflow-connection-test", **keys})
            facts, product = products.discover(section)
        except (OrchestratorError, ValueError) as exc:
            return False, str(exc)[:500]
        return True, f"{product} cluster {facts.cluster_name}: {len(facts.nodes)} node(s) answered"


def read_connection(conn_id: str | None) -> tuple[dict[str, Any], str | None]:
    """The connection's `cluster:` keys and the inventory path it names (none without a connection): for the
    operators and for the trigger, which runs in the triggerer without them."""
    if conn_id is None:
        return {}, None
    return OrchestratorHook(conn_id).cluster_keys()
