"""Host tuning on real test hosts: drift found, fixed, persisted across a reboot; tuned handled;
the real machine's kernel settings never touched."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.helpers import REPO, assert_no_traceback, orchestrate
from tests.integration.conftest import SandboxManager, Shape
from tests.integration.test_sandbox import real_knob_values, ssh

THP = "/sys/kernel/mm/transparent_hugepage/enabled"


def tune(*args: str) -> tuple[int, list[dict[str, Any]]]:
    proc = orchestrate("tune", "--cluster", "sandbox", "--json", *args)
    assert_no_traceback(proc)
    return proc.returncode, [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


def knobs(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {k["knob"]: k for k in report["knobs"]}


@pytest.mark.sandbox_first  # it asks a fresh sandbox: as its group's first test, that is the group's one start
def test_check_apply_idempotent_and_persistent(sandboxes: SandboxManager) -> None:
    real_before = real_knob_values()
    info = sandboxes.get(Shape(), fresh=True)
    rc, reports = tune("--check")
    assert rc == 1 and len(reports) == 3
    for r in reports:
        k = knobs(r)
        assert r["drift"] is True
        assert k["thp.enabled"]["live"] == "always" and k["thp.enabled"]["persisted"] is None
        assert k["numad"]["live"] == "running"
        assert k["sysctl vm.zone_reclaim_mode"]["live"] == "1"
        assert any(name.startswith("io_scheduler[") and v["live"] == "mq-deadline" for name, v in k.items())

    # A live-only fix does not survive a reboot: proof that the reboot really resets the knobs.
    assert ssh(info, "es-1", f"echo never > {THP}").returncode == 0
    assert orchestrate("sandbox", "reboot", "es-1").returncode == 0
    assert ssh(info, "es-1", f"cat {THP}").stdout.strip() == "[always] madvise never"

    refused = orchestrate("tune", "--cluster", "sandbox", "--apply")  # off a terminal, without --yes
    assert refused.returncode == 5 and "no --yes: refusing to change host tuning" in refused.stderr
    assert ssh(info, "es-1", f"cat {THP}").stdout.strip() == "[always] madvise never", "nothing changed"
    rc, reports = tune("--apply", "--yes")
    assert rc == 0, reports
    assert all(not r["drift"] and r["applied"] for r in reports)
    thp = next(c for c in reports[0]["changes"] if c["knob"] == "thp.enabled")  # what the host was and became
    assert thp["before"] == {"live": "always", "persisted": None} and thp["after"]["live"] == "never"
    rc, reports = tune("--check")
    assert rc == 0 and not any(r["drift"] for r in reports), reports
    rc, reports = tune("--apply", "--yes")
    assert rc == 0 and all(r["applied"] == [] for r in reports), f"a second apply must change nothing: {reports}"
    human = orchestrate("tune", "--cluster", "sandbox", "--apply", "--yes")
    assert "nothing to change, already tuned" in human.stderr

    for node in ("es-1", "es-2"):
        assert orchestrate("sandbox", "reboot", node).returncode == 0
    assert ssh(info, "es-2", "pgrep -x numad").returncode == 1
    rc, reports = tune("--check")
    assert rc == 0, [k for r in reports for k in r["knobs"] if k["drift"]]
    assert real_knob_values() == real_before


def test_active_tuned_profile_is_handled_not_overwritten(sandboxes: SandboxManager) -> None:
    info = sandboxes.get(Shape(), fresh=True)
    fixtures = REPO / "tests" / "fixtures"
    setup = (
        "mkdir -p /etc/tuned/throughput-performance && printf '[main]\\nsummary=stock\\n\\n[vm]\\n"
        "transparent_hugepages=always\\n' > /etc/tuned/throughput-performance/tuned.conf && "
        "echo throughput-performance > /etc/tuned/active_profile && "
        "printf '[Service]\\nExecStart=/usr/local/bin/tuned\\n' > /etc/systemd/system/tuned.service && "
        "cat > /usr/local/bin/tuned && chmod +x /usr/local/bin/tuned && systemctl enable tuned"
    )
    put = subprocess.run(["ssh", "-F", info["ssh_config"], "es-3", setup], input=(fixtures / "tuned").read_text(),
                         capture_output=True, text=True, timeout=60)
    assert put.returncode == 0, put.stderr
    adm = subprocess.run(["ssh", "-F", info["ssh_config"], "es-3",
                          "cat > /usr/local/bin/tuned-adm && chmod +x /usr/local/bin/tuned-adm && "
                          "systemctl start tuned && sleep 0.5 && cat " + THP],
                         input=(fixtures / "tuned-adm").read_text(), capture_output=True, text=True, timeout=60)
    assert adm.stdout.strip() == "always", adm

    rc, reports = tune("--check", "--nodes", "es-3")
    thp = knobs(reports[0])["thp.enabled"]
    assert rc == 1 and "tuned profile 'throughput-performance'" in (thp["note"] or "")

    rc, reports = tune("--apply", "--yes", "--nodes", "es-3")
    assert rc == 0, reports
    active = ssh(info, "es-3", "cat /etc/tuned/active_profile; cat /etc/tuned/orchestrator-throughput-performance/"
                               "tuned.conf")
    assert active.stdout.startswith("orchestrator-throughput-performance")
    assert "include=throughput-performance" in active.stdout and "transparent_hugepages=never" in active.stdout
    # tuned restarting (as it does at boot) now keeps THP off, and so does a reboot.
    assert ssh(info, "es-3", f"systemctl restart tuned && sleep 0.5 && cat {THP}").stdout.strip() == "never"
    assert orchestrate("sandbox", "reboot", "es-3").returncode == 0
    assert ssh(info, "es-3", f"sleep 0.5; cat {THP}").stdout.strip() == "never"
    rc, _ = tune("--check", "--nodes", "es-3")
    assert rc == 0


def test_hostile_data_path_cannot_run_commands(sandboxes: SandboxManager, tmp_path: Path) -> None:
    info = sandboxes.get(Shape())
    inv = yaml.safe_load(Path(info["inventory"]).read_text())
    inv["nodes"][0]["data_paths"] = ["/tmp/x; touch /tmp/pwned #", "/$(touch /tmp/pwned2)"]
    path = tmp_path / "inv.yaml"
    path.write_text(yaml.safe_dump(inv))
    proc = orchestrate("tune", "--config", str(path), "--nodes", "es-1", "--json")
    assert_no_traceback(proc)
    report = json.loads(proc.stdout.splitlines()[0])
    errors = [k["error"] for k in report["knobs"] if k["knob"].startswith("io_scheduler")]
    assert errors and all("cannot find the device" in e for e in errors)
    assert ssh(info, "es-1", "ls /tmp/pwned /tmp/pwned2").returncode != 0
    inv["nodes"][0]["data_paths"] = ["-x"]  # an option, not a path: refused before anything runs
    path.write_text(yaml.safe_dump(inv))
    refused = orchestrate("tune", "--config", str(path), "--nodes", "es-1", "--json")
    assert refused.returncode == 2 and "data_paths" in refused.stderr, refused.stderr


def test_unreadable_knob_is_reported_not_guessed(sandboxes: SandboxManager, tmp_path: Path) -> None:
    info = sandboxes.get(Shape())
    profile_dir = tmp_path / "tuning"  # beside the inventory: found first
    profile_dir.mkdir(parents=True)
    (profile_dir / "odd.yaml").write_text("name: odd\nknobs:\n  sysctl: {vm.no_such_knob: '1'}\n")
    inv = yaml.safe_load(Path(info["inventory"]).read_text())
    inv["tuning"]["profile"] = "odd"
    (tmp_path / "inv.yaml").write_text(yaml.safe_dump(inv))
    proc = orchestrate("tune", "--config", str(tmp_path / "inv.yaml"), "--nodes", "es-1", "--json")
    assert proc.returncode == 1
    knob = json.loads(proc.stdout.splitlines()[0])["knobs"][0]
    assert knob["live"] is None and "No such file or directory" in knob["error"]
