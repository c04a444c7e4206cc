"""The step after bulk indexing, in Airflow: index, force-merge what was indexed to at most 5 segments,
then a rolling restart of the cluster, its waits deferred (no worker slot held while nodes recover).

Read from `pipeline.yaml` beside this file:

    conn_id: logs_es          # an Airflow Connection: the cluster's endpoints and the tool's credentials
    index_conn_id: logs_load  # the bulk load's own (a user that may write); default: conn_id
    inventory: /etc/orchestrator/clusters/logs.yaml   # or `cluster: logs`, an inventory's name
    index: logs-2026.11.25    # what the bulk load writes (and the force-merge merges)
    docs: 10000
    nodes: []                 # only these nodes are restarted (inventory names, shell-style); none: every node

See docs/pipelines.md for the connection's fields and how deferral and resume behave.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import yaml
from airflow.sdk import DAG, BaseHook, task

from orchestrator.airflow_provider import ForceMergeOperator, RollingRestartOperator
from orchestrator.airflow_provider.connection import ConnectionFields, endpoints_of

PIPELINE = yaml.safe_load(Path(__file__).with_name("pipeline.yaml").read_text())
WHERE = {"conn_id": PIPELINE["conn_id"], "inventory": PIPELINE.get("inventory"), "cluster": PIPELINE.get("cluster")}


@task
def bulk_index(conn_id: str, index: str, docs: int) -> int:
    """Your bulk load: here, ``docs`` documents with ids of their own (a retried task writes them again)."""
    from elasticsearch import Elasticsearch, helpers

    conn = BaseHook.get_connection(conn_id)
    fields = ConnectionFields(conn_id, host=conn.host, port=conn.port, schema=conn.schema, extra=conn.extra_dejson)
    es = Elasticsearch(endpoints_of(fields), basic_auth=(conn.login, conn.password),
                       ca_certs=conn.extra_dejson.get("ca_file"))
    written, _ = helpers.bulk(es, ({"_index": index, "_id": str(n), "_source": {"n": n, "text": f"document {n}"}}
                                   for n in range(docs)), refresh=True)
    return int(written)


with DAG("post_index_restart", schedule=None, start_date=datetime(2026, 1, 1, tzinfo=UTC), catchup=False,
         tags=["orchestrator"]) as dag:
    indexed = bulk_index(PIPELINE.get("index_conn_id") or PIPELINE["conn_id"], PIPELINE["index"],
                         PIPELINE.get("docs", 10000))
    merged = ForceMergeOperator(task_id="forcemerge", indices=PIPELINE["index"], max_segments=5, **WHERE)
    # deferrable: no worker slot held while nodes recover (a triggerer must run: `airflow triggerer`).
    restarted = RollingRestartOperator(task_id="rolling_restart", deferrable=True, nodes=PIPELINE.get("nodes") or (),
                                       **WHERE)
    indexed >> merged >> restarted
