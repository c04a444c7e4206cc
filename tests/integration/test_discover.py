"""`inventory discover` on the real sandbox: the inventory it writes matches the one the sandbox
wrote, and a restart with it succeeds."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from tests.helpers import assert_no_traceback, json_lines, orchestrate
from tests.integration.conftest import SandboxManager, Shape
from tests.integration.test_restart import prepared


def test_discovered_inventory_matches_the_sandbox_one_and_runs(sandboxes: SandboxManager, tmp_path: Path) -> None:
    info, _es = prepared(sandboxes, Shape())
    written = tmp_path / "discovered.yaml"
    # As the sandbox's least-privilege user, over TLS with its CA: as an operator would on a secured cluster.
    secured = ["--ca-file", info["ca_file"], "--username", info["tool_username"],
               "--password-file", info["tool_password_file"]]
    proc = orchestrate("inventory", "discover", "--endpoint", info["endpoints"][0], "--name", "sandbox",
                       "--ssh-config", info["ssh_config"], *secured, "-o", str(written), "--all-endpoints",
                       timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert_no_traceback(proc)
    again = orchestrate("inventory", "discover", "--endpoint", info["endpoints"][0], "-o", str(written))
    assert again.returncode == 2 and "exists; --force replaces it" in again.stderr
    found = yaml.safe_load(written.read_text())
    sandbox = yaml.safe_load(Path(info["inventory"]).read_text())
    for key in ("name", "ca_file", "username", "password"):  # the password as its file, never the value
        assert found["cluster"][key] == sandbox["cluster"][key], key
    assert sorted(found["cluster"]["endpoints"]) == sorted(sandbox["cluster"]["endpoints"])
    # Name and data paths as the sandbox's (one zone: none); each host is the SSH config's alias, resolved
    # by every run through the config the inventory names, as `ssh es-1` resolves it.
    assert [{**n, "host": n["name"]} for n in sandbox["nodes"]] == found["nodes"]
    assert found["ssh"]["config_file"] == info["ssh_config"]
    for key in ("user", "key_file", "known_hosts"):
        assert found["ssh"][key] == sandbox["ssh"][key], key
    assert found["tuning"] == sandbox["tuning"]

    # A run with it (one node: the whole plan is checked, every host reached over SSH at preflight).
    run = orchestrate("restart", "--config", str(written), "--nodes", "es-2", "--yes", "--json", timeout=900)
    assert run.returncode == 0, run.stderr[-3000:]
    summary = json_lines(run.stdout)[-1]
    assert summary["result"] == "succeeded" and [n["name"] for n in summary["nodes"]] == ["es-2"]
    assert json.loads(orchestrate("status", "--cluster", "sandbox", "--json").stdout)["lock"] is None
