"""The Airflow provider (Airflow 3.x; `pip install rolling-orchestrator[airflow]`): operators for the
three uses of the tool as a pipeline's step, and the trigger a rolling restart defers to.

    from orchestrator.airflow_provider import ForceMergeOperator, PlanCheckOperator, RollingRestartOperator

The cluster's endpoints and secrets come from an Airflow Connection of type `orchestrator` (hooks.py,
connection.py), the rest of the inventory from its file; Airflow finds the provider by its entry point
(provider_info.py: `airflow providers list` shows it). See docs/pipelines.md. Airflow is imported when
an operator, the hook or the trigger is first asked for, not with this package.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["ForceMergeOperator", "OrchestratorHook", "PlanCheckOperator", "RollingRestartOperator", "RunWaitTrigger",
           "get_provider_info"]
_WHERE = {"ForceMergeOperator": "operators", "PlanCheckOperator": "operators", "RollingRestartOperator": "operators",
          "RunWaitTrigger": "triggers", "OrchestratorHook": "hooks", "get_provider_info": "provider_info"}


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
