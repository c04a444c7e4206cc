"""The tool as operators run it on hosts where root cannot log in: SSH as the non-root `deploy` user,
every host command through the host's real sudo (Debian's), which asks for deploy's password. The
password comes from a secret file and is never in an argument, the journal, the audit log or the output."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import yaml

from orchestrator.sandbox.host_setup import SUDO_LOG
from tests.helpers import assert_no_traceback, json_lines, orchestrate
from tests.integration.conftest import SandboxManager, Shape
from tests.integration.test_restart import prepared, starts_logged
from tests.integration.test_sandbox import ssh

ZONE_RECLAIM = "/proc/sys/vm/zone_reclaim_mode"


def as_deploy(tmp_path: Path, info: dict[str, Any], password_file: str) -> Path:
    """The sandbox's inventory, its hosts reached as `deploy` with sudo and the password in ``password_file``."""
    inv = yaml.safe_load(Path(info["inventory"]).read_text())
    inv["ssh"].update({"user": info["deploy_user"], "sudo": True, "sudo_password": {"file": password_file}})
    path = tmp_path / f"deploy-{Path(password_file).name}.yaml"
    path.write_text(yaml.safe_dump(inv))
    return path


def everything_written(info: dict[str, Any], outputs: list[str]) -> str:
    """The runs' journals and audit logs, and what the commands printed."""
    runs = Path(info["inventory"]).parent.parent / "runs"
    files = [p.read_text(errors="replace") for p in runs.rglob("*") if p.is_file()] if runs.is_dir() else []
    return "\n".join(files + outputs)


def test_tune_and_restart_as_deploy_through_sudo_with_a_password(sandboxes: SandboxManager, tmp_path: Path) -> None:
    info, _es = prepared(sandboxes, Shape())
    password = Path(info["deploy_password_file"]).read_text().strip()
    path = as_deploy(tmp_path, info, info["deploy_password_file"])
    asks = ssh(info, "es-3", "sudo -n -u deploy sudo -n /bin/sh -c true")  # root becomes deploy, then asks sudo
    assert asks.returncode == 1 and "a password is required" in asks.stderr, asks.stderr
    wrong = tmp_path / "wrong.password"
    wrong.write_text("not-the-password\n")
    wrong.chmod(0o600)

    wrong_inventory = as_deploy(tmp_path, info, str(wrong))
    starts = starts_logged(info)
    preflight = orchestrate("restart", "--config", str(wrong_inventory), "--yes", timeout=300)
    assert preflight.returncode == 5, preflight.stderr[-2000:]
    assert_no_traceback(preflight)
    assert "sudo did not accept the password of deploy" in preflight.stderr
    assert starts_logged(info) == starts, "a refused sudo password stops the run at preflight"

    # Drift on es-3 only, made as root; deploy fixes it through sudo.
    assert ssh(info, "es-3", f"echo 1 > {ZONE_RECLAIM}").returncode == 0
    refused = orchestrate("tune", "--config", str(wrong_inventory), "--nodes", "es-3",
                          "--apply", "--yes", "--json")
    assert_no_traceback(refused)
    assert refused.returncode != 0
    assert "sudo did not accept the password of deploy" in refused.stdout + refused.stderr
    assert ssh(info, "es-3", f"cat {ZONE_RECLAIM}").stdout.strip() == "1", "nothing changed"

    tuned = orchestrate("tune", "--config", str(path), "--nodes", "es-3", "--apply", "--yes", "--json")
    assert tuned.returncode == 0, tuned.stderr[-2000:]
    report = json_lines(tuned.stdout)[0]
    assert "sysctl vm.zone_reclaim_mode" in [c["knob"] for c in report["changes"]], report
    assert ssh(info, "es-3", f"cat {ZONE_RECLAIM}").stdout.strip() == "0"

    starts = starts_logged(info)
    run = orchestrate("restart", "--config", str(path), "--nodes", "es-3", "--yes", "--json", timeout=900)
    assert run.returncode == 0, run.stderr[-3000:]
    assert json_lines(run.stdout)[-1]["result"] == "succeeded"
    assert starts_logged(info) == {**starts, "es-3": starts["es-3"] + 1}, "es-3 restarted exactly once"

    # What ran as root went through deploy's sudo: the host's sudo log shows the service's stop and start.
    sudo_log = ssh(info, "es-3", f"cat {SUDO_LOG}").stdout
    assert "USER=root" in sudo_log and "deploy" in sudo_log
    assert "systemctl stop elasticsearch" in sudo_log and "systemctl start elasticsearch" in sudo_log
    written = everything_written(info, [tuned.stdout, tuned.stderr, run.stdout, run.stderr,
                                        refused.stdout, refused.stderr, preflight.stderr])
    assert "sudo -S -p '' -v" in written, "the audit log has the commands as sent"
    assert password not in written and password not in sudo_log
    status = json.loads(orchestrate("status", "--cluster", "sandbox", "--json").stdout)
    assert status["lock"] is None


SUDOERS = "/etc/sudoers.d/orchestrator-deploy"
SYSCTL_FILE = "/etc/sysctl.d/99-orchestrator.conf"


def test_exact_sudo_rules_printed_by_the_tool_are_enough_for_tune_and_restart(sandboxes: SandboxManager,
                                                                              tmp_path: Path) -> None:
    """`orchestrate sudoers` prints the rules; installed on es-2 in place of the /bin/sh rule, deploy may
    run exactly those commands (no shell), and `tune --apply` and a restart of es-2 go through them."""
    info, _es = prepared(sandboxes, Shape())
    printed = orchestrate("sudoers", "--cluster", "sandbox", "--user", "deploy", "--nodes", "es-2")
    assert printed.returncode == 0, printed.stderr
    rules = printed.stdout
    assert "/bin/sh" not in rules and "NOPASSWD: ORCHESTRATOR" in rules
    assert "/usr/bin/systemctl stop elasticsearch" in rules and f"/usr/bin/tee {ZONE_RECLAIM}" in rules
    (tmp_path / "rules").write_text(rules)
    checked = subprocess.run(["visudo", "-cf", str(tmp_path / "rules")], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr

    inv = yaml.safe_load(Path(info["inventory"]).read_text())
    inv["ssh"].update({"user": "deploy", "sudo": True, "sudo_rules": "commands"})
    path = tmp_path / "exact.yaml"
    path.write_text(yaml.safe_dump(inv))
    shell_rule = ssh(info, "es-2", f"cat {SUDOERS}").stdout
    logged = f"Defaults:deploy logfile={SUDO_LOG}, loglinelen=0\n"
    installed = subprocess.run(["ssh", "-F", info["ssh_config"], "es-2",
                                f"cat > {SUDOERS}.new && chmod 0440 {SUDOERS}.new && mv {SUDOERS}.new {SUDOERS}"],
                               input=logged + rules, capture_output=True, text=True, timeout=60)
    assert installed.returncode == 0, installed.stderr
    try:
        earlier = len(ssh(info, "es-2", f"cat {SUDO_LOG}").stdout)  # what other tests' runs had sudo do
        allowed = ssh(info, "es-2", "sudo -n -u deploy sudo -n -l /usr/bin/systemctl stop elasticsearch")
        assert allowed.returncode == 0, allowed.stderr
        shell = ssh(info, "es-2", "sudo -n -u deploy sudo -n -l /bin/sh")
        assert shell.returncode != 0, "no shell for deploy under the exact rules"

        # Drift on es-2, live and persisted, made as root.
        assert ssh(info, "es-2", f"echo 1 > {ZONE_RECLAIM} && rm -f {SYSCTL_FILE}").returncode == 0
        tuned = orchestrate("tune", "--config", str(path), "--nodes", "es-2", "--apply", "--yes", "--json")
        assert tuned.returncode == 0, tuned.stdout[-2000:] + tuned.stderr[-2000:]
        assert ssh(info, "es-2", f"cat {ZONE_RECLAIM}").stdout.strip() == "0"
        assert "vm.zone_reclaim_mode = 0" in ssh(info, "es-2", f"cat {SYSCTL_FILE}").stdout

        starts = starts_logged(info)
        run = orchestrate("restart", "--config", str(path), "--nodes", "es-2", "--yes", "--json", timeout=900)
        assert run.returncode == 0, run.stderr[-3000:]
        assert starts_logged(info) == {**starts, "es-2": starts["es-2"] + 1}, "es-2 restarted exactly once"
        sudo_log = ssh(info, "es-2", f"cat {SUDO_LOG}").stdout[earlier:]
        assert "COMMAND=/usr/bin/systemctl stop elasticsearch" in sudo_log
        assert f"COMMAND=/usr/bin/tee {ZONE_RECLAIM}" in sudo_log
        assert "COMMAND=/bin/sh" not in sudo_log and "command not allowed" not in sudo_log, sudo_log
    finally:
        restored = subprocess.run(["ssh", "-F", info["ssh_config"], "es-2", f"cat > {SUDOERS}"],
                                  input=shell_rule, capture_output=True, text=True, timeout=60)
        assert restored.returncode == 0, restored.stderr
