"""Helpers shared by the test layers: running the CLI as a user would."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def orchestrate(*args: str, timeout: float = 900, env: dict[str, str] | None = None,
                cwd: Path | None = None, input_text: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run `orchestrate ARGS` in a child process and return what it printed and its exit code."""
    return subprocess.run([sys.executable, "-m", "orchestrator", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})}, cwd=cwd or REPO, input=input_text)


def json_lines(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def assert_no_traceback(proc: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stdout, proc.stdout
