"""The Airflow provider (Airflow 3.x; `pip install rolling-orchestrator[airflow]`): operators for the
three uses of the tool as a pipeline's step, and the trigger a rolling restart defers to.

    from orchestrator.airflow_provider import ForceMergeOperator, PlanCheckOperator, RollingRestartOperator

The cluster's endpoints and secrets come from an Airflow Connection (connection.py), the rest of
the inventory from its file. See docs/pipelines.md. Airflow is imported when an operator or the
trigger is first asked for, not with this package.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["ForceMergeOperator", "PlanCheckOperator", "RollingRestartOperator", "RunWaitTrigger"]
_WHERE = {"ForceMergeOperator": "operators", "PlanCheckOperator": "operators", "RollingRestartOperator": "operators",
          "RunWaitTrigger": "triggers"}


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
