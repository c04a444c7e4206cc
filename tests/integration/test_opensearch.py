"""OpenSearch, the third product, on real OpenSearch nodes (Maven Central jars) in test hosts over real
sshd: node and zone mode under writes on 3.8.0, weighted routing restored exactly, a SIGKILL mid-batch
and a resume, plan, status, report and force-merge; and a packaged 2.19.1 sandbox planned, read, and
upgraded to 3.8.0 with apt (an operator's changed opensearch.yml kept)."""

from __future__ import annotations

import json
import shlex
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from orchestrator.sandbox.load import LoadGenerator
from orchestrator.sandbox.rest import rest_for
from orchestrator.shards.rest import HttpError, Rest
from tests.helpers import STEADY_LOAD_PAUSE_S, assert_no_traceback, closed_at_teardown, json_lines, orchestrate
from tests.integration.conftest import SandboxManager, Shape
from tests.integration.test_restart import (
    end_background_run,
    read_events_until,
    start_background_run,
    starts_logged,
)

# One zone per node: zone mode restarts a node at a time, with search traffic weighed away from it.
THREE_ZONES = Shape(nodes=3, zones=3, product="opensearch", es_version="3.8.0", secured=False)
# OpenSearch 2.x on a JDK 17 (it needs the security manager), installed from Debian packages with 3.8.0
# beside it in the hosts' apt repository: read like 3.x, then upgraded to 3.8.0 with apt.
OPENSEARCH_2 = Shape(nodes=3, zones=3, product="opensearch", es_version="2.19.1", secured=False,
                     also_versions=("3.8.0",), packages=True)
pytestmark = pytest.mark.sandbox_shape("opensearch")
WEIGHTS = "/_cluster/routing/awareness/zone/weights"


def os_rest(info: dict[str, Any]) -> Rest:
    return closed_at_teardown(rest_for("opensearch", info["endpoints"], timeout_s=30))


def settings(rest: Rest) -> dict[str, Any]:
    raw = rest.request("settings", "GET", "/_cluster/settings", {"flat_settings": "true"})
    return {"persistent": raw["persistent"], "transient": raw["transient"]}


def weights(rest: Rest) -> dict[str, str] | None:
    try:
        return rest.request("weights", "GET", WEIGHTS).get("weights") or None
    except HttpError as exc:
        if exc.status == 404:
            return None
        raise


def prepared(sandboxes: SandboxManager, shape: Shape = THREE_ZONES) -> tuple[dict[str, Any], Rest]:
    info = sandboxes.get(shape)
    rest = os_rest(info)
    try:
        rest.request("sample", "GET", "/sample-1/_count")
    except HttpError:
        proc = orchestrate("sandbox", "load", "--docs", "6000")
        assert proc.returncode == 0, proc.stderr
    rest.request("green", "GET", "/_cluster/health", {"wait_for_status": "green", "timeout": "60s"})
    return info, rest


def restart_under_writes(info: dict[str, Any], rest: Rest, by: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A restart with a write and search load through every node; the load's verdict is asserted."""
    load = closed_at_teardown(LoadGenerator(info["endpoints"], index=f"load-{by}", duration_s=600, max_docs=100_000,
                                            product="opensearch", pause_s=STEADY_LOAD_PAUSE_S))
    load.start_then_mark("during")
    proc = orchestrate("restart", "--cluster", "sandbox", "--by", by, "--yes", "--json", timeout=900)
    load.mark("after")
    time.sleep(2)
    load.stop()
    report = load.report()
    print(f"load during the OpenSearch {by}-mode restart: {json.dumps(report)}")
    assert load.missing_acknowledged() == [], "an acknowledged document was lost"
    assert report["red_samples"] == 0 and report["health_samples"] > 10
    assert report["windows"]["during"]["index_ok"] > 0
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert_no_traceback(proc)
    events = json_lines(proc.stdout)
    assert events[-1]["event"] == "summary" and events[-1]["result"] == "succeeded"
    return events[-1], events


def test_node_mode_then_zone_mode_under_writes_restore_settings_and_routing_weights(
        sandboxes: SandboxManager, tmp_path: Path) -> None:
    info, rest = prepared(sandboxes)
    rest.request("settings", "PUT", "/_cluster/settings", body={
        "persistent": {"indices.recovery.max_bytes_per_sec": "50mb"},
        "transient": {"cluster.routing.allocation.node_concurrent_recoveries": "3"}})
    before = settings(rest)
    before_starts = starts_logged(info)

    plan = orchestrate("plan", "--cluster", "sandbox", "--json")
    assert plan.returncode == 0, plan.stderr
    assert json.loads(plan.stdout)["safe"] is True and settings(rest) == before

    # Node mode (one node: writes under a restart are shown by zone mode below, and for Elasticsearch) leaves
    # the routing weights alone and puts the operator's settings back.
    proc = orchestrate("restart", "--cluster", "sandbox", "--nodes", "es-1", "--yes", "--json", timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    events = json_lines(proc.stdout)
    assert events[-1]["result"] == "succeeded" and [n["restarted"] for n in events[-1]["nodes"]] == [True]
    assert not any("routing/awareness" in e.get("message", "") for e in events), "node mode leaves weights alone"
    assert settings(rest) == before and weights(rest) is None

    # A window (of one node here: the shape's three nodes are master-eligible, each admitted alone) weighs its
    # node's zone away while it is away, recovers it from its own copies, and puts the weights and each index's
    # delayed_timeout back.
    proc = orchestrate("restart", "--cluster", "sandbox", "--nodes", "es-2", "--max-unavailable", "2", "--yes",
                       "--json", timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    undo = [e for e in json_lines(proc.stdout) if e.get("event") == "undo"]
    shifted = [e for e in undo if "routing/awareness/zone/weights" in e["message"]]
    assert [e["message"].startswith("set ") for e in shifted] == [True, False], [e["message"] for e in shifted]
    zone = next(n["zone"] for n in info["nodes"] if n["name"] == "es-2")
    assert {z for z, w in shifted[0]["data"]["value"].items() if float(w) == 0} == {zone}
    delayed = [e["message"].split(" ")[0] for e in undo if "node_left.delayed_timeout" in e["message"]]
    assert delayed and delayed.count("set") == delayed.count("restored"), delayed
    assert settings(rest) == before and weights(rest) is None

    # Zone mode, with weights an operator set (zone-2 takes twice the searches): each zone weighed to 0
    # while it restarts, the others kept, and the operator's weights back at the end.
    theirs = {"zone-1": "1.0", "zone-2": "2.0", "zone-3": "1.0"}
    version = rest.request("weights", "GET", WEIGHTS).get("_version", -1)  # the window's run set and removed some
    rest.request("weights", "PUT", WEIGHTS, body={"weights": theirs, "_version": version})
    summary, events = restart_under_writes(info, rest, "zone")
    shifted = [e for e in events if e.get("event") == "undo" and "routing/awareness/zone/weights" in e["message"]]
    assert [e["message"].startswith("set ") for e in shifted] == [True, False] * 3, [e["message"] for e in shifted]
    for batch, e in zip(summary["batches"], shifted[::2], strict=True):
        zone = {n["zone"] for n in info["nodes"] if n["name"] in batch["nodes"]}
        assert len(zone) == 1 and {z for z, w in e["data"]["value"].items() if float(w) == 0} == zone
        assert {z: w for z, w in e["data"]["value"].items() if z not in zone} == \
            {z: w for z, w in theirs.items() if z not in zone}
    assert weights(rest) == theirs
    assert settings(rest) == before
    assert starts_logged(sandboxes.status()) == {k: v + (2 if k in ("es-1", "es-2") else 1)
                                                 for k, v in before_starts.items()}
    report = orchestrate("report", "--cluster", "sandbox", "--html", str(tmp_path / "report.html"))
    assert report.returncode == 0, report.stderr[-2000:]
    assert "from peers" in report.stdout and "es-3" in (tmp_path / "report.html").read_text()

    rest.request("weights", "DELETE", "/_cluster/routing/awareness/weights",
                 body={"_version": rest.request("weights", "GET", WEIGHTS)["_version"]})
    rest.request("settings", "PUT", "/_cluster/settings", body={
        "persistent": {"indices.recovery.max_bytes_per_sec": None},
        "transient": {"cluster.routing.allocation.node_concurrent_recoveries": None}})


def test_sigkill_mid_zone_run_then_resume_puts_the_weights_back(sandboxes: SandboxManager) -> None:
    info, rest = prepared(sandboxes)
    before_starts = starts_logged(info)
    assert weights(rest) is None
    run = start_background_run("--by", "zone")
    try:
        seen = read_events_until(run, lambda e: e.get("event") == "phase" and e.get("batch") == 2
                                 and e.get("phase") == "stopped", 300)
        # Killed while the second zone is down: its weight 0 and the restricted allocation stay, journaled.
        down = next(n["zone"] for n in info["nodes"] if n["name"] == seen[-1]["node"])
        assert {z for z, w in (weights(rest) or {}).items() if float(w) == 0} == {down}
    finally:
        end_background_run(run, signal.SIGKILL, 30)
    status = json.loads(orchestrate("status", "--cluster", "sandbox", "--json").stdout)
    assert any("routing/awareness" in s["key"] for s in status["temporary_settings"]), status["temporary_settings"]
    proc = orchestrate("resume", "--cluster", "sandbox", "--json", timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json_lines(proc.stdout)[-1]["result"] == "succeeded"
    assert starts_logged(sandboxes.status()) == {k: v + 1 for k, v in before_starts.items()}
    assert weights(rest) is None, "no weights before the run: none after it"
    assert rest.request("health", "GET", "/_cluster/health")["status"] == "green"


def test_status_and_forcemerge_on_opensearch_and_a_mismatched_product_is_a_clear_error(
        sandboxes: SandboxManager, tmp_path: Path) -> None:
    info, rest = prepared(sandboxes)
    status = orchestrate("status", "--cluster", "sandbox", "--json")
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["health"]["number_of_nodes"] == 3

    merged = orchestrate("forcemerge", "--cluster", "sandbox", "--indices", "sample-*", "--max-segments", "1",
                         "--yes", "--json", timeout=600)
    assert merged.returncode == 0, merged.stderr[-2000:]
    rows = rest.request("segments", "GET", "/_cat/segments/sample-*", {"format": "json", "h": "index,shard,prirep,ip"})
    per_copy: dict[tuple[str, ...], int] = {}
    for r in rows:
        key = (r["index"], r["shard"], r["prirep"], r["ip"])
        per_copy[key] = per_copy.get(key, 0) + 1
    assert per_copy and max(per_copy.values()) == 1, per_copy


    # The inventory says Elasticsearch, the cluster is OpenSearch: refused with what to change.
    inventory = Path(info["inventory"]).read_text().replace("product: opensearch", "product: elasticsearch")
    wrong = tmp_path / "wrong.yaml"
    wrong.write_text(inventory.replace("playbook: opensearch-rolling", "playbook: elasticsearch-rolling"))
    refused = orchestrate("plan", "--config", str(wrong))
    assert refused.returncode == 4, refused.stderr
    assert "cluster.product: opensearch" in refused.stderr
    assert_no_traceback(refused)


@pytest.mark.sandbox_shape("opensearch-2")
def test_an_opensearch_2_sandbox_is_planned_and_read_like_3(sandboxes: SandboxManager) -> None:
    """2.x runs here too (on a JDK 17): the plug-in reads it as it reads 3.x, zone mode included."""
    rest = os_rest(sandboxes.get(OPENSEARCH_2))  # no data: planning and reading are what is shown
    assert rest.request("root", "GET", "/")["version"]["number"] == "2.19.1"
    plan = orchestrate("plan", "--cluster", "sandbox", "--by", "zone", "--json")
    assert plan.returncode == 0, plan.stderr
    planned = json.loads(plan.stdout)
    assert planned["safe"] is True and [len(b["nodes"]) for b in planned["batches"]] == [1, 1, 1]
    assert any("weighed away" in n for n in planned["notes"])
    status = orchestrate("status", "--cluster", "sandbox", "--json")
    assert status.returncode == 0 and json.loads(status.stdout)["health"]["status"] == "green"


@pytest.mark.sandbox_shape("opensearch-2")
def test_a_packaged_opensearch_2_cluster_is_upgraded_to_3_with_apt_zone_by_zone(sandboxes: SandboxManager) -> None:
    """`orchestrate upgrade` along OpenSearch's own path (2.19 -> 3.x): each host's real `apt-get install
    opensearch=3.8.0`, the operator's line in the conffile kept, every node on 3.8.0 started once, the
    search weights and settings as they were."""
    from tests.integration.test_sandbox import ssh

    info = sandboxes.get(OPENSEARCH_2)
    rest = os_rest(info)
    line = "# an operator's own line: kept across upgrades"
    for node in ("es-1", "es-2", "es-3"):
        changed = ssh(info, node, f"echo {shlex.quote(line)} >> /etc/opensearch/opensearch.yml && "
                                  "dpkg-query -W -f '${Version}' opensearch")
        assert changed.returncode == 0 and changed.stdout == "2.19.1", changed
    rest.request("index", "PUT", "/upgraded", body={"settings": {"number_of_shards": 3, "number_of_replicas": 1}})
    for i in range(30):
        rest.request("doc", "POST", "/upgraded/_doc", body={"n": i})
    refused = orchestrate("upgrade", "--cluster", "sandbox", "--to", "3.8.0", "--yes", "--json", timeout=300)
    assert refused.returncode == 5 and "no successful snapshot found" in refused.stderr, refused.stderr[-2000:]
    rest.request("repository", "PUT", "/_snapshot/backup", body={
        "type": "fs", "settings": {"location": f"{info['snapshot_dir']}/backup"}})
    rest.request("snapshot", "PUT", "/_snapshot/backup/before", {"wait_for_completion": "true"})
    skipped = orchestrate("plan", "--cluster", "sandbox", "--upgrade-to", "4.0.0", "--json")
    assert "2.19 -> 3.x" in skipped.stdout or "more than one major" in skipped.stdout, skipped.stdout[-2000:]
    before, starts = settings(rest), starts_logged(info)
    run = orchestrate("upgrade", "--cluster", "sandbox", "--to", "3.8.0", "--by", "zone", "--yes", "--json",
                      timeout=900)
    assert run.returncode == 0, run.stderr[-3000:]
    assert_no_traceback(run)
    summary = json_lines(run.stdout)[-1]
    assert summary["result"] == "succeeded" and len(summary["nodes"]) == 3
    print("opensearch upgrade figures: " + json.dumps({"duration_s": summary["duration_s"], "nodes": [
        {"name": n["name"], "phases": n["phases"]} for n in summary["nodes"]]}))
    nodes = rest.request("nodes", "GET", "/_nodes")["nodes"].values()
    assert {n["version"] for n in nodes} == {"3.8.0"}
    assert starts_logged(info) == {k: v + 1 for k, v in starts.items()}, "each node started exactly once"
    assert settings(rest) == before
    assert rest.request("count", "GET", "/upgraded/_count")["count"] == 30
    for node in ("es-1", "es-2", "es-3"):
        kept = ssh(info, node, "dpkg-query -W -f '${Version} ${Status}' opensearch; echo; "
                               "grep -c \"operator's own line\" /etc/opensearch/opensearch.yml")
        assert kept.stdout.split("\n")[:2] == ["3.8.0 install ok installed", "1"], kept.stdout
    sandboxes.forget()  # its nodes now run 3.8.0: not the shape it was started as
