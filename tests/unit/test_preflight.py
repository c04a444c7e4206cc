"""Preflight findings are pure: what was left in a cluster, over built snapshots."""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import Any

import pytest

from orchestrator.restart.plan import Mode
from orchestrator.shards.plan import build_plan
from orchestrator.shards.preflight import DiskUsage, Preflight, preflight_findings, watermark_exceeded
from tests.unit.fake_rest import RecordingRest
from tests.unit.snapshots import copies, inventory, node, snapshot

GIB = 2**30


@pytest.mark.parametrize(("watermark", "used", "free", "expected"), [
    ("85%", 85.0, 100 * GIB, True), ("85%", 84.9, 100 * GIB, False),
    ("0.9", 90.0, GIB, True), ("0.9", 89.0, GIB, False),
    ("50gb", 10.0, 40 * GIB, True), ("50gb", 99.0, 60 * GIB, False), ("500MB", 1.0, 100, True),
    ("lots", 99.0, 0, None), ("%", 1.0, 1, None),
])
def test_watermarks_as_percent_ratio_or_free_bytes(watermark: str, used: float, free: int,
                                                   expected: bool | None) -> None:
    assert watermark_exceeded(watermark, used, free) is expected


def findings(**pre: object) -> tuple[list[str], list[str]]:
    settings = pre.pop("settings", {})
    return preflight_findings(Preflight(**pre), settings)  # type: ignore[arg-type]


def test_disk_past_the_high_watermark_refuses_past_the_low_one_warns() -> None:
    disk = (DiskUsage("a", 92.0, 8 * GIB), DiskUsage("b", 86.0, 14 * GIB), DiskUsage("c", 40.0, 60 * GIB))
    problems, warnings = findings(disk=disk)
    assert len(problems) == 1 and "node a" in problems[0] and "high disk watermark (90%)" in problems[0]
    assert len(warnings) == 1 and "node b" in warnings[0] and "low disk watermark (85%)" in warnings[0]
    custom = {"cluster.routing.allocation.disk.watermark.low": "95%",
              "cluster.routing.allocation.disk.watermark.high": "97%"}
    assert findings(disk=disk, disk_settings=custom) == ([], [])
    off = {"cluster.routing.allocation.disk.threshold_enabled": "false"}
    assert findings(disk=disk, disk_settings=off) == ([], []), "Elasticsearch ignores watermarks then; so do we"


def test_each_thing_left_behind_is_named() -> None:
    problems, warnings = findings(
        index_blocks={"logs-1": ("index read-only / allow delete (api)",)}, global_blocks=("cluster read-only",),
        shutdowns=("nodeid1 (remove)",), running_snapshots=("backups:nightly (STARTED)",),
        settings={"cluster.routing.allocation.exclude._name": "es-3", "cluster.routing.allocation.enable": "all",
                  "cluster.routing.allocation.include._ip": ""})
    said = " ".join(problems)
    assert "global block: cluster read-only" in said
    assert "nodeid1 (remove)" in said and "DELETE _nodes/NODE_ID/shutdown" in said
    assert "backups:nightly (STARTED)" in said
    assert any("logs-1 (index read-only / allow delete (api))" in w for w in warnings)
    assert any("cluster.routing.allocation.exclude._name=es-3" in w for w in warnings)
    assert not any("include._ip" in w or "allocation.enable" in w for w in warnings), "only filters that filter"
    assert findings() == ([], []), "a clean cluster has nothing to say"


def test_the_plan_refuses_on_a_problem_and_notes_a_warning() -> None:
    nodes = [node("a"), node("b"), node("c")]
    shards = copies("i", 0, ["a", "b"]) + copies("i", 1, ["b", "c"])
    clean = snapshot(nodes, shards, "c")
    assert build_plan(inventory(["a", "b", "c"]), clean, Mode.NODE).safe
    left = replace(clean, preflight=Preflight(running_snapshots=("r:s (STARTED)",)),
                   persistent={"cluster.routing.allocation.exclude._name": "x"})
    plan = build_plan(inventory(["a", "b", "c"]), left, Mode.NODE)
    assert not plan.safe and any("a snapshot is running: r:s (STARTED)" in p for p in plan.problems)
    assert any("exclude._name=x" in n for n in plan.notes)


def test_missing_privileges_are_named_and_refuse_the_run() -> None:
    from orchestrator.shards.privileges import missing, request_body

    body = request_body()
    assert body["cluster"] == ["monitor", "manage"] and [i["names"] for i in body["index"]] == [
        ["*"], ["orchestrator-locks"]]
    # The shape `_security/user/_has_privileges` answers with (Elasticsearch's reference).
    answer = {"username": "orchestrator", "has_all_requested": False,
              "cluster": {"monitor": True, "manage": False},
              "index": {"*": {"monitor": True, "maintenance": True},
                        "orchestrator-locks": {"create_index": True, "read": True, "write": False, "delete": True,
                                               "view_index_metadata": True}}}
    assert missing(answer) == ["cluster:manage", "index orchestrator-locks:write"]
    assert missing({"has_all_requested": True, "cluster": {}, "index": {}}) == []
    problems, _ = preflight_findings(Preflight(missing_privileges=("cluster:manage",)), {})
    assert any("lacks privilege(s) the run needs: cluster:manage" in p and "`orchestrate docs privileges`" in p
               for p in problems)
    _, warnings = preflight_findings(Preflight(missing_privileges=None), {})
    assert any(w.startswith("privileges not checked") for w in warnings)
    problems, warnings = preflight_findings(Preflight(missing_privileges=()), {})
    assert problems == [] and not any("privileges" in w for w in warnings)


def test_the_documented_role_is_the_one_checked_and_given_to_the_sandbox_user() -> None:
    import json
    import re

    from orchestrator.shards.privileges import request_body, role_body
    from tests.helpers import REPO

    text = (REPO / "docs" / "privileges.md").read_text()
    documented = json.loads(re.search(r"```json\n(.*?)```", text, re.S).group(1))  # type: ignore[union-attr]
    assert documented == role_body()
    asked = request_body()
    assert asked["cluster"] == documented["cluster"]
    assert [(i["names"], i["privileges"]) for i in asked["index"]] == \
        [(i["names"], i["privileges"]) for i in documented["indices"]]


class PrivilegesOnlyRest(RecordingRest):
    """A secured cluster that answers `_has_privileges` and refuses everything else with a 403."""

    def __init__(self, granted: set[str]) -> None:
        super().__init__()
        self.granted = granted

    def answer(self, what: str, method: str, path: str, params: Any, body: Any) -> Any:
        from orchestrator.shards.rest import HttpError

        if path != "/_security/user/_has_privileges":
            raise HttpError(f"{what}: the user is not allowed to do this (HTTP 403)", 403)
        cluster = {p: p in self.granted for p in body["cluster"]}
        index = {i["names"][0]: {p: True for p in i["privileges"]} for i in body["index"]}
        return {"has_all_requested": all(cluster.values()), "cluster": cluster, "index": index}


def test_a_user_who_cannot_read_the_state_hears_the_missing_privileges_first() -> None:
    """A user lacking `monitor` gets the list of what it lacks, not the 403 of the first read (and is
    never asked for snapshot status, which needs `manage`); a force-merge asks before reading aliases
    (hidden, not refused, without view_index_metadata)."""
    from orchestrator.errors import PreflightFailed
    from orchestrator.forcemerge.run import plan_merges
    from orchestrator.shards.adapter import ShardClusterAdapter

    rest = PrivilegesOnlyRest(granted=set())
    with pytest.raises(PreflightFailed, match="cluster:monitor, cluster:manage") as refused:
        ShardClusterAdapter(rest).snapshot()  # type: ignore[arg-type]
    assert "`orchestrate docs privileges`" in str(refused.value) and "/_snapshot/_status" not in rest.asked
    rest = PrivilegesOnlyRest(granted={"monitor"})
    with pytest.raises(PreflightFailed, match="cluster:manage"):
        plan_merges(ShardClusterAdapter(rest), "logs-*", 5, include_write=False)  # type: ignore[arg-type]
    assert rest.asked == ["/_security/user/_has_privileges"]


class SlowPrivilegesRest(PrivilegesOnlyRest):
    """Its privileges check answers only once another request arrived (or after 2 s)."""

    def __init__(self, granted: set[str]) -> None:
        super().__init__(granted)
        self.read_asked, self.check_overlapped = threading.Event(), False

    def answer(self, what: str, method: str, path: str, params: Any, body: Any) -> Any:
        if path == "/_security/user/_has_privileges":
            self.check_overlapped = self.read_asked.wait(2)
        else:
            self.read_asked.set()
        return super().answer(what, method, path, params, body)


def test_the_privileges_are_checked_together_with_the_plans_reads() -> None:
    """The check costs a round trip of its own (0.13 s of a run's start on the sandbox): the plan's reads
    do not wait for it."""
    from orchestrator.shards.adapter import ShardClusterAdapter
    from orchestrator.shards.rest import HttpError

    rest = SlowPrivilegesRest(granted={"monitor", "manage"})
    with pytest.raises(HttpError, match="403"):  # granted, yet refused by this fake: the read's own error
        ShardClusterAdapter(rest).snapshot()  # type: ignore[arg-type]
    assert rest.check_overlapped and "/_cluster/health" in rest.asked
