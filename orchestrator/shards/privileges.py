"""The Elasticsearch privileges a run needs, and which of them the connecting user lacks.

Asked of the cluster once, before any change (`_security/user/_has_privileges`, where security is
on): a missing privilege refuses the run at preflight, named, instead of failing half-way through.
The role that grants exactly these is in docs/privileges.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from orchestrator.restart.lock import LOCK_INDEX

# monitor: health, nodes, shards, recoveries, allocation explain, settings read, snapshot status;
# manage: cluster settings (allocation, recovery limits), node shutdown records.
CLUSTER = ("monitor", "manage")
# monitor: recoveries, segments, stats; maintenance: flush, force-merge; view_index_metadata:
# aliases and data streams (which index is a write index; without it they are silently hidden).
# The lock index: made and written by the tool.
INDEX = (
    ("*", ("monitor", "maintenance", "view_index_metadata")),
    (LOCK_INDEX, ("create_index", "read", "write", "delete", "view_index_metadata")),
)


def request_body() -> dict[str, Any]:
    """What `_has_privileges` is asked: the role's privileges, under the API's own key for indices."""
    role = role_body()
    return {"cluster": role["cluster"], "index": role["indices"]}


def role_body() -> dict[str, Any]:
    """The least-privilege role granting exactly what a run needs (`PUT _security/role/NAME`)."""
    return {"cluster": list(CLUSTER),
            "indices": [{"names": [name], "privileges": list(privs), "allow_restricted_indices": False}
                        for name, privs in INDEX]}


def refusal(lacking: list[str] | tuple[str, ...]) -> str:
    """What the operator reads when privileges are missing: each one, and where the role is."""
    return (f"the user lacks privilege(s) the run needs: {', '.join(lacking)}. Grant the role in "
            "`orchestrate docs privileges` (nothing was changed).")


def missing(answer: Mapping[str, Any]) -> list[str]:
    """The privileges `_has_privileges` says the user lacks, as `cluster:NAME` and `index NAME:PRIV`."""
    if answer.get("has_all_requested") is True:
        return []
    out = [f"cluster:{p}" for p, granted in (answer.get("cluster") or {}).items() if granted is not True]
    for index, privileges in (answer.get("index") or {}).items():
        out += [f"index {index}:{p}" for p, granted in (privileges or {}).items() if granted is not True]
    return out or ["(the cluster says some privilege is missing but not which)"]
