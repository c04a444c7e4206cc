"""A fleet of clusters restarted by Airflow: a canary cluster first, then waves of clusters, each wave
one mapped task per cluster (dynamic task mapping), at most as many at once as the pool has slots,
and no wave started after a wave in which a cluster failed.

The fleet is read from `fleet.yaml` beside this file:

    canary: logs-canary            # an inventory name (configs/NAME.yaml, as `--cluster NAME`)
    waves:                         # each a list of inventory names
      - [logs-eu-1, logs-eu-2]
      - [logs-us-1, logs-us-2]
    concurrency: 2                 # a wave's clusters at once (`orchestrate fleet` reads the same file)
    conn_id: null                  # or an Airflow Connection with the clusters' user and password

Create the pool first: `airflow pools set cluster_restarts 2 "rolling restarts at once"`. Each cluster
keeps its own run lock in the cluster: two schedulers (or a scheduler and an operator's terminal)
never restart one cluster at the same time. See docs/pipelines.md.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from airflow.sdk import DAG

from orchestrator.airflow_provider import RollingRestartOperator
from orchestrator.config.fleet import load_fleet

# The same fleet file as `orchestrate fleet restart fleet.yaml`, checked the same way.
FLEET = load_fleet(Path(__file__).with_name("fleet.yaml"))
POOL = "cluster_restarts"

with DAG("fleet_rolling_restart", schedule=None, start_date=datetime(2026, 1, 1, tzinfo=UTC),
         catchup=False, max_active_runs=1, tags=["orchestrator"]) as dag:
    # deferrable: no worker slot held while nodes recover (a triggerer must run: `airflow triggerer`).
    previous = None
    if FLEET.canary:
        previous = RollingRestartOperator(task_id="canary", cluster=FLEET.canary, conn_id=FLEET.conn_id, pool=POOL,
                                          deferrable=True)
    for number, clusters in enumerate(FLEET.waves, 1):
        # The default trigger rule (all_success): one failed cluster of a wave stops the waves after it; at most
        # the fleet's concurrency of a wave at once (and no more than the pool's slots).
        wave = RollingRestartOperator.partial(task_id=f"wave_{number}", conn_id=FLEET.conn_id, pool=POOL,
                                              deferrable=True, max_active_tis_per_dagrun=FLEET.concurrency,
                                              ).expand(cluster=clusters)
        if previous is not None:
            previous >> wave
        previous = wave
