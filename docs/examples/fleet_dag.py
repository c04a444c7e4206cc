"""A fleet of clusters restarted by Airflow: a canary cluster first, then waves of clusters, each wave
one mapped task per cluster (dynamic task mapping), at most as many at once as the pool has slots,
and no wave started after a wave in which a cluster failed.

The fleet is read from `fleet.yaml` beside this file:

    canary: logs-canary            # an inventory name (configs/NAME.yaml, as `--cluster NAME`)
    waves:                         # each a list of inventory names
      - [logs-eu-1, logs-eu-2]
      - [logs-us-1, logs-us-2]
    conn_id: null                  # or an Airflow Connection with the clusters' user and password

Create the pool first: `airflow pools set cluster_restarts 2 "rolling restarts at once"`. Each cluster
keeps its own run lock in the cluster: two schedulers (or a scheduler and an operator's terminal)
never restart one cluster at the same time. See docs/pipelines.md.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import yaml
from airflow.sdk import DAG

from orchestrator.airflow_provider import RollingRestartOperator

FLEET = yaml.safe_load(Path(__file__).with_name("fleet.yaml").read_text())
POOL = "cluster_restarts"

with DAG("fleet_rolling_restart", schedule=None, start_date=datetime(2026, 1, 1, tzinfo=UTC),
         catchup=False, max_active_runs=1, tags=["orchestrator"]) as dag:
    # deferrable: no worker slot held while nodes recover (a triggerer must run: `airflow triggerer`).
    previous = RollingRestartOperator(task_id="canary", cluster=FLEET["canary"], conn_id=FLEET.get("conn_id"),
                                      pool=POOL, deferrable=True)
    for number, clusters in enumerate(FLEET["waves"], 1):
        # The default trigger rule (all_success): one failed cluster of a wave stops the waves after it.
        wave = RollingRestartOperator.partial(task_id=f"wave_{number}", conn_id=FLEET.get("conn_id"),
                                              pool=POOL, deferrable=True).expand(cluster=clusters)
        previous >> wave
        previous = wave
