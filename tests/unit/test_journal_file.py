"""The journal on disk: a base and a log of changes (restart/journal_file.py). A crash mid-append, a crash
between a new base and the log's emptying, a damaged or planted log: each read back as the run left it,
or refused."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from orchestrator.errors import JournalError
from orchestrator.restart import journal_file
from orchestrator.restart.journal import Journal, RunState
from orchestrator.restart.phases import Phase
from tests.unit.journals import journal_of, plan_of


def saved(tmp_path: Path) -> Journal:
    """A journal whose base was written once and whose log holds three changes."""
    j = journal_of(plan_of([["a"], ["b"]]), run_id="20261125T120000-abcdef")
    j.path = tmp_path / f"{j.run_id}.json"
    j.save()
    j.set_phase("a", Phase.STOPPING)
    j.timed("a", "stop", 2.5)
    j.record_undo("cluster.routing.allocation.enable", "persistent", None, "primaries", 1)
    return j


def test_a_save_appends_a_line_of_what_changed_and_the_base_stays_as_written(tmp_path: Path) -> None:
    j = saved(tmp_path)
    assert j.path is not None
    base = json.loads(j.path.read_text())
    assert base["seq"] == 1 and base["nodes"]["a"]["phase"] == "pending"
    lines = [json.loads(line) for line in journal_file.changes_path(j.path).read_text().splitlines()]
    assert [line["seq"] for line in lines] == [2, 3, 4]
    assert set(lines[1]) == {"seq", "run", "nodes"} and set(lines[1]["nodes"]) == {"a"}, "only the node it changed"
    assert lines[2]["undo"]["1"]["applied"] == "primaries"
    assert Journal.load(j.path).to_dict() == j.to_dict()


def test_changes_made_together_are_one_line_and_a_block_left_by_an_error_saves_nothing(tmp_path: Path) -> None:
    """A node's move to a phase with the time the last one took is one save (one line, one write of the cluster's
    copy), nested blocks too; a block an error leaves writes nothing: its changes go with the next save."""
    j = saved(tmp_path)
    assert j.path is not None
    log = journal_file.changes_path(j.path)
    before = len(log.read_text().splitlines())
    with j.together():
        j.timed("a", "stop", 3.0)
        with j.together():
            j.process_before("a", "pid 7")
        j.set_phase("a", Phase.STOPPED)
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(lines) == before + 1
    assert lines[-1]["nodes"]["a"]["phases"]["stop"] == 3.0 and lines[-1]["nodes"]["a"]["phase"] == "stopped"
    assert lines[-1]["nodes"]["a"]["process_before"] == "pid 7"
    with pytest.raises(RuntimeError), j.together():
        j.timed("a", "start", 1.0)
        raise RuntimeError("the start failed")
    assert len(log.read_text().splitlines()) == before + 1, "nothing written by the block the error left"
    j.mark("a", "start_issued")
    assert json.loads(log.read_text().splitlines()[-1])["nodes"]["a"]["phases"]["start"] == 1.0, \
        "the change goes with the next save"
    assert Journal.load(j.path).to_dict() == j.to_dict()


def test_a_line_half_written_by_a_crash_is_dropped_and_the_journal_is_what_was_saved_before(tmp_path: Path) -> None:
    j = saved(tmp_path)
    assert j.path is not None
    before = Journal.load(j.path).to_dict()
    with journal_file.changes_path(j.path).open("a") as log:
        log.write('{"seq": 5, "run": {"state": "succ')  # no end of line: never acknowledged
    assert Journal.load(j.path).to_dict() == before


@pytest.mark.parametrize("half", ['{"seq": 5, "run": {"state": "succ', '{"seq": 5, "nodes": {"a": "' + "x" * 200_000])
def test_a_run_resumed_after_a_half_written_line_saves_after_the_last_whole_one(tmp_path: Path, half: str) -> None:
    """The half line a crash left is not the start of the next process's first line: the journal that resumes
    saves on, and is read back whole (appended to the half line, its first save made both unreadable and the
    run could not be resumed again: found by test_engine's kill-anywhere property, a crash mid-append)."""
    j = saved(tmp_path)
    assert j.path is not None
    log = journal_file.changes_path(j.path)
    with log.open("a") as torn:
        torn.write(half)  # a line longer than the blocks the cut reads back, too
    resumed = Journal.load(j.path)
    resumed.set_phase("a", Phase.STOPPED)
    resumed.set_phase("b", Phase.STOPPING)
    again = Journal.load(j.path)
    assert again.to_dict() == resumed.to_dict()
    assert (again.nodes["a"].phase, again.nodes["b"].phase) == (Phase.STOPPED, Phase.STOPPING)
    assert half.encode() not in log.read_bytes(), "the half line is gone, the lines before it kept"


def test_a_new_base_written_before_a_crash_emptied_the_log_skips_the_lines_it_holds(tmp_path: Path) -> None:
    j = saved(tmp_path)
    assert j.path is not None
    log = journal_file.changes_path(j.path).read_bytes()
    j.set_state(RunState.STOPPED, "stopped")  # a base written anew, the log emptied
    journal_file.changes_path(j.path).write_bytes(log)  # as if the crash came between the two
    loaded = Journal.load(j.path)
    assert loaded.state is RunState.STOPPED and loaded.to_dict() == j.to_dict()


@pytest.mark.parametrize(("damage", "said"), [
    (lambda lines: lines[:1] + lines[2:], "misses change 3"),
    (lambda lines: [*lines[:2], b"not json", *lines[2:]], "not JSON written by this tool"),
    # Numbers this tool never writes, and nesting no journal has: refused, never read as a float or a crash.
    (lambda lines: [*lines, b'{"seq": 5, "run": {"elapsed_s": NaN}}'], "not JSON written by this tool"),
    (lambda lines: [*lines, b'{"seq": 5, "run": {"elapsed_s": -Infinity}}'], "not JSON written by this tool"),
    (lambda lines: [*lines, b'{"seq": 5, "run": {"elapsed_s": 1e400}}'], "not JSON written by this tool"),
    (lambda lines: [*lines, b"[" * 5000 + b"]" * 5000], "not JSON written by this tool"),
    (lambda lines: [*lines, b"[1, 2]"], "a line that is not a change"),
    (lambda lines: [*lines, json.dumps({"seq": 5, "batches": {"9": {}}}).encode()], "cannot be applied"),
])
def test_a_damaged_log_is_refused_naming_the_journal(tmp_path: Path, damage: object, said: str) -> None:
    j = saved(tmp_path)
    assert j.path is not None
    path = journal_file.changes_path(j.path)
    lines = path.read_bytes().split(b"\n")[:-1]
    path.write_bytes(b"\n".join(damage(lines)) + b"\n")  # type: ignore[operator]
    with pytest.raises(JournalError, match=said) as err:
        Journal.load(j.path)
    assert str(j.path) in str(err.value)


def test_a_log_of_another_user_or_reached_through_a_link_is_refused(tmp_path: Path) -> None:
    j = saved(tmp_path)
    assert j.path is not None
    path = journal_file.changes_path(j.path)
    os.chown(path, 65534, 65534)
    with pytest.raises(JournalError, match="belongs to uid 65534"):
        Journal.load(j.path)
    os.chown(path, os.geteuid(), os.getegid())
    elsewhere = tmp_path / "elsewhere"
    path.rename(elsewhere)
    path.symlink_to(elsewhere)
    with pytest.raises(JournalError, match="symbolic link"):
        Journal.load(j.path)


def test_the_log_is_compacted_into_the_base_every_so_many_lines(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(journal_file, "COMPACT_AFTER", 3)
    j = saved(tmp_path)  # three lines: the next save writes the base
    assert j.path is not None
    j.timed("b", "stop", 1.0)
    assert journal_file.changes_path(j.path).read_bytes() == b""
    assert json.loads(j.path.read_text())["seq"] == 5
    j.timed("b", "start", 1.0)
    assert len(journal_file.changes_path(j.path).read_bytes().splitlines()) == 1
    assert Journal.load(j.path).to_dict() == j.to_dict()


def test_a_journal_of_the_single_file_format_is_read_and_goes_on_in_the_new_one(tmp_path: Path) -> None:
    j = saved(tmp_path)
    assert j.path is not None
    whole = json.loads(json.dumps(j.to_dict(), default=str))
    whole["format"] = 2
    j.path.write_text(json.dumps(whole))
    journal_file.changes_path(j.path).unlink()
    loaded = Journal.load(j.path)
    assert loaded.nodes["a"].phases == {"stop": 2.5}
    loaded.set_phase("a", Phase.STOPPED)
    assert json.loads(j.path.read_text())["format"] == 3, "its next save wrote a base of this format"
    assert Journal.load(j.path).nodes["a"].phase == "stopped"


def test_a_base_whose_write_fails_half_way_leaves_the_last_whole_journal(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The base is written to a temporary file and renamed: a crash or a full disk half-way through leaves the
    journal as it was saved last, never half of a new one (a plain write of the file would leave half)."""
    import builtins
    import io

    j = saved(tmp_path)
    assert j.path is not None
    before = Journal.load(j.path).to_dict()
    real_open = io.open

    class HalfWriter:
        def __init__(self, f: object) -> None:
            self.f = f

        def write(self, text: str) -> int:
            self.f.write(text[:len(text) // 2])  # type: ignore[attr-defined]
            self.f.flush()  # type: ignore[attr-defined]
            raise OSError(28, "No space left on device")

        def __getattr__(self, name: str) -> object:
            return getattr(self.f, name)

        def __enter__(self) -> HalfWriter:
            return self

        def __exit__(self, *exc: object) -> None:
            self.f.close()  # type: ignore[attr-defined]

    def half_open(file: object, mode: str = "r", *args: object, **kwargs: object) -> object:
        f = real_open(file, mode, *args, **kwargs)  # type: ignore[call-overload]
        return HalfWriter(f) if "w" in mode else f

    monkeypatch.setattr(io, "open", half_open)
    monkeypatch.setattr(builtins, "open", half_open)
    with pytest.raises(OSError, match="No space left"):
        j.set_state(RunState.STOPPED, "stopped")  # a base written anew
    monkeypatch.undo()
    assert Journal.load(j.path).to_dict() == before
    assert not list(tmp_path.glob(".*")), "no temporary file left behind"
