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
# monitor: recoveries, segments, stats; maintenance: flush, force-merge. The lock index: made and
# written by the tool.
INDEX = (
    ("*", ("monitor", "maintenance")),
    (LOCK_INDEX, ("create_index", "read", "write", "delete", "view_index_metadata")),
)


def request_body() -> dict[str, Any]:
    return {"cluster": list(CLUSTER),
            "index": [{"names": [name], "privileges": list(privs), "allow_restricted_indices": False}
                      for name, privs in INDEX]}


def missing(answer: Mapping[str, Any]) -> list[str]:
    """The privileges `_has_privileges` says the user lacks, as `cluster:NAME` and `index NAME:PRIV`."""
    if answer.get("has_all_requested") is True:
        return []
    out = [f"cluster:{p}" for p, granted in (answer.get("cluster") or {}).items() if granted is not True]
    for index, privileges in (answer.get("index") or {}).items():
        out += [f"index {index}:{p}" for p, granted in (privileges or {}).items() if granted is not True]
    return out or ["(the cluster says some privilege is missing but not which)"]
