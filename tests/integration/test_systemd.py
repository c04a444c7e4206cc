"""The test hosts are real machines with systemd as PID 1, and the tool reads what systemd says: a unit
that fails to start stops the run with the unit's state and its journal, and a stop that systemd ends by
killing the service (past its TimeoutStopSec) is reported as killed, not as a clean stop."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.helpers import assert_no_traceback, json_lines, orchestrate
from tests.integration.conftest import SandboxManager, Shape
from tests.integration.test_restart import prepared
from tests.integration.test_sandbox import ssh

NODES = ("es-1", "es-2", "es-3")


def test_each_host_is_a_booted_systemd_machine_of_its_own(sandboxes: SandboxManager) -> None:
    info = sandboxes.get(Shape())
    seen = {n: ssh(info, n, "ps -p 1 -o comm=; systemctl is-system-running; cat /etc/machine-id; hostname; "
                            "systemctl show -p User --value elasticsearch; systemctl is-enabled elasticsearch; "
                            "systemctl is-active systemd-journald ssh").stdout.split() for n in NODES}
    for name, (init, running, _machine_id, hostname, user, enabled, journald, sshd) in seen.items():
        assert (init, running, hostname, user, enabled, journald, sshd) == (
            "systemd", "running", name, "elasticsearch", "enabled", "active", "active"), seen
    assert len({words[2] for words in seen.values()}) == len(NODES), "each host has its own machine id"


def restart_es3(extra: tuple[str, ...] = ()) -> tuple[Any, list[dict[str, Any]]]:
    proc = orchestrate("restart", "--cluster", "sandbox", "--nodes", "es-3", "--yes", "--json", *extra, timeout=600)
    assert_no_traceback(proc)
    return proc, json_lines(proc.stdout)


def test_a_unit_that_fails_to_start_stops_the_run_with_its_state_and_journal(sandboxes: SandboxManager) -> None:
    info, es = prepared(sandboxes, Shape())
    config = Path(info["inventory"]).parent / "hosts" / "es-3" / "node" / "config" / "elasticsearch.yml"
    good = config.read_text()
    config.write_text(good + "bogus.setting.of.a.test: 1\n")  # Elasticsearch refuses to start with it
    try:
        proc, _events = restart_es3()
        assert proc.returncode != 0
        said = proc.stdout + proc.stderr
        assert "unit elasticsearch failed (result exit-code" in said, said[-3000:]
        assert "bogus.setting.of.a.test" in said, said[-3000:]
        assert "timed out" not in said, "said when systemd said it, not at the join timeout"
        assert ssh(info, "es-3", "systemctl is-failed elasticsearch").stdout.strip() == "failed"
    finally:
        config.write_text(good)
    resumed = orchestrate("resume", "--cluster", "sandbox", "--json", timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert es.cluster.health(wait_for_status="green", timeout="120s")["status"] == "green"


def test_a_stop_that_systemd_ends_by_killing_is_reported_as_killed(sandboxes: SandboxManager) -> None:
    info, es = prepared(sandboxes, Shape())
    # A stop signal the JVM ignores and a short TimeoutStopSec: systemd kills the service, as it does a
    # node that hangs on its way down.
    drop_in = "/etc/systemd/system/elasticsearch.service.d/hang.conf"
    made = ssh(info, "es-3", f"mkdir -p {Path(drop_in).parent} && printf '[Service]\\nKillSignal=SIGWINCH\\n"
                             f"TimeoutStopSec=2\\n' > {drop_in} && systemctl daemon-reload")
    assert made.returncode == 0, made.stderr
    try:
        proc, events = restart_es3()
        assert proc.returncode == 0, proc.stderr[-3000:]
        killed = [e for e in events if e.get("event") == "warning" and "was killed (SIGKILL)" in e["message"]]
        assert [e["node"] for e in killed] == ["es-3"], events
        journal = ssh(info, "es-3", "journalctl -u elasticsearch --no-pager -o cat").stdout
        assert "State 'stop-sigterm' timed out. Killing." in journal or "timed out. Killing" in journal, journal[-2000:]
    finally:
        ssh(info, "es-3", f"rm -f {drop_in} && systemctl daemon-reload")
    clean, events = restart_es3()
    assert clean.returncode == 0, clean.stderr[-3000:]
    assert not [e for e in events if "was killed" in str(e.get("message"))], "a clean stop is not reported killed"
    assert es.cluster.health(wait_for_status="green", timeout="120s")["status"] == "green"
