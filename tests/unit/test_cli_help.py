"""What `--help` teaches and what the shell completes: no value placeholder on flags, one meaning of
--yes, one form of --nodes, cluster names completed, counts said with the right word."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.config.model import Inventory
from orchestrator.errors import ConfigError
from orchestrator.runs.plans import patterns
from orchestrator.tuning.apply import for_nodes
from orchestrator.units import counted
from tests.helpers import orchestrate

COMMANDS = ["plan", "restart", "resume", "status", "unlock", "abandon", "pause", "continue", "report", "upgrade",
            "tune", "sudoers", "forcemerge", "docs", "inventory discover", "sandbox up", "sandbox down"]


@pytest.mark.parametrize("command", COMMANDS)
def test_help_shows_no_value_placeholder_on_a_flag(command: str) -> None:
    shown = orchestrate(*command.split(), "--help", env={"COLUMNS": "160"}, timeout=60)
    assert shown.returncode == 0, shown.stderr
    assert "<bool>" not in shown.stdout, [line for line in shown.stdout.splitlines() if "<bool>" in line]


def test_yes_means_do_not_ask_on_every_command_that_has_it() -> None:
    for command in ("restart", "resume", "upgrade", "unlock", "abandon", "tune"):
        shown = orchestrate(command, "--help", env={"COLUMNS": "300"}, timeout=60).stdout
        line = next(line for line in shown.splitlines() if line.lstrip("│ ").startswith("--yes"))
        assert "do not ask" in line.lower(), (command, line)


def test_cluster_names_are_completed_from_the_inventory_directories(tmp_path: Path) -> None:
    clusters = tmp_path / "clusters"
    clusters.mkdir()
    for name in ("prod", "prod-eu", "logs"):
        (clusters / f"{name}.yaml").write_text("")
    for command in ("plan", "tune", "forcemerge"):
        completed = subprocess.run([sys.executable, "-m", "orchestrator"], capture_output=True, text=True, cwd=tmp_path,
                                   env={**os.environ, "ORCHESTRATOR_CONFIG_HOME": str(tmp_path),
                                        "_ORCHESTRATE_COMPLETE": "complete_bash",
                                        "COMP_WORDS": f"orchestrate {command} --cluster pr", "COMP_CWORD": "3"},
                                   timeout=60)
        assert completed.stdout.split() == ["prod", "prod-eu"], (command, completed)


def test_nodes_is_one_form_everywhere_patterns_repeated_or_comma_separated() -> None:
    inv = Inventory.model_validate({"cluster": {"name": "c"}, "ssh": {"transport": "local"},
                                    "nodes": [{"name": n, "host": n} for n in ("es-1", "es-2", "data-1")]})
    assert [n.name for n in for_nodes(inv, patterns(["es-*"], "--nodes"))] == ["es-1", "es-2"]
    assert [n.name for n in for_nodes(inv, patterns(["data-1,es-2"], "--nodes"))] == ["es-2", "data-1"]
    assert [n.name for n in for_nodes(inv, ())] == ["es-1", "es-2", "data-1"]
    with pytest.raises(ConfigError, match="no node of the inventory matches web-"):
        for_nodes(inv, patterns(["web-*"], "--nodes"))


def test_counts_are_said_with_the_right_word() -> None:
    assert [counted(1, "batch"), counted(3, "batch"), counted(1, "node"), counted(0, "node")] == [
        "1 batch", "3 batches", "1 node", "0 nodes"]


# What a TAB may import: the shell runs `orchestrate` once per TAB of completion, so the command modules import
# what their commands do when they run (tests/benchmarks/bench_completion.py measures what a TAB costs).
HEAVY = ("rich", "yaml", "cryptography", "paramiko", "elasticsearch", "elastic_transport", "tenacity",
         "orchestrator.config.model", "orchestrator.runs", "orchestrator.shards", "orchestrator.sandbox.lifecycle",
         "orchestrator.restart.engine", "orchestrator.hosts")
COMPLETE_AND_LIST = """
import sys
from orchestrator.cli.main import run_command
try:
    run_command()
except SystemExit:
    pass
print(" ".join(sorted(sys.modules)), file=sys.stderr)
"""


@pytest.mark.parametrize("words", ["orchestrate res", "orchestrate restart --cluster pr", "orchestrate sandbox u"])
def test_a_tab_of_completion_imports_no_configuration_model_client_or_run(tmp_path: Path, words: str) -> None:
    (tmp_path / "clusters").mkdir()
    (tmp_path / "clusters" / "prod.yaml").write_text("")
    done = subprocess.run([sys.executable, "-c", COMPLETE_AND_LIST], capture_output=True, text=True, cwd=tmp_path,
                          env={**os.environ, "ORCHESTRATOR_CONFIG_HOME": str(tmp_path),
                               "_ORCHESTRATE_COMPLETE": "complete_bash", "COMP_WORDS": words,
                               "COMP_CWORD": str(len(words.split()) - 1)}, timeout=60)
    assert done.stdout.split(), done  # it did complete: restart resume / prod / up
    imported = done.stderr.split()
    assert "orchestrator.cli.restart_cmd" in imported  # the command tree was built
    heavy = [m for m in imported if m.startswith(HEAVY)]
    assert heavy == [], f"a TAB imports {heavy}: import them inside the command that uses them"
