"""Property-based: the CLI answers any cluster name or argument with a message and an exit code, never a traceback."""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers import REPO

names = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=300)


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "orchestrator", *args], capture_output=True, text=True, cwd=REPO,
                          timeout=60, env={"PATH": "/usr/bin:/bin", "HOME": "/nonexistent",
                                           "ORCHESTRATOR_STATE": "/nonexistent/state"})


@settings(max_examples=15, deadline=None)
@given(names, st.sampled_from(["plan", "status", "tune", "report", "resume"]))
def test_any_cluster_name_is_a_clear_error(name: str, command: str) -> None:
    proc = run(command, "--cluster", name)
    assert proc.returncode == 2, (name, proc.stderr)
    assert "Traceback" not in proc.stderr and proc.stderr.strip()


@settings(max_examples=10, deadline=None)
@given(st.lists(st.sampled_from(["--by", "zone", "--json", "--nodes", "-c", "x", "--max-segments", "0", "--yes",
                                 "--snapshot", "/nonexistent", "--run", "r"]), max_size=5),
       st.sampled_from(["plan", "restart", "forcemerge", "tune"]))
def test_any_argument_mix_is_handled(args: list[str], command: str) -> None:
    proc = run(command, *args)
    assert proc.returncode in (2, 4, 5), (args, proc.stderr)
    assert "Traceback" not in proc.stderr


@settings(max_examples=8, deadline=None)
@given(st.one_of(names, st.sampled_from(["../../etc/passwd", "x" * 300, "20261122T013500-a1b2c3/../../x"])))
def test_any_run_id_is_a_clear_error(run_id: str) -> None:
    """`--run` is a run id, never a path (no traversal out of the cluster's journals)."""
    with tempfile.TemporaryDirectory() as d:
        inv = Path(d) / "c.yaml"
        inv.write_text("cluster: {name: c, endpoints: ['http://127.0.0.1:9']}\nssh: {transport: local}\n"
                       "nodes: [{name: a, host: h}]\n")
        proc = run("report", "--config", str(inv), "--run", run_id)
    assert proc.returncode == 8, (run_id, proc.stderr)
    assert "Traceback" not in proc.stderr and proc.stderr.strip()


@settings(max_examples=10, deadline=None)
@given(st.one_of(names.filter(lambda p: p and not p.startswith("-")),
                 st.sampled_from(["logs-* ; rm -rf /", "a/b", "*,*", "x" * 300, "$(id)", "logs\n"])),
       st.sampled_from(["plan", "restart", "resume"]))
def test_an_index_pattern_that_is_not_one_is_refused_before_the_cluster_is_asked(pattern: str, command: str) -> None:
    """--allow-unavailable takes index names and shell-style patterns (comma-separated too); anything else
    is exit 2, said."""
    if all(re.fullmatch(r"[A-Za-z0-9_.*?+\-]{1,255}", part) for part in pattern.split(",")):
        return  # valid patterns: nothing to refuse
    with tempfile.TemporaryDirectory() as d:
        inv = Path(d) / "c.yaml"
        inv.write_text("cluster: {name: c, endpoints: ['http://127.0.0.1:9']}\nssh: {transport: local}\n"
                       "nodes: [{name: a, host: h}]\n")
        proc = run(command, "--config", str(inv), "--allow-unavailable", pattern, *(["--yes"] * (command != "plan")))
    assert proc.returncode == 2, (pattern, proc.stderr)
    assert "--allow-unavailable" in proc.stderr and "Traceback" not in proc.stderr


def test_version_short_help_and_completion() -> None:
    from orchestrator import __version__

    for flag in ("--version", "-V"):
        proc = run(flag)
        assert proc.returncode == 0 and proc.stdout.strip() == f"orchestrator {__version__}"
    short = run("restart", "-h")
    assert short.returncode == 0 and "--stop-after" in short.stdout and "--allow-unavailable" in short.stdout
    assert run("sandbox", "up", "-h").returncode == 0
    # typer finds the shell from the process's parents (shellingham): from bash, as an operator types it. Under
    # make's /bin/sh it would say "Shell sh not supported", so the parent here is bash, whoever runs pytest.
    completion = subprocess.run(["bash", "-c", '"$0" -m orchestrator --show-completion; exit $?', sys.executable],
                                capture_output=True, text=True, cwd=REPO, timeout=60,
                                env={"PATH": "/usr/bin:/bin", "HOME": "/nonexistent"})
    assert completion.returncode == 0 and "_orchestrate_completion" in completion.stdout, completion.stderr


def test_tune_apply_off_a_terminal_without_yes_is_refused_before_any_host_is_reached() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        inv = Path(tmp) / "c.yaml"
        # 192.0.2.1 (TEST-NET-1) is never reached: the refusal comes before any connection.
        inv.write_text("cluster: {name: c, endpoints: ['http://127.0.0.1:9']}\nssh: {known_hosts: /dev/null}\n"
                       "nodes: [{name: a, host: 192.0.2.1}]\n")
        proc = run("tune", "--config", str(inv), "--apply")
    assert proc.returncode == 5, proc.stderr
    assert "not on a terminal and no --yes: refusing to change host tuning" in proc.stderr
