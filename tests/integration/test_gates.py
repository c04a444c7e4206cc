"""Gates and operator control on the real sandbox: the last look before a stop, master quorum in zone
mode, preflight findings, --canary, and `pause`/`continue` from another process."""

from __future__ import annotations

import json
import shlex
import signal
import sys
from pathlib import Path
from typing import Any

import yaml

from tests.helpers import REPO, Receiver, assert_no_traceback, json_lines, orchestrate
from tests.integration.conftest import SandboxManager, Shape
from tests.integration.test_faults import background_run, inventory_with
from tests.integration.test_restart import (
    ALLOC,
    end_background_run,
    prepared,
    read_events_until,
    settings,
    settled_health,
    starts_logged,
)
from tests.integration.test_sandbox import ssh

# Creates index late-1 with its only copy on the node of the batch it runs for (when that node is the
# target): data that appears on a node after the plan and after its batch's gate.
# A secured sandbox: the CA file and the superuser's password file follow (empty when insecure).
PLACE_LATE_INDEX = """
import base64, json, os, ssl, sys, urllib.error, urllib.request
endpoint, target, ca_file, password_file = sys.argv[1:5]
node = os.environ["ORCHESTRATOR_NODE"]
if node != target:
    sys.exit(0)
body = {"settings": {"number_of_shards": 1, "number_of_replicas": 0,
                     "index.routing.allocation.require._name": node}}
headers = {"content-type": "application/json"}
if password_file:
    secret = "elastic:" + open(password_file).read().strip()
    headers["authorization"] = "Basic " + base64.b64encode(secret.encode()).decode()
request = urllib.request.Request(endpoint + "/late-1", method="PUT", data=json.dumps(body).encode(), headers=headers)
context = ssl.create_default_context(cafile=ca_file) if ca_file else None
try:
    urllib.request.urlopen(request, timeout=60, context=context)  # returns once the primary is started
except urllib.error.HTTPError as exc:
    if exc.code != 400:  # 400: it exists already (a resumed run)
        raise
"""


def with_playbook(tmp_path: Path, info: dict[str, Any], before_stop: dict[str, Any] | None = None,
                  hooks: dict[str, Any] | None = None) -> Path:
    """The sandbox's inventory, with the shipped Elasticsearch playbook plus a command step before the
    stop and hooks, placed beside it; returns the inventory's path."""
    shipped = yaml.safe_load((REPO / "playbooks" / "elasticsearch-rolling.yaml").read_text())
    batch = list(shipped["batch"])
    if before_stop is not None:
        batch.insert(batch.index("stop_service"), before_stop)
    (tmp_path / "playbooks").mkdir(exist_ok=True)
    (tmp_path / "playbooks" / "custom.yaml").write_text(
        yaml.safe_dump({**shipped, "name": "custom", "batch": batch, "hooks": hooks or {}}))
    return inventory_with(tmp_path, info, lambda inv: inv.update(playbook="custom"))


def test_data_placed_on_the_next_node_after_its_gate_stops_the_run_at_the_last_look(
        sandboxes: SandboxManager, tmp_path: Path) -> None:
    info, es = prepared(sandboxes, Shape())
    before = settings(es)
    plan = json.loads(orchestrate("plan", "--cluster", "sandbox", "--json").stdout)
    # A run of the first two batches' nodes: batch 2's is the one its last look must refuse (a third: CI's time).
    first, target = plan["batches"][0]["nodes"][0], plan["batches"][1]["nodes"][0]
    two = ("--nodes", first, "--nodes", target)
    script = tmp_path / "place_late_index.py"
    script.write_text(PLACE_LATE_INDEX)
    path = with_playbook(tmp_path, info, before_stop={"command": {
        "name": "place-late-index", "where": "local", "timeout_s": 90,
        "run": shlex.join([sys.executable, str(script), info["endpoints"][0], target, info.get("ca_file") or "",
                           info.get("password_file") or ""])}})
    starts = starts_logged(info)
    try:
        refused = orchestrate("restart", "--config", str(path), "--yes", "--json", *two, timeout=900)
        assert refused.returncode == 6, refused.stderr[-2000:]
        assert_no_traceback(refused)
        assert f"not stopping batch 2 ({target})" in refused.stderr and "late-1" in refused.stderr
        now = starts_logged(sandboxes.status())
        assert now[target] == starts[target], "the node holding the new index's only copy was never stopped"
        assert sum(now.values()) == sum(starts.values()) + 1, "only batch 1 restarted"
        assert ALLOC not in settings(es)["persistent"], "batch 2's allocation restriction is restored"

        resumed = orchestrate("resume", "--config", str(path), "--allow-unavailable", "late-*", "--json",
                              timeout=900)
        assert resumed.returncode == 0, resumed.stderr[-2000:]
        events = json_lines(resumed.stdout)
        assert any("late-*" in e.get("message", "") for e in events if e.get("event") == "run")
        assert events[-1]["result"] == "succeeded"
        assert events[-1]["options"]["allow_unavailable"] == ["late-*"], "recorded in the run"
        assert starts_logged(sandboxes.status()) == {k: v + (k in two) for k, v in starts.items()}, "each once"
        assert settings(es) == before
    finally:
        es.indices.delete(index="late-1", ignore_unavailable=True)


def test_zone_mode_on_one_zone_splits_it_to_keep_the_master_quorum(sandboxes: SandboxManager) -> None:
    """The default sandbox: three master-eligible nodes in one zone. Zone mode restarts that zone in
    three batches of one, the elected master last, and the plan says why."""
    _info, es = prepared(sandboxes, Shape())
    proc = orchestrate("plan", "--cluster", "sandbox", "--by", "zone", "--json")
    assert proc.returncode == 0, proc.stderr
    plan = json.loads(proc.stdout)
    assert [len(b["nodes"]) for b in plan["batches"]] == [1, 1, 1]
    assert [b["label"].split(" ")[-1] for b in plan["batches"]] == ["(1/3)", "(2/3)", "(3/3)"]
    assert plan["batches"][-1]["nodes"] == [es.cat.master(format="json")[0]["node"]]
    assert any("master quorum" in n and "3 batches" in n for n in plan["notes"])


def test_preflight_names_what_was_left_in_the_cluster(sandboxes: SandboxManager, tmp_path: Path) -> None:
    _info, es = prepared(sandboxes, Shape())
    es.indices.create(index="blocked-1", settings={"number_of_shards": 1, "number_of_replicas": 1})
    try:
        es.cluster.health(index="blocked-1", wait_for_status="green", timeout="60s")
        es.indices.put_settings(index="blocked-1", settings={"index.blocks.write": True})
        es.cluster.put_settings(persistent={"cluster.routing.allocation.exclude._name": "no-such-node"})
        saved = tmp_path / "snap.json"
        proc = orchestrate("plan", "--cluster", "sandbox", "--json", "--save-snapshot", str(saved))
        assert proc.returncode == 0, proc.stderr  # warnings, not refusals
        notes = " ".join(json.loads(proc.stdout)["notes"])
        assert "blocked-1 (index write (api))" in notes
        assert "cluster.routing.allocation.exclude._name=no-such-node" in notes
        assert "privilege" not in notes  # checked on the secured sandbox, and every one granted
        preflight = json.loads(saved.read_text())["preflight"]
        assert len(preflight["disk"]) == 3 and all(0 <= d["used_percent"] <= 100 for d in preflight["disk"])
        # The sandbox turns the disk thresholds off in elasticsearch.yml: read as Elasticsearch applies them.
        assert preflight["disk_settings"]["cluster.routing.allocation.disk.threshold_enabled"] == "false"
        # Planned again from the saved state with the thresholds on: the same disks are judged.
        preflight["disk_settings"] = {"cluster.routing.allocation.disk.watermark.high": "0%"}
        raw = json.loads(saved.read_text())
        saved.write_text(json.dumps({**raw, "preflight": preflight}))
        judged = orchestrate("plan", "--cluster", "sandbox", "--snapshot", str(saved), "--json")
        assert judged.returncode == 6 and "past the high disk watermark (0%)" in judged.stdout
    finally:
        es.cluster.put_settings(persistent={"cluster.routing.allocation.exclude._name": None})
        es.indices.delete(index="blocked-1", ignore_unavailable=True)


def test_canary_pause_and_hooks_in_one_run(sandboxes: SandboxManager, tmp_path: Path) -> None:
    """--canary holds after batch 1 until `continue`; a pause asked by a second process holds before
    batch 3; the playbook's hooks are called in order with the documented facts (HTTP calls to a
    server of this test on 127.0.0.1, and a command on each node's host)."""
    info, es = prepared(sandboxes, Shape())
    before = settings(es)
    starts = starts_logged(info)
    with Receiver() as receiver:
        hooks = {
            "before_run": [{"name": "silence", "http": {"url": receiver.url + "/api/v2/silences",
                                                        "body": {"comment": "restart {run_id} of {cluster}"},
                                                        "save": {"silence": "silenceID"}}}],
            "before_stop": [{"name": "lb-drain", "http": {"method": "PUT", "url": receiver.url + "/lb/{node}/drain"}}],
            "after_start": [{"name": "mark", "where": "host", "run": (
                'echo "$ORCHESTRATOR_NODE batch $ORCHESTRATOR_BATCH $ORCHESTRATOR_SAVED_SILENCE" '
                '> "/tmp/orchestrator-hook-test-$ORCHESTRATOR_NODE"')}],
            "after_batch": [{"name": "chat", "http": {"url": receiver.url + "/chat",
                                                      "body": {"text": "batch {batch} done: {nodes}"}}}],
            "after_run": [{"name": "unsilence", "http": {"method": "DELETE",
                                                         "url": receiver.url + "/api/v2/silence/{saved.silence}"}}]}
        path = with_playbook(tmp_path, info, hooks=hooks)
        order = [b["nodes"][0] for b in json.loads(orchestrate("plan", "--config", str(path), "--json").stdout)[
            "batches"]]
        said = canary_then_pause(sandboxes, path, starts)
        calls = [(c["method"], c["path"]) for c in receiver.calls]
    assert calls == [("POST", "/api/v2/silences"),
                     *[call for node in order for call in (("PUT", f"/lb/{node}/drain"), ("POST", "/chat"))],
                     ("DELETE", "/api/v2/silence/sil-42")]
    assert json.loads(receiver.calls[2]["body"]) == {"text": f"batch 1 done: {order[0]}"}
    for number, node in enumerate(order, start=1):
        marked = ssh(info, node, f"cat /tmp/orchestrator-hook-test-{node}; rm -f /tmp/orchestrator-hook-test-{node}")
        assert marked.stdout.strip() == f"{node} batch {number} sil-42", marked.stderr
    assert json_lines(said)[-1]["result"] == "succeeded"
    assert starts_logged(sandboxes.status()) == {k: v + 1 for k, v in starts.items()}
    assert settings(es) == before
    assert json.loads(orchestrate("status", "--cluster", "sandbox", "--json").stdout)["pause"] is None


def canary_then_pause(sandboxes: SandboxManager, path: Path, starts: dict[str, int]) -> str:
    """Run with --canary; continue after batch 1; pause from a second process during batch 2; continue.
    Returns what the run wrote after the last continue."""
    run = background_run("restart", "--config", str(path), "--yes", "--canary")
    try:
        read_events_until(run, lambda e: e.get("message", "").startswith("paused before batch 2"), 600)
        status = json.loads(orchestrate("status", "--cluster", "sandbox", "--json").stdout)
        assert status["pause"]["reason"].startswith("canary: batch 1")
        assert status["run"]["paused"].startswith("canary: batch 1")
        assert sum(starts_logged(sandboxes.status()).values()) == sum(starts.values()) + 1, "only the canary"
        again = orchestrate("pause", "--cluster", "sandbox")
        assert again.returncode == 0 and "already asked" in again.stderr + again.stdout

        assert orchestrate("continue", "--cluster", "sandbox").returncode == 0
        read_events_until(run, lambda e: e.get("message", "").startswith("continued: batch 2"), 120)
        # From a second process while batch 2 runs: it holds before batch 3.
        asked = orchestrate("pause", "--cluster", "sandbox", "--reason", "from another terminal")
        assert asked.returncode == 0, asked.stderr
        read_events_until(run, lambda e: e.get("message", "").startswith(
            "paused before batch 3") and "from another terminal" in e.get("message", ""), 600)
        assert sum(starts_logged(sandboxes.status()).values()) == sum(starts.values()) + 2
        assert orchestrate("continue", "--cluster", "sandbox").returncode == 0
        said = end_background_run(run, signal.SIGCONT, 600)  # SIGCONT: only wait for it to end
    finally:
        if run.poll() is None:
            end_background_run(run, signal.SIGKILL, 30)
    assert run.returncode == 0, said[-2000:]
    return said


def test_a_failing_abort_hook_stops_the_run_before_any_stop_with_every_setting_restored(
        sandboxes: SandboxManager, tmp_path: Path) -> None:
    info, es = prepared(sandboxes, Shape())
    before = settings(es)
    starts = starts_logged(info)
    marker = tmp_path / "lb-api-down"
    marker.touch()
    with Receiver() as receiver:
        hooks = {"before_stop": [{"name": "lb-drain", "run": f"test ! -e {shlex.quote(str(marker))}"}],
                 "on_failure": [{"name": "page", "http": {"url": receiver.url + "/page",
                                                          "body": {"text": "{cluster}: run {run_id} stopped"}}}]}
        path = with_playbook(tmp_path, info, hooks=hooks)
        # One node's batch: the hook runs before its stop, and `resume` goes on with the run's own choice.
        stopped = orchestrate("restart", "--config", str(path), "--nodes", "es-2", "--yes", "--json", timeout=900)
        assert stopped.returncode == 6, stopped.stderr[-2000:]
        assert_no_traceback(stopped)
        assert "hook before_stop/lb-drain for" in stopped.stderr and "(on_failure: abort)" in stopped.stderr
        assert [c["path"] for c in receiver.calls] == ["/page"]
        assert json_lines(stopped.stdout)[-1]["result"] == "aborted"
    assert starts_logged(sandboxes.status()) == starts, "no node was stopped"
    assert settings(es) == before, "every setting restored"
    marker.unlink()  # the load balancer's API is back
    resumed = orchestrate("resume", "--config", str(path), "--json", timeout=900)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert starts_logged(sandboxes.status()) == {k: v + (k == "es-2") for k, v in starts.items()}
    assert settings(es) == before


def yellow_with(es: Any, index: str, replicas: int, **index_settings: Any) -> None:
    """Create an index that cannot be fully placed on the sandbox's 3 nodes; wait until only its
    unplaceable copy is left (yellow, nothing moving)."""
    es.indices.create(index=index, settings={"number_of_shards": 1, "number_of_replicas": replicas, **index_settings})
    assert settled_health(es, unassigned=1)["status"] == "yellow"


def test_a_settled_yellow_passes_an_unexplained_one_does_not_and_stop_after_chunks_the_run(
        sandboxes: SandboxManager) -> None:
    """An index with more copies than nodes (yellow by design) does not hold the run; one whose copy
    an allocation filter keeps out is refused with its explanation. --stop-after 1 ends the run after
    one batch with every setting restored (exit 11); `resume` passes the settled yellow at the gate."""
    info, es = prepared(sandboxes, Shape())
    before = settings(es)
    starts = starts_logged(info)
    master = es.cat.master(format="json")[0]["node"]
    try:
        yellow_with(es, "unexplained-1", 2, **{"index.routing.allocation.exclude._name": master})
        refused = orchestrate("plan", "--cluster", "sandbox", "--json")
        assert refused.returncode == 6, refused.stderr[-1500:]
        problems = " ".join(json.loads(refused.stdout)["problems"])
        assert "yellow and not settled: [unexplained-1][0]r" in problems and f"{master}: filter:" in problems
        es.indices.delete(index="unexplained-1")

        yellow_with(es, "by-design-1", 3)
        plan = json.loads(orchestrate("plan", "--cluster", "sandbox", "--exclude", master, "--json").stdout)
        assert plan["safe"] and any(n.startswith("the cluster is yellow, settled: index(es) by-design-1")
                                    for n in plan["notes"])
        order = [b["nodes"][0] for b in plan["batches"]]
        stopped = orchestrate("restart", "--cluster", "sandbox", "--exclude", master, "--stop-after", "1",
                              "--yes", "--json", timeout=900)
        assert stopped.returncode == 11, stopped.stderr[-2000:]
        assert_no_traceback(stopped)
        events = json_lines(stopped.stdout)
        assert any(e.get("data", {}).get("settled_yellow") == {"too_few_nodes": ["by-design-1"]} for e in events)
        assert "stopped after 1 batch as asked (--stop-after 1); 1 batch left" in stopped.stderr
        assert starts_logged(sandboxes.status()) == {**starts, order[0]: starts[order[0]] + 1}
        assert settings(es) == before, "nothing left set between two parts of the run"
        # A planned stop has a result of its own, not the "aborted" a Ctrl-C gets.
        assert events[-1]["result"] == "stopped" and events[-1]["exit_code"] == 11, events[-1]
        assert json.loads(orchestrate("status", "--cluster", "sandbox", "--json").stdout)["run"]["state"] == "stopped"

        resumed = orchestrate("resume", "--cluster", "sandbox", "--json", timeout=900)
        assert resumed.returncode == 0, resumed.stderr[-2000:]
        assert json_lines(resumed.stdout)[-1]["result"] == "succeeded"
        assert starts_logged(sandboxes.status()) == {**starts, **{n: starts[n] + 1 for n in order}}
        assert settings(es) == before
    finally:
        es.indices.delete(index="unexplained-1,by-design-1", ignore_unavailable=True)
