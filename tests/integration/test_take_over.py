"""A run any operator can pick up (issue 60), on the real sandbox: started on machine A and killed there
(SIGKILL, a node down), seen by `status` from machine B and finished there by `resume --take-over`, once A's
lock is stale. Machine B is another state directory and another host name (a UTS namespace of its own): the
only thing the two share is the cluster, and the inventory file each operator has."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from orchestrator.restart.journal_copy import BASE_DOC
from orchestrator.restart.lock import LOCK_INDEX
from orchestrator.sandbox.rest import access_of
from tests.helpers import REPO, assert_no_traceback, json_lines
from tests.integration.conftest import SandboxManager, Shape
from tests.integration.test_restart import (
    ALLOC,
    custom_inventory,
    end_background_run,
    prepared,
    read_events_until,
    settings,
    starts_logged,
)

STALE_S = 30  # the inventory's timeouts.lock_stale_s: what machine B waits before it may take the run


def on_machine_b(state: Path, *args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    """`orchestrate ARGS` as on another machine: its own state directory, its own host name."""
    return subprocess.run(["unshare", "--uts", "sh", "-c", 'hostname machine-b && exec "$0" "$@"', sys.executable,
                           "-m", "orchestrator", *args], capture_output=True, text=True, timeout=timeout, cwd=REPO,
                          env={**os.environ, "ORCHESTRATOR_STATE": str(state)})


def test_a_run_killed_on_one_machine_is_seen_and_finished_from_another_and_a_planted_copy_is_refused(
        sandboxes: SandboxManager, tmp_path: Path) -> None:
    info, es = prepared(sandboxes, Shape())
    before_settings, before_starts = settings(es), starts_logged(info)
    inventory = str(custom_inventory(tmp_path, lambda inv: inv["timeouts"].update(lock_stale_s=STALE_S)))
    machine_b = tmp_path / "machine-b"
    # A run of the plan's first two nodes: batch 2 is where A is killed (a third node is only CI's time).
    batches = json.loads(subprocess.run([sys.executable, "-m", "orchestrator", "plan", "--config", inventory, "--json"],
                                        capture_output=True, text=True, cwd=REPO).stdout)["batches"]
    two = [batches[0]["nodes"][0], batches[1]["nodes"][0]]
    run = subprocess.Popen([sys.executable, "-m", "orchestrator", "restart", "--config", inventory, "--yes", "--json",
                            *(a for n in two for a in ("--nodes", n))],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
    try:  # machine A's run, killed at the worst moment: the second node down, the run's settings in force
        read_events_until(run, lambda e: e.get("event") == "phase" and e.get("batch") == 2
                          and e.get("phase") == "stopped", 300)
    finally:
        end_background_run(run, signal.SIGKILL, 30)
    killed_at = time.monotonic()
    assert settings(es)["persistent"].get(ALLOC) == "primaries"

    seen = on_machine_b(machine_b, "status", "--config", inventory, "--json")
    assert seen.returncode == 0, seen.stderr[-2000:]
    status = json.loads(seen.stdout)
    assert status["run"]["journal"].startswith("the cluster's copy, saved by "), status["run"]
    assert status["lock"]["run_id"] == status["run"]["run_id"] and status["lock"]["stale_after_s"] == STALE_S
    in_force = {s["key"]: s for s in status["temporary_settings"]}
    assert in_force[ALLOC]["live"] == "primaries" and in_force[ALLOC]["restore_to"] is None, "A's undo, seen from B"
    starts_at_kill = starts_logged(info)
    refused = on_machine_b(machine_b, "resume", "--config", inventory, "--take-over")
    assert time.monotonic() - killed_at < STALE_S - 5, "B asked while A's lock was still live (renewed every 3 s)"
    assert refused.returncode == 7 and "is alive" in refused.stderr, refused.stderr[-2000:]  # never two at once
    assert settings(es)["persistent"].get(ALLOC) == "primaries" and starts_logged(info) == starts_at_kill
    while time.monotonic() - killed_at < STALE_S + 2:  # bounded: the lock's stale time and a little
        time.sleep(1)
    interrupted = json.loads(on_machine_b(machine_b, "status", "--config", inventory, "--json").stdout)
    assert interrupted["run"]["state"] == "interrupted" and "--take-over" in interrupted["run"]["message"]

    taken = on_machine_b(machine_b, "resume", "--config", inventory, "--take-over", "--json")
    assert taken.returncode == 0, taken.stderr[-3000:]
    assert_no_traceback(taken)
    events = json_lines(taken.stdout)
    assert any(e.get("message", "").startswith("taking over run ") for e in events), [e.get("message") for e in events]
    assert events[-1]["result"] == "succeeded" and events[-1]["run_id"] == status["run"]["run_id"]
    assert starts_logged(sandboxes.status()) == {n: c + (n in two) for n, c in before_starts.items()}, "each once"
    assert settings(es) == before_settings, "A's temporary settings put back by B"
    assert es.cluster.health()["status"] == "green"

    es.indices.refresh(index=LOCK_INDEX)
    copies = {h["_id"]: h["_source"] for h in es.search(index=LOCK_INDEX, size=1000)["hits"]["hits"]}
    assert BASE_DOC in copies and any(d.startswith("journal-log-") for d in copies), sorted(copies)
    assert access_of(info).password not in json.dumps(copies), "no secret in the cluster's copy"
    mine = on_machine_b(machine_b, "status", "--config", inventory, "--json")
    assert json.loads(mine.stdout)["run"]["state"] == "succeeded"

    # Planted: a copy that says it was written in another cluster, then one whose text does not match its digest.
    for field, value, said in (("identity", "another-clusters-uuid", "written in another cluster"),
                               ("base", copies[BASE_DOC]["base"].replace('"es-1"', '"es-9"', 1), "damaged")):
        es.index(index=LOCK_INDEX, id=BASE_DOC, document={**copies[BASE_DOC], field: value}, refresh=True)
        planted = on_machine_b(tmp_path / "machine-c", "resume", "--config", inventory, "--take-over")
        assert planted.returncode == 8 and said in planted.stderr, planted.stderr[-2000:]
        assert_no_traceback(planted)
    assert settings(es) == before_settings and starts_logged(sandboxes.status()) == {
        n: c + (n in two) for n, c in before_starts.items()}, "a planted copy changes nothing"
    es.index(index=LOCK_INDEX, id=BASE_DOC, document=copies[BASE_DOC], refresh=True)
