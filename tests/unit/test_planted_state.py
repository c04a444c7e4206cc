"""Run state another user could have written is never read: `resume` runs what a journal records (its
hooks, its `where: local` commands) and `abandon` writes its undo records, as this user (often root). A
state directory or journal that is not this user's own, that others can write, that is a symbolic link,
or a journal whose name or cluster disagrees with what it holds, is refused before anything runs.
Over fake clusters reached by an inventory (orchestrator.testing), through the Python API `resume` uses."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from orchestrator import api
from orchestrator.errors import JournalError, SandboxError, StoppedAfter
from orchestrator.restart import journal as journals
from orchestrator.sandbox import state as sandbox_state
from orchestrator.testing.fake import FLEET
from tests.unit.test_deferral import fake_cluster
from tests.unit.test_hostile_input import report_of, saved_journal

NOBODY = 65534


@pytest.fixture
def fleet(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("ORCHESTRATOR_STATE", str(tmp_path / "state"))
    yield tmp_path
    FLEET.clear()


def stopped_run_with_a_local_hook(where: Path, name: str) -> tuple[Path, Path, str]:
    """A run of ``name`` stopped after its first batch (resumable), whose playbook's `before_batch` hook
    writes `id` to a marker file: the inventory, the marker (removed) and the run's id."""
    _, config = fake_cluster(where, name)
    marker = where / f"{name}-hook-ran"
    procedure = yaml.safe_load((Path(journals.__file__).parents[1] / "testing" / "fake-rolling.yaml").read_text())
    procedure["hooks"] = {"before_batch": [{"name": "planted", "run": f"id > {marker}"}]}
    playbook = where / f"{name}-playbook.yaml"
    playbook.write_text(yaml.safe_dump(procedure))
    inventory = yaml.safe_load(config.read_text())
    config.write_text(yaml.safe_dump({**inventory, "playbook": str(playbook)}))
    with pytest.raises(StoppedAfter):
        api.restart(config=config, stop_after=1)
    assert marker.read_text().startswith("uid="), "the hook runs in an ordinary run"
    marker.unlink()
    journal = journals.latest(name)
    assert journal is not None and not journal.state.finished
    return config, marker, journal.run_id


def test_a_run_directory_of_another_user_never_feeds_resume(fleet: Path) -> None:
    config, marker, _ = stopped_run_with_a_local_hook(fleet, "eu-p1")
    runs = journals.runs_dir("eu-p1")
    os.chown(runs, NOBODY, NOBODY)
    with pytest.raises(JournalError, match=f"{runs} belongs to uid {NOBODY}, not to this user"):
        api.resume(config=config)
    assert not marker.exists(), "the planted journal's hook never ran"
    said = api.status(config=config)  # status still says the cluster's health, and why the journal is not read
    assert "belongs to uid" in said["journal_error"]
    assert said["run"]["journal"].startswith("the cluster's copy"), "the run as the cluster's copy holds it"
    os.chown(runs, os.geteuid(), os.getegid())
    api.resume(config=config)  # the same journal, in the user's own directory again, resumes
    assert marker.exists()


@pytest.mark.parametrize("which", ["runs", "state root"])
def test_a_state_directory_others_can_write_never_feeds_resume(fleet: Path, which: str) -> None:
    config, marker, _ = stopped_run_with_a_local_hook(fleet, "eu-p2")
    writable = journals.runs_dir("eu-p2") if which == "runs" else fleet / "state"
    writable.chmod(0o777)
    with pytest.raises(JournalError, match=f"{writable} is writable by group or others"):
        api.resume(config=config)
    assert not marker.exists()


def test_a_journal_file_of_another_user_or_writable_by_others_is_refused(fleet: Path) -> None:
    config, marker, run_id = stopped_run_with_a_local_hook(fleet, "eu-p3")
    path = journals.runs_dir("eu-p3") / f"{run_id}.json"
    os.chown(path, NOBODY, NOBODY)
    with pytest.raises(JournalError, match=f"cannot read journal {path}: belongs to uid {NOBODY}"):
        api.resume(config=config)
    os.chown(path, os.geteuid(), os.getegid())
    path.chmod(0o622)
    with pytest.raises(JournalError, match="is writable by group or others"):
        api.resume(config=config)
    assert not marker.exists()


def test_a_journal_reached_through_a_symbolic_link_is_refused(fleet: Path) -> None:
    config, marker, run_id = stopped_run_with_a_local_hook(fleet, "eu-p4")
    runs = journals.runs_dir("eu-p4")
    elsewhere = fleet / "elsewhere.json"
    shutil.move(runs / f"{run_id}.json", elsewhere)
    (runs / f"{run_id}.json").symlink_to(elsewhere)
    with pytest.raises(JournalError, match="is a symbolic link"):
        api.resume(config=config)
    (runs / f"{run_id}.json").unlink()
    shutil.move(elsewhere, runs / f"{run_id}.json")
    moved = fleet / "runs-elsewhere"
    shutil.move(runs, moved)
    runs.symlink_to(moved)
    with pytest.raises(JournalError, match=f"{runs} is a symbolic link"):
        api.resume(config=config)
    assert not marker.exists()


def test_a_journal_whose_name_is_not_its_run_is_refused_and_a_future_name_does_not_win(fleet: Path) -> None:
    """A file named for the year 2999 would always sort last: `resume` would take it, whatever it holds."""
    config, marker, run_id = stopped_run_with_a_local_hook(fleet, "eu-p5")
    runs = journals.runs_dir("eu-p5")
    shutil.copy(runs / f"{run_id}.json", runs / "29991231T235959-ffffff.json")
    with pytest.raises(JournalError, match=r"holds run .*not the run its name says"):
        api.resume(config=config)
    (runs / "29991231T235959-ffffff.json").unlink()
    shutil.copy(runs / f"{run_id}.json", runs / "zzz-planted.json")  # not a run's name: never read
    latest = journals.latest("eu-p5")
    assert latest is not None and latest.run_id == run_id
    assert not marker.exists()


def test_a_journal_of_another_cluster_is_refused(fleet: Path) -> None:
    _, marker, run_id = stopped_run_with_a_local_hook(fleet, "eu-p6")
    other = journals.runs_dir("eu-p7")
    other.mkdir(mode=0o700)
    shutil.copy(journals.runs_dir("eu-p6") / f"{run_id}.json", other / f"{run_id}.json")
    with pytest.raises(JournalError, match="is of cluster 'eu-p6', not 'eu-p7'"):
        journals.latest("eu-p7")
    assert not marker.exists()


def test_the_cli_names_the_unsafe_directory_with_exit_8_and_no_traceback(tmp_path: Path) -> None:
    path = saved_journal(tmp_path)
    path.parent.chmod(0o775)
    proc = report_of(tmp_path)
    assert proc.returncode == 8, proc.stderr
    assert f"{path.parent} is writable by group or others" in proc.stderr and "Traceback" not in proc.stderr


def test_a_sandbox_state_another_user_could_write_is_refused(tmp_path: Path) -> None:
    """`sandbox down` signals the PIDs the state lists: a planted one would have root end any process."""
    state = sandbox_state.SandboxState(mode="es", es_version="9.5.3", cluster_name="sandbox", zones=1)
    where = tmp_path / "sandbox"
    where.mkdir(mode=0o700)
    sandbox_state.save(where / "state.json", state)
    assert sandbox_state.load(where / "state.json") == state
    os.chown(where / "state.json", NOBODY, NOBODY)
    with pytest.raises(SandboxError, match=f"belongs to uid {NOBODY}"):
        sandbox_state.load(where / "state.json")
    os.chown(where / "state.json", os.geteuid(), os.getegid())
    where.chmod(0o757)
    with pytest.raises(JournalError, match="is writable by group or others"):
        sandbox_state.load(where / "state.json")
