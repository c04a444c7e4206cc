"""How a command is wrapped for sudo, run by a real /bin/sh against a stand-in `sudo` that records its
arguments: the password reaches sudo on standard input and nowhere else, and what follows it on
standard input (a file's contents) reaches the command intact. Real sudo on real hosts:
tests/integration/test_deploy_user.py."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from orchestrator.config.model import SshSection
from orchestrator.hosts.transport import SUDO_REFUSED, SUDO_REFUSED_RC, with_sudo

PASSWORD = "s3cret 'with' $quotes"  # spaces, quotes and a dollar: read as one line, never expanded

FAKE_SUDO = """#!/bin/sh
printf '%s\\n' "$*" >> "$SUDO_ARGV_LOG"
if [ "$1" = -S ]; then
    IFS= read -r got
    [ "$got" = "$FAKE_SUDO_PASSWORD" ] && exit 0
    echo "Sorry, try again." >&2
    echo "sudo: 1 incorrect password attempt" >&2
    exit 1
fi
shift
exec "$@"
"""


def run_wrapped(tmp_path: Path, command: str, stdin: bytes | None, password: str | None,
                accepted: str = PASSWORD) -> tuple[subprocess.CompletedProcess[bytes], str, str]:
    fake = tmp_path / "bin"
    fake.mkdir(exist_ok=True)
    (fake / "sudo").write_text(FAKE_SUDO)
    (fake / "sudo").chmod(0o755)
    log = tmp_path / "argv.log"
    wrapped, data = with_sudo(command, stdin, password)
    env = {"PATH": f"{fake}:/usr/bin:/bin", "SUDO_ARGV_LOG": str(log), "FAKE_SUDO_PASSWORD": accepted}
    proc = subprocess.run(["/bin/sh", "-c", wrapped], input=data or b"", capture_output=True, env=env, timeout=30)
    return proc, wrapped, log.read_text() if log.exists() else ""


def test_the_password_goes_on_standard_input_only_and_the_file_contents_after_it_reach_the_command(
        tmp_path: Path) -> None:
    contents = b"line one\nline two, no newline at the end"
    proc, wrapped, argv = run_wrapped(tmp_path, "cat", contents, PASSWORD)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == contents
    assert PASSWORD not in wrapped and PASSWORD not in argv
    assert argv.splitlines() == ["-S -p  -v", "-n /bin/sh -c cat"]


def test_a_refused_password_is_said_apart_from_the_command_failing(tmp_path: Path) -> None:
    proc, _, argv = run_wrapped(tmp_path, "echo ran", None, "wrong", accepted=PASSWORD)
    assert proc.returncode == SUDO_REFUSED_RC
    assert proc.stderr.decode().rstrip().endswith(SUDO_REFUSED)
    assert b"incorrect password attempt" in proc.stderr
    assert proc.stdout == b"" and "-n" not in argv.split()  # the command never ran
    failing, _, _ = run_wrapped(tmp_path, "exit 3", None, PASSWORD)
    assert failing.returncode == 3 and SUDO_REFUSED.encode() not in failing.stderr


def test_without_a_password_sudo_must_not_ask_and_the_input_is_untouched(tmp_path: Path) -> None:
    wrapped, data = with_sudo("cat", b"contents", None)
    assert wrapped == "sudo -n /bin/sh -c cat" and data == b"contents"
    proc, _, argv = run_wrapped(tmp_path, "cat", b"contents", None)
    assert proc.stdout == b"contents" and argv.splitlines() == ["-n /bin/sh -c cat"]


def test_a_sudo_password_without_sudo_is_refused_as_configuration() -> None:
    with pytest.raises(ValueError, match="`sudo_password` is set but `sudo` is false"):
        SshSection.model_validate({"known_hosts": "/dev/null", "sudo_password": {"env": "SUDO_PASSWORD"}})
    assert SshSection.model_validate({"known_hosts": "/dev/null", "sudo": True,
                                      "sudo_password": {"env": "SUDO_PASSWORD"}}).sudo_password is not None
