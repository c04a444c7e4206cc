"""The sandbox's systemctl stand-in answers with systemd's exit codes and tracks services by PID."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from orchestrator.sandbox.hosts import HOST_FILES, write_unit


@pytest.fixture
def systemctl(tmp_path: Path):  # type: ignore[no-untyped-def]
    units = tmp_path / "units"
    write_unit(units, "sleeper", "/bin/sleep 300", None, enabled=True)
    write_unit(units, "crasher", "/bin/false", None, enabled=False)
    env = {**os.environ, "SANDBOX_UNIT_DIR": str(units), "SANDBOX_RUN_DIR": str(tmp_path / "run")}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(HOST_FILES / "systemctl"), *args], capture_output=True, text=True, env=env,
                              timeout=30)

    yield run
    run("stop", "sleeper")


def test_start_stop_and_is_active(systemctl, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    assert systemctl("is-active", "sleeper").returncode == 3
    assert systemctl("start", "sleeper").returncode == 0
    active = systemctl("is-active", "sleeper.service")
    assert (active.returncode, active.stdout.strip()) == (0, "active")
    pid = int((tmp_path / "run" / "sleeper.service.pid").read_text())
    os.kill(pid, 0)
    assert systemctl("stop", "sleeper").returncode == 0
    assert systemctl("is-active", "sleeper").returncode == 3
    with pytest.raises(ProcessLookupError):
        for _ in range(50):
            os.kill(pid, 0)
            subprocess.run(["sleep", "0.05"])


def test_exit_codes_of_unknown_units_and_failed_starts(systemctl) -> None:  # type: ignore[no-untyped-def]
    assert systemctl("start", "nosuch").returncode == 5
    assert systemctl("stop", "nosuch").returncode == 5
    assert systemctl("status", "nosuch").returncode == 4
    assert systemctl("status", "sleeper").returncode == 3
    failed = systemctl("start", "crasher")
    assert failed.returncode == 1 and "failed" in failed.stderr


def test_enable_disable_and_boot(systemctl) -> None:  # type: ignore[no-untyped-def]
    assert systemctl("is-enabled", "sleeper").stdout.strip() == "enabled"
    assert systemctl("is-enabled", "crasher").returncode == 1
    assert systemctl("sandbox-boot").returncode == 0
    assert systemctl("is-active", "sleeper").returncode == 0
    assert systemctl("disable", "sleeper").returncode == 0
    assert systemctl("is-enabled", "sleeper").stdout.strip() == "disabled"


def test_reboot_outside_a_test_host_never_signals_the_machine_init(systemctl) -> None:  # type: ignore[no-untyped-def]
    # PID 1 here is the machine's own init: the stand-in must refuse rather than signal it.
    refused = systemctl("reboot")
    assert refused.returncode == 1 and "only inside a sandbox test host" in refused.stderr
