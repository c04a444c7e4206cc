"""The tool's own SSH through an OpenSSH client config on real sshd hosts: Host aliases resolved,
keys from IdentityFile, and chained ProxyJump (es-3 reached through es-1 then es-2), as the hosts'
own sshd logs show; and a sandbox whose hosts only a bastion reaches."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.helpers import assert_no_traceback, json_lines, orchestrate
from tests.integration.conftest import SandboxManager, Shape


def accepted_from(info: dict[str, object], host: str) -> list[str]:
    """Whom the host's sshd accepted, from its journal, read from here (reading it over SSH would add to it)."""
    journal = Path(str(info["inventory"])).parent / "hosts" / host / "rootfs" / "var" / "log" / "journal"
    said = subprocess.run(["journalctl", "-D", str(journal), "-u", "ssh.service", "-o", "cat", "--no-pager"],
                          capture_output=True, text=True, timeout=60).stdout
    return re.findall(r"Accepted publickey for root from (\S+)", said)


def test_hosts_reached_through_the_ssh_config_and_chained_jump_hosts(sandboxes: SandboxManager,
                                                                       tmp_path: Path) -> None:
    info = sandboxes.get(Shape())
    address = {n["name"]: n["host"] for n in info["nodes"]}
    # The sandbox's own ssh_config, with es-2 behind es-1 and es-3 behind es-1 then es-2.
    config = Path(str(info["ssh_config"])).read_text()
    config = config.replace(f"HostName {address['es-2']}\n", f"HostName {address['es-2']}\n  ProxyJump es-1\n")
    config = config.replace(f"HostName {address['es-3']}\n", f"HostName {address['es-3']}\n  ProxyJump es-1,es-2\n")
    (tmp_path / "ssh_config").write_text(config)
    inventory = yaml.safe_load(Path(str(info["inventory"])).read_text())
    inventory["ssh"] = {"transport": "ssh", "config_file": str(tmp_path / "ssh_config"),
                        "known_hosts": inventory["ssh"]["known_hosts"]}  # user and key from the config
    for node in inventory["nodes"]:
        node["host"] = node["name"]  # an alias only the SSH config resolves
    (tmp_path / "inv.yaml").write_text(yaml.safe_dump(inventory))
    before = {h: len(accepted_from(info, h)) for h in ("es-2", "es-3")}

    proc = orchestrate("tune", "--config", str(tmp_path / "inv.yaml"), "--check", "--json", timeout=300)
    assert_no_traceback(proc)
    reports = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert [r["node"] for r in reports] == ["es-1", "es-2", "es-3"] and all(r["error"] is None for r in reports), \
        proc.stderr[-2000:]
    # es-2's sshd saw only es-1 (for es-2 itself, and as the second jump towards es-3); es-3's saw only es-2.
    assert set(accepted_from(info, "es-2")[before["es-2"]:]) == {address["es-1"]}
    assert accepted_from(info, "es-3")[before["es-3"]:] == [address["es-2"]]

    broken = config.replace("ProxyJump es-1,es-2", "ProxyJump es-1,10.231.0.250")
    (tmp_path / "ssh_config").write_text(broken)
    failed = orchestrate("tune", "--config", str(tmp_path / "inv.yaml"), "--check", "--json", "--nodes", "es-3",
                         timeout=300)
    assert_no_traceback(failed)
    report = json.loads(failed.stdout.splitlines()[-1])
    assert failed.returncode == 1 and "the jump host cannot reach root@10.231.0.250:22" in report["error"], report


@pytest.mark.sandbox_shape("bastion")
def test_behind_a_bastion_direct_ssh_fails_and_the_run_goes_through_it(sandboxes: SandboxManager,
                                                                        tmp_path: Path) -> None:
    info = sandboxes.get(Shape(bastion=True, secured=False))  # SSH routing; insecure for CI's time
    ssh_dir = Path(str(info["ssh_config"])).parent
    direct = ["ssh", "-o", "ConnectTimeout=3", "-o", "BatchMode=yes", "-i", str(ssh_dir / "id_ed25519"),
              "-o", f"UserKnownHostsFile={ssh_dir / 'known_hosts'}"]
    for address in (info["nodes"][0]["host"], "10.232.0.11"):  # its front address; the network behind
        proc = subprocess.run([*direct, f"root@{address}", "true"], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 255, proc.stderr
    bastion = str(info["bastion"])
    assert bastion and subprocess.run([*direct, f"root@{bastion}", "true"], timeout=60).returncode == 0
    before = {n: len(accepted_from(info, n)) for n in ("es-1", "es-2", "es-3")}

    # The hosts' tuning checked on all three, and a restart of one node: all through the bastion.
    check = orchestrate("tune", "--cluster", "sandbox", "--check", "--json", timeout=300)
    assert [json.loads(line)["error"] for line in check.stdout.splitlines() if line.startswith("{")] == [None] * 3
    run = orchestrate("restart", "--cluster", "sandbox", "--nodes", "es-2", "--yes", "--json", timeout=900)
    assert run.returncode == 0, run.stderr[-3000:]
    assert json_lines(run.stdout)[-1]["result"] == "succeeded"
    for node in ("es-1", "es-2", "es-3"):  # every SSH connection to a node came from the bastion
        seen = set(accepted_from(info, node)[before[node]:])
        assert seen == {"10.232.0.10"}, (node, seen)

    # The same hosts through a ProxyCommand (`ssh -W`, as AWS SSM or Teleport would be used): refused until
    # the inventory allows local commands, then every connection runs through it, from the bastion.
    config = Path(str(info["ssh_config"]))
    bastion_alias = re.findall(r"ProxyJump (\S+)", config.read_text())[0]
    proxied = config.read_text().replace(
        f"  ProxyJump {bastion_alias}\n", f"  ProxyCommand ssh -F {config} -W %h:%p {bastion_alias}\n")
    assert "ProxyJump" not in proxied
    (tmp_path / "ssh_config").write_text(proxied)
    inventory = yaml.safe_load(Path(str(info["inventory"])).read_text())
    inventory["ssh"]["config_file"] = str(tmp_path / "ssh_config")
    (tmp_path / "inv.yaml").write_text(yaml.safe_dump(inventory))
    refused = orchestrate("tune", "--config", str(tmp_path / "inv.yaml"), "--check", timeout=300)
    assert_no_traceback(refused)
    # Each host's report says it (tune reports per host; a restart's SSH preflight refuses the run).
    assert refused.returncode == 1 and "ProxyCommand runs a local command" in refused.stdout, refused.stdout[-2000:]
    inventory["ssh"]["allow_local_commands"] = True
    (tmp_path / "inv.yaml").write_text(yaml.safe_dump(inventory))
    before = {n: len(accepted_from(info, n)) for n in ("es-1", "es-2", "es-3")}
    check = orchestrate("tune", "--config", str(tmp_path / "inv.yaml"), "--check", "--json", timeout=300)
    assert_no_traceback(check)
    reports = [json.loads(line) for line in check.stdout.splitlines() if line.startswith("{")]
    assert [r["error"] for r in reports] == [None] * 3, check.stderr[-2000:]
    for node in ("es-1", "es-2", "es-3"):
        assert set(accepted_from(info, node)[before[node]:]) == {"10.232.0.10"}, node

