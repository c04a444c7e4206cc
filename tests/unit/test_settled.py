"""Settled yellow: allocation explain answers (captured from the sandbox's Elasticsearch) classified."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from orchestrator.restart.plan import Mode
from orchestrator.shards.plan import build_plan
from orchestrator.shards.safety import cluster_problems
from orchestrator.shards.settled import MAX_EXPLAINED, UnassignedCopy, blocking_text, reason_for, settle
from orchestrator.shards.snapshot import ClusterSnapshot, Health
from tests.unit.snapshots import copies, inventory, node, snapshot

EXPLAIN = Path(__file__).parent.parent / "fixtures" / "explain"
LEFT_NODE = "Kmzzy-OTQuuukHVJAHCmwg"  # the node stopped when delayed.json was captured


def captured(name: str, **changed: Any) -> dict[str, Any]:
    """A captured answer, with ``changed`` keys as the same API gives them for another copy."""
    raw: dict[str, Any] = json.loads((EXPLAIN / f"{name}.json").read_text())
    return {**raw, **changed}


def explained(name: str) -> UnassignedCopy:
    return UnassignedCopy.from_explain(captured(name))


def test_the_captured_answers_are_read() -> None:
    delayed = explained("delayed")
    assert (delayed.index, delayed.shard, delayed.primary) == ("delayed1", 0, False)
    assert delayed.can_allocate == "allocation_delayed" and delayed.reason == "NODE_LEFT"
    assert delayed.left_node == LEFT_NODE
    filtered = explained("filtered")
    assert filtered.refusals == (("filter",), ("same_shard",), ("same_shard",))
    assert "es-3: filter:" in filtered.explanation and "exclude" in filtered.explanation


@pytest.mark.parametrize(
    ("fixture", "planned", "expected"),
    [
        ("by-design", [], "too_few_nodes"),  # 3 replicas on 3 nodes: every node says same_shard
        ("filtered", [], None),  # a node refused by an allocation filter: someone's setting, not design
        ("delayed", [], "delayed"),  # waiting for a node this run does not restart
        ("delayed", [LEFT_NODE], None),  # waiting for a node of the run: its copies must come back first
        # Captured mid-upgrade (es-2 on 9.5.3, es-1 and es-3 on 8.19.21): a primary on es-2 with 2 replicas.
        ("mixed-version", [], "older_version"),
    ],
)
def test_reasons(fixture: str, planned: list[str], expected: str | None) -> None:
    assert reason_for(explained(fixture), planned) == expected


def test_an_unassigned_primary_is_never_settled() -> None:
    assert reason_for(replace(explained("by-design"), primary=True), []) is None


def test_throttled_or_yes_copies_keep_waiting() -> None:
    for decision in ("throttled", "yes", "awaiting_info", "no_valid_shard_copy"):
        assert reason_for(replace(explained("by-design"), can_allocate=decision), []) is None


def test_the_accepted_text_names_each_reason_once_with_its_indices() -> None:
    from orchestrator.shards.settled import SETTLED_REASONS, Settlement

    text = Settlement(accepted={"too_few_nodes": ("a", "b"), "delayed": ("c",)}).accepted_text()
    assert text == (f"index(es) c: {SETTLED_REASONS['delayed']}; "
                    f"index(es) a, b: {SETTLED_REASONS['too_few_nodes']}")


def test_a_copy_saved_without_refusals_reads_back_with_none() -> None:
    """A plan's saved snapshot (--save-snapshot) of a copy no node refused has no `refusals`."""
    copy = UnassignedCopy.from_json({"index": "a", "shard": 0, "primary": False})
    assert copy.refusals == () and copy.shard_name == "[a][0]r"
    assert UnassignedCopy.from_json({"index": "a", "shard": 0, "primary": False,
                                     "refusals": [["same_shard"]]}).refusals == (("same_shard",),)


def test_a_replica_held_back_by_an_older_node_is_an_upgrade_in_progress() -> None:
    # Built, not captured: the sandbox runs one version. node_version is NodeVersionAllocationDecider's name.
    copy = replace(explained("by-design"), refusals=(("same_shard",), ("node_version",), ("node_version",)))
    assert reason_for(copy, []) == "older_version"
    assert reason_for(replace(copy, refusals=(("node_version",), ("disk_threshold",))), []) is None


def test_settle_names_indices_and_reasons_and_blocks_on_the_rest() -> None:
    ok = settle(2, [explained("by-design"), explained("delayed")], [])
    assert ok.settled
    assert ok.accepted == {"too_few_nodes": ("by-design",), "delayed": ("delayed1",)}
    assert "by-design" in ok.accepted_text() and "delayed allocation" in ok.accepted_text()

    blocked = settle(2, [explained("by-design"), explained("filtered")], [])
    assert not blocked.settled
    assert len(blocked.blocking) == 1 and blocked.blocking[0].startswith("[filtered][0]r (INDEX_CREATED, no)")

    # More unassigned than explained (beyond MAX_EXPLAINED, or changed while looking): they block.
    assert settle(MAX_EXPLAINED + 5, [explained("by-design")], []).blocking[-1].startswith(f"{MAX_EXPLAINED + 4} ")
    assert not settle(0, [], []).settled  # yellow with nothing to explain: the cluster changed, look again


def yellow(unassigned: list[UnassignedCopy], initializing: int = 0) -> ClusterSnapshot:
    snap = snapshot([node("a"), node("b"), node("c")], copies("i", 0, ["a", "b"]), "a", initializing=initializing)
    return replace(snap, health=Health("yellow", 3, initializing_shards=initializing,
                                       unassigned_shards=sum(u.copies for u in unassigned)),
                   unassigned=tuple(unassigned))


def test_the_gate_passes_a_settled_yellow_and_names_what_blocks_another() -> None:
    assert cluster_problems(yellow([explained("by-design")]), allow_yellow=False) == []
    [problem] = cluster_problems(yellow([explained("filtered")]), allow_yellow=False)
    assert "not settled" in problem and "[filtered][0]r" in problem and "filter" in problem
    # Moving shards: not judged yet.
    assert any("yellow" in p for p in cluster_problems(yellow([explained("by-design")], initializing=1), False))


def test_the_plan_starts_on_a_settled_yellow_and_says_so() -> None:
    plan = build_plan(inventory(["a", "b", "c"]), yellow([explained("by-design")]), Mode.NODE)
    assert plan.safe, plan.all_problems()
    assert any(n.startswith("the cluster is yellow, settled: index(es) by-design") for n in plan.notes)
    refused = build_plan(inventory(["a", "b", "c"]), yellow([explained("filtered")]), Mode.NODE)
    assert any("[filtered][0]r" in p for p in refused.all_problems())


def test_a_saved_snapshot_keeps_the_explanations() -> None:
    snap = yellow([explained("delayed")])
    again = ClusterSnapshot.from_json(json.loads(json.dumps(snap.to_json())))
    assert again.unassigned == snap.unassigned


def test_the_live_view_shows_what_blocks_until_the_run_moves_on() -> None:
    from rich.console import Console

    from orchestrator.cli.render import RunView
    from orchestrator.restart.events import Event

    def shown(view: RunView) -> str:
        console = Console(width=200, record=True)
        console.print(view.render())
        return console.export_text()

    view = RunView(as_json=False, nodes=["es-1"])
    view.live_mode = False  # what is rendered, not where: no terminal here
    view(Event("wait", "batch 2 waits: cluster health is yellow and not settled: [logs-1][0]r (filter) [x]"))
    assert "[logs-1][0]r (filter) [x]" in shown(view)  # markup characters shown as they are
    view(Event("batch", "batch 2/3: es-2 (es-2)"))
    assert "waits" not in shown(view)


def test_recovery_progress_counts_what_is_copied_of_what_must_be() -> None:
    from orchestrator.shards.steps import progress_text, recovery_progress

    def row(target: str, total: int, reused: int, recovered: int, stage: str = "INDEX") -> dict[str, Any]:
        return {"target": target, "stage": stage, "total_bytes": total, "reused_bytes": reused,
                "recovered_bytes": recovered}

    rows = [row("es-1", 1000, 600, 100), row("es-1", 2000, 0, 500), row("es-1", 50, 0, 50, "DONE"),
            row("es-2", 10, 0, 0)]
    progress = recovery_progress(rows, "es-1")
    assert progress == {"shards": 2, "bytes_copied": 600, "bytes_to_copy": 2400, "bytes_reused": 600, "percent": 25}
    assert progress_text(progress).startswith("2 shard(s), 600 B of 2.3 KiB copied (25%)")
    assert recovery_progress(rows, "es-3") is None
    assert recovery_progress([row("es-1", 100, 100, 0)], "es-1")["percent"] == 100  # type: ignore[index]


def test_the_live_table_shows_each_node_s_recovery_progress() -> None:
    from rich.console import Console

    from orchestrator.cli.render import RunView
    from orchestrator.restart.events import Event

    view = RunView(as_json=False, nodes=["es-1", "es-2"])
    view.live_mode = False
    view(Event("phase", "es-1: recovering", node="es-1", phase="recovering"))
    view(Event("wait", "es-1: recovering 2 shard(s), 600 B of 2.3 KiB copied (25%)", node="es-1"))
    console = Console(width=200, record=True)
    console.print(view.render())
    assert "2 shard(s), 600 B of 2.3 KiB copied (25%)" in console.export_text()
    view(Event("phase", "es-1: done", node="es-1", phase="done"))
    console = Console(width=200, record=True)
    console.print(view.render())
    assert "copied" not in console.export_text()


def test_a_slow_recovery_names_its_slowest_shard() -> None:
    from orchestrator.shards.steps import slowest_recovery

    def row(shard: int, left: int, kind: str = "PEER") -> dict[str, Any]:
        return {"target": "es-1", "stage": "INDEX", "index": "logs", "shard": shard, "type": kind,
                "source": "es-2", "total_bytes": 10_000, "reused_bytes": 0, "recovered_bytes": 10_000 - left}

    said = slowest_recovery([row(0, 100), row(1, 9000), row(2, 0, "EXISTING_STORE")], "es-1")
    assert said == "[logs][1] copying files from es-2, stage INDEX, 8.8 KiB left of 9.8 KiB"
    assert slowest_recovery([row(0, 1)], "es-3") is None


class ExplainingRest:
    """A cluster's REST API whose allocation explain answers from captured fixtures."""

    label = "Elasticsearch"
    endpoints = ("http://x:9200",)

    def __init__(self, answers: dict[str, dict[str, Any]]) -> None:
        self.answers, self.asked = answers, list[str]()

    def request(self, what: str, method: str, path: str, params: Any = None, body: Any = None) -> Any:
        assert (method, path) == ("POST", "/_cluster/allocation/explain"), path
        self.asked.append(body["index"])
        return self.answers[body["index"]]


def test_the_recovery_wait_stops_explaining_at_the_first_copy_that_blocks() -> None:
    from orchestrator.shards.adapter import ShardClusterAdapter
    from orchestrator.shards.snapshot import ShardCopy

    answers = {name: json.loads((EXPLAIN / f"{name}.json").read_text())
               for name in ("by-design", "delayed", "filtered")}
    client = ExplainingRest(answers)
    adapter = ShardClusterAdapter(client)
    unassigned = [ShardCopy(name, 0, False, "UNASSIGNED", None, 0) for name in ("by-design", "delayed", "filtered")]
    # Waiting for a node of the run: "delayed" blocks, so "filtered" is not asked about.
    found = adapter.explain_unassigned(unassigned, until_blocking={LEFT_NODE})
    assert client.asked == ["by-design", "delayed"] and len(found) == 2
    assert not settle(3, found, [LEFT_NODE]).settled
    # Without a node of the run to wait for, every copy is explained (what the gate and the plan show).
    client.asked.clear()
    assert len(adapter.explain_unassigned(unassigned)) == 3 and client.asked == ["by-design", "delayed", "filtered"]


def test_recovery_figures_name_each_copy_copied_from_a_peer_largest_first() -> None:
    from orchestrator.shards.steps import recovery_figures

    def row(index: str, shard: int, kind: str, total: int, recovered: int, reused: int, start: int = 2000) -> dict:
        return {"index": index, "shard": shard, "type": kind, "target": "es-2", "source": "es-1", "start_ms": start,
                "total_bytes": total, "recovered_bytes": recovered, "reused_bytes": reused}

    rows = [row("ops", 0, "PEER", 0, 0, 0),                       # operation-based: its own size reused
            row("small", 1, "PEER", 2048, 2048, 0),               # copied in full
            row("big", 0, "PEER", 400_000, 350_000, 50_000),      # copied, partly reused
            row("local", 0, "EXISTING_STORE", 900, 100, 800),     # a primary from its own store
            row("old", 0, "PEER", 10**9, 10**9, 0, start=10)]     # before this node's start: not counted
    figures = recovery_figures(rows, "es-2", since_ms=1000, sizes={("ops", 0): 7000})
    assert figures["shards"] == 4
    assert figures["bytes_from_peers"] == 352_048
    assert figures["bytes_reused"] == 7000 + 50_000 + 900
    assert [c.split()[0] for c in figures["copies_from_peers"]] == ["[big][0]", "[small][1]"]
    assert figures["copies_from_peers"][0].endswith("from es-1")


def test_a_blocked_copy_names_the_decider_that_blocks_not_one_a_settled_yellow_accepts() -> None:
    raw = {"index": "logs", "shard": 0, "primary": False, "can_allocate": "no",
           "unassigned_info": {"reason": "NODE_LEFT"},
           "node_allocation_decisions": [
               {"node_name": "a", "deciders": [{"decider": "same_shard", "decision": "NO",
                                                "explanation": "a copy of this shard is already on this node"}]},
               {"node_name": "b", "deciders": [{"decider": "disk_threshold", "decision": "NO",
                                                "explanation": "the node is above the high watermark"}]}]}
    copy = UnassignedCopy.from_explain(raw)
    settlement = settle(1, [copy], [])
    assert not settlement.settled
    assert "b: disk_threshold: the node is above the high watermark" in blocking_text(settlement)
    assert "same_shard" not in blocking_text(settlement)


def test_each_field_of_the_answer_is_the_copy_s_own() -> None:
    """Shard number, primary flag, and how many copies one answer stands for are read, not defaulted: the
    fixtures' own values (shard 0, a replica) are the defaults, so a copy of shard 2's primary is read too."""
    copy = UnassignedCopy.from_explain(captured("filtered", shard=2, primary=True), copies=3)
    assert (copy.index, copy.shard, copy.primary, copy.copies) == ("filtered", 2, True, 3)
    assert copy.shard_name == "[filtered][2]p"
    assert reason_for(copy, []) is None, "a primary is never settled, whatever its refusals"


def test_the_explanation_is_the_first_node_s_refusal_that_a_settled_yellow_does_not_accept() -> None:
    """by-design: every node refuses by design (same_shard), so the first node's refusal is given; filtered: the
    filter's refusal is named though the others came after it; delayed: no node refuses, so the cluster's
    own explanation is given."""
    raw = captured("by-design")
    first = raw["node_allocation_decisions"][0]
    decider = first["deciders"][0]
    assert UnassignedCopy.from_explain(raw).explanation == \
        f"{first['node_name']}: same_shard: {decider['explanation']}"
    reordered = captured("filtered", node_allocation_decisions=captured("filtered")["node_allocation_decisions"][::-1])
    filtered = next(d for d in reordered["node_allocation_decisions"] if d["node_name"] == "es-3")
    assert UnassignedCopy.from_explain(reordered).explanation == \
        f"es-3: filter: {filtered['deciders'][0]['explanation']}"
    no_refusal = captured("delayed", node_allocation_decisions=[])
    assert UnassignedCopy.from_explain(no_refusal).explanation == no_refusal["allocate_explanation"]


def test_an_answer_without_a_reason_or_a_decision_still_names_its_copy_for_the_operator() -> None:
    """What blocks is said whole: the copy, the cluster's reason (or "unassigned"), its decision (or "?"), and
    the explanation cut at 300 characters; a copy the answer says nothing more of is not settled."""
    bare = UnassignedCopy.from_explain({"index": "logs", "shard": 1, "primary": False})
    assert (bare.reason, bare.can_allocate, bare.left_node, bare.explanation) == ("", "", None, "")
    [line] = settle(1, [bare], []).blocking
    assert line == "[logs][1]r (unassigned, ?): "
    long = replace(explained("filtered"), explanation="x" * 400)
    [line] = settle(1, [long], []).blocking
    assert line == "[filtered][0]r (INDEX_CREATED, no): " + "x" * 300


def test_a_yellow_with_nothing_left_to_explain_says_the_cluster_changed_while_looking() -> None:
    [line] = settle(0, [], []).blocking
    assert line == "yellow, but no unassigned copy was found to explain (the cluster changed while looking)"


def test_the_blocking_text_shows_the_first_few_and_counts_the_rest() -> None:
    def text(n: int) -> str:
        return blocking_text(replace(settle(0, [], []), blocking=tuple(f"b{i}" for i in range(n))), shown=2)

    assert text(1) == "b0"
    assert text(2) == "b0; b1"
    assert text(3) == "b0; b1; and 1 more"
    assert text(5) == "b0; b1; and 3 more"
