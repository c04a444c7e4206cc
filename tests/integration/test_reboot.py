"""`restart --reboot` on real test hosts: each host's systemd reboots it (`systemctl reboot`: the tool's
SSH session is cut, a new boot id read over SSH, the journal holds one boot more), its boot starts
Elasticsearch (enabled unit; not started twice), and the tuning is checked after the boot: a knob
whose persistence was taken away on one host is reported NOT PERSISTED and set again. The machine's own
values never change."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from tests.helpers import assert_no_traceback, json_lines, orchestrate
from tests.integration.conftest import SandboxManager, Shape
from tests.integration.test_restart import prepared, settings, starts_logged
from tests.integration.test_sandbox import real_knob_values, ssh

BOOT_ID = "/proc/sys/kernel/random/boot_id"
# Between the tuning and the reboot, es-2 loses the persisted swappiness (as a host whose sysctl.d
# is managed by someone else would): the boot brings the default back.
PLAYBOOK = {
    "name": "reboot-with-a-lost-setting", "product": "elasticsearch",
    "before_run": ["raise_recovery_limits"],
    "batch": ["restrict_allocation", "flush", "stop_service", "tune_host",
              {"command": {"name": "lose-swappiness", "where": "host",
                           "run": "[ {node} != es-2 ] || sed -i /vm.swappiness/d /etc/sysctl.d/99-orchestrator.conf"}},
              "reboot_host", "check_tuning", "start_service", "wait_for_join", "restore_allocation",
              "wait_for_recovery"],
}


def boot_ids(info: dict[str, object]) -> dict[str, str]:
    return {n: ssh(info, n, f"cat {BOOT_ID}").stdout.strip() for n in ("es-1", "es-2", "es-3")}


def test_reboot_restart_gives_each_host_a_new_boot_and_reports_a_knob_that_was_not_persisted(
        sandboxes: SandboxManager, tmp_path: Path) -> None:
    machine_before = {**real_knob_values(), BOOT_ID: Path(BOOT_ID).read_text()}
    info, es = prepared(sandboxes, Shape())
    before_boots = boot_ids(info)
    journal_boots = {n: len(ssh(info, n, "journalctl --list-boots --no-pager").stdout.splitlines())
                     for n in before_boots}
    before_starts = starts_logged(info)
    before_settings = settings(es)
    inventory = yaml.safe_load(Path(str(info["inventory"])).read_text())
    (tmp_path / "reboot.yaml").write_text(yaml.safe_dump(PLAYBOOK))
    inventory["playbook"] = str(tmp_path / "reboot.yaml")
    config = tmp_path / "sandbox.yaml"
    config.write_text(yaml.safe_dump(inventory))

    # Two hosts: es-2's knob is not persisted, es-1's tuning survives (a third host: only CI's time).
    proc = orchestrate("restart", "--config", str(config), "--reboot", "--nodes", "es-1", "--nodes", "es-2", "--yes",
                       "--json", timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert_no_traceback(proc)
    events = json_lines(proc.stdout)
    summary = events[-1]
    assert summary["result"] == "succeeded" and summary["message"] == "all 2 batches rebooted"
    after_boots = boot_ids(info)
    rebooted = {n for n in before_boots if after_boots[n] != before_boots[n]}
    assert rebooted == {"es-1", "es-2"} and all(after_boots.values()), (before_boots, after_boots)
    assert all("reboot" in n["phases"] for n in summary["nodes"])
    # A real boot of each host's systemd: its journal keeps the boot before and holds one boot more.
    assert {n: len(ssh(info, n, "journalctl --list-boots --no-pager").stdout.splitlines()) for n in before_boots} \
        == {n: c + (n in rebooted) for n, c in journal_boots.items()}
    lost = {n["name"]: n.get("not_persisted") for n in summary["nodes"]}
    assert lost == {"es-1": None, "es-2": ["sysctl vm.swappiness"]}, lost
    assert any(e["event"] == "warning" and "es-2: host tuning did not survive the reboot: sysctl vm.swappiness NOT "
               "PERSISTED" in e["message"] for e in events)
    assert sum(1 for e in events if "host tuning survived the reboot" in str(e.get("message"))) == 1
    page = Path(str(summary["journal"])).with_suffix(".html").read_text()
    assert 'id="not-persisted"' in page and "NOT PERSISTED" in page

    # Fixed and persisted again by the run: the tuning is clean, also after one more reboot of es-2.
    assert ssh(info, "es-2", "cat /proc/sys/vm/swappiness").stdout.strip() == "1"
    assert orchestrate("sandbox", "reboot", "es-2").returncode == 0
    check = orchestrate("tune", "--cluster", "sandbox", "--check", "--json")
    assert check.returncode == 0, [k for line in check.stdout.splitlines() if line.startswith("{")
                                   for k in json.loads(line)["knobs"] if k["drift"]]
    assert starts_logged(sandboxes.status())["es-1"] == before_starts["es-1"] + 1, "started once, by its boot"
    assert settings(es) == before_settings
    assert es.cluster.health(wait_for_status="green", timeout="120s")["status"] == "green"
    assert {**real_knob_values(), BOOT_ID: Path(BOOT_ID).read_text()} == machine_before, "the machine is untouched"


def test_reboot_is_refused_for_hosts_reached_locally(tmp_path: Path, sandboxes: SandboxManager) -> None:
    info = sandboxes.get(Shape())
    inventory = yaml.safe_load(Path(str(info["inventory"])).read_text())
    inventory["ssh"] = {"transport": "local"}
    config = tmp_path / "local.yaml"
    config.write_text(yaml.safe_dump(inventory))
    refused = orchestrate("restart", "--config", str(config), "--reboot", "--yes", timeout=300)
    assert refused.returncode == 5, refused.stderr[-2000:]
    assert "with ssh.transport local it would reboot this machine" in refused.stderr
    assert json.loads(orchestrate("status", "--cluster", "sandbox", "--json").stdout)["lock"] is None
