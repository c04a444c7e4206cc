"""A fourth product added as docs/architecture.md says: a package of its own (tests/toy/toy_product),
found by the registry through its entry point, with its own inventory section, steps, plan and adapter.
The orchestrator's code is not touched: `orchestrate plan` and `orchestrate restart` run it as a user
would, over processes this test starts (each node is a `sleep`), and mypy checks it (Makefile: lint)."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import REPO, json_lines, orchestrate

TOY = REPO / "tests" / "toy"
NODES = ("t-1", "t-2", "t-3")


def pids(state: Path) -> dict[str, int]:
    return {n: int((state / f"{n}.pid").read_text()) for n in NODES if (state / f"{n}.pid").exists()}


@pytest.fixture
def toy_cluster(tmp_path: Path) -> Iterator[tuple[Path, dict[str, str]]]:
    state = tmp_path / "toy"
    state.mkdir()
    d = shlex.quote(str(state))
    start = f"setsid sleep 600 </dev/null >/dev/null 2>&1 & echo $! > {d}/{{node}}.pid"
    stop = (f"pid=$(cat {d}/{{node}}.pid) && kill $pid && for i in $(seq 100); do kill -0 $pid 2>/dev/null || "
            "exit 0; sleep 0.05; done; exit 1")
    status = f"kill -0 $(cat {d}/{{node}}.pid 2>/dev/null) 2>/dev/null"
    (tmp_path / "toy.yaml").write_text(json.dumps({
        "cluster": {"name": "toyc", "product": "toy"}, "ssh": {"transport": "local"},
        "service": {"manager": "commands", "start": start, "stop": stop, "status": status},
        "nodes": [{"name": n, "host": "127.0.0.1"} for n in NODES],
        "timeouts": {"stop_s": 10, "start_s": 10, "join_s": 10, "recovery_s": 10, "poll_interval_s": 0.1},
        "toy": {"state_dir": str(state)}}))
    for n in NODES:
        subprocess.run(["sh", "-c", start.replace("{node}", n)], check=True, timeout=10)
    env = {"PYTHONPATH": f"{TOY}{os.pathsep}{REPO}", "ORCHESTRATOR_STATE": str(tmp_path / "state")}
    yield tmp_path / "toy.yaml", env
    for pid in pids(state).values():  # the processes this test started, by their ids
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)


def test_a_fourth_product_is_a_package_of_its_own_found_through_the_registry(toy_cluster) -> None:  # type: ignore[no-untyped-def]
    config, env = toy_cluster
    state = config.parent / "toy"
    before = pids(state)
    plan = orchestrate("plan", "--config", str(config), env=env, timeout=60)
    assert plan.returncode == 0, plan.stderr
    assert "process" in plan.stdout and str(before["t-2"]) in plan.stdout, plan.stdout  # its own column
    run = orchestrate("restart", "--config", str(config), "--yes", "--json", env=env, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    summary = json_lines(run.stdout)[-1]
    assert summary["result"] == "succeeded" and [n["name"] for n in summary["nodes"]] == list(NODES)
    after = pids(state)
    assert set(after) == set(NODES) and all(after[n] != before[n] for n in NODES), (before, after)
    # Its run step raised the limit in its cluster; the engine put it back exactly (unset) at the end.
    assert any("toy.limit" in line.get("message", "") for line in json_lines(run.stdout)), run.stdout[-3000:]
    assert json.loads((state / "settings.json").read_text()) == {}
    assert not (state / "lock-orchestrator-locks-run.json").exists(), "the run's lock is released"
    # Its journal stays copied beside it, for `status` from any machine.
    assert (state / "lock-orchestrator-locks-journal.json").exists()
    # Its own section is checked when the inventory is opened: nothing runs with a wrong one.
    broken = json.loads(config.read_text())
    broken["toy"] = {"state_dir": str(state), "colour": "blue"}
    config.write_text(json.dumps(broken))
    refused = orchestrate("plan", "--config", str(config), env=env, timeout=60)
    assert refused.returncode == 2 and "toy.colour" in refused.stderr and "Traceback" not in refused.stderr, \
        refused.stderr
    # Without the package on the path, the product is unknown, said as such.
    unknown = orchestrate("plan", "--config", str(config), env={**env, "PYTHONPATH": str(REPO)}, timeout=60)
    assert unknown.returncode == 2 and "unknown product 'toy'" in unknown.stderr, unknown.stderr
