"""The Airflow provider (Airflow 3.x; `pip install rolling-orchestrator[airflow]`): operators for the
three uses of the tool as a pipeline's step, and the trigger a rolling restart defers to.

    from orchestrator.airflow_provider import ForceMergeOperator, PlanCheckOperator, RollingRestartOperator

The cluster's endpoints and secrets come from an Airflow Connection (connection.py), the rest of
the inventory from its file. See docs/pipelines.md.
"""

from __future__ import annotations

from orchestrator.airflow_provider.operators import ForceMergeOperator, PlanCheckOperator, RollingRestartOperator
from orchestrator.airflow_provider.triggers import RunWaitTrigger

__all__ = ["ForceMergeOperator", "PlanCheckOperator", "RollingRestartOperator", "RunWaitTrigger"]
