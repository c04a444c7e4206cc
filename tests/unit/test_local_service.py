"""The local mode's service runner (no test hosts, no systemd): starts, tracks by PID and stops a node."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from orchestrator.sandbox.host_setup import HOST_FILES, write_unit


@pytest.fixture
def service(tmp_path: Path):  # type: ignore[no-untyped-def]
    units = tmp_path / "units"
    write_unit(units, "sleeper", "/bin/sleep 300", None)
    write_unit(units, "crasher", "/bin/false", None)
    env = {**os.environ, "SANDBOX_UNIT_DIR": str(units), "SANDBOX_RUN_DIR": str(tmp_path / "run")}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(HOST_FILES / "local-service"), *args], capture_output=True, text=True, env=env,
                              timeout=30)

    yield run
    run("stop", "sleeper")


def test_start_stop_and_is_active(service, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    assert service("is-active", "sleeper").returncode == 3
    assert service("start", "sleeper").returncode == 0
    active = service("is-active", "sleeper.service")
    assert (active.returncode, active.stdout.strip()) == (0, "active")
    pid = int((tmp_path / "run" / "sleeper.service.pid").read_text())
    os.kill(pid, 0)
    assert service("stop", "sleeper").returncode == 0
    assert service("is-active", "sleeper").returncode == 3
    with pytest.raises(ProcessLookupError):
        for _ in range(50):
            os.kill(pid, 0)
            subprocess.run(["sleep", "0.05"])


def test_unknown_services_failed_starts_and_unknown_commands_are_said(service) -> None:  # type: ignore[no-untyped-def]
    assert service("start", "nosuch").returncode == 5
    failed = service("start", "crasher")
    assert failed.returncode == 1 and "exited at its start" in failed.stderr
    assert service("reboot").returncode == 2 and service("enable", "sleeper").returncode == 2
