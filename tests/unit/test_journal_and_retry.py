"""The journal's format and persistence, and the one wait helper, without a cluster."""

from __future__ import annotations

import json
import stat
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.errors import ClusterUnreachable, JournalError, WaitTimeout
from orchestrator.hosts.changes import HostChange, KnobValues
from orchestrator.restart.journal import Journal, RunOptions, RunState, UndoState
from orchestrator.restart.phases import Phase, check_transition, reached
from orchestrator.retry import Seen, wait_until
from orchestrator.testing.fake import FakeClock
from tests.unit.journals import journal_of, plan_of


def journal(path: Path) -> Journal:
    j = journal_of(plan_of([["a"]]))
    j.path = path
    j.save()
    return j


def test_round_trip_and_owner_only(tmp_path: Path) -> None:
    j = journal(tmp_path / "r1.json")
    j.record_undo("k", "persistent", None, "primaries", 1)
    loaded = Journal.load(tmp_path / "r1.json")
    assert loaded.undo[0].state is UndoState.INTENDED and loaded.undo[0].before is None
    assert loaded.nodes["a"].batch == 1
    assert stat.S_IMODE((tmp_path / "r1.json").stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "r1.changes").stat().st_mode) == 0o600, "its log of changes too"
    assert not list(tmp_path.glob(".r1.json.*")), "no temporary file left behind"


def test_what_is_saved_is_the_whole_journal_and_a_replaced_spec_is_saved_anew(tmp_path: Path) -> None:
    """The spec is encoded once per spec (see Journal.to_text): a spec replaced by a resume's
    --allow-unavailable must still reach the file."""
    j = journal(tmp_path / "r1.json")
    j.set_phase("a", Phase.STOPPING)
    j.accept_unavailable(("logs-*",))
    j.timed("a", "stop", 1.5)
    loaded = Journal.load(tmp_path / "r1.json")  # the base and its log of changes (journal_file.py)
    assert loaded.to_dict() == j.to_dict(), "the files say what the journal holds"
    assert loaded.spec.options.allow_unavailable == ("logs-*",)
    assert loaded.nodes["a"].phase is Phase.STOPPING and loaded.nodes["a"].phases == {"stop": 1.5}


def test_host_changes_are_read_back_as_records_through_the_log_and_the_base(tmp_path: Path) -> None:
    j = journal(tmp_path / "r1.json")
    j.set_phase("a", Phase.STOPPING)  # running: the change goes to the log of changes, not the base
    fixed = HostChange("thp.enabled", before=KnobValues("always", None), after=KnobValues("never", "never"))
    j.host_changed("a", [fixed, fixed.reverted_by_reboot()])
    assert (tmp_path / "r1.changes").read_text(), "saved as a line of the log"
    assert Journal.load(tmp_path / "r1.json").nodes["a"].host_changes == [fixed, replace(fixed, not_persisted=True)]
    j.state = RunState.FAILED  # a run that is not running writes its base again
    j.save()
    assert not (tmp_path / "r1.changes").read_text().strip(), "saved in the base"
    assert Journal.load(tmp_path / "r1.json").nodes["a"].host_changes == [fixed, replace(fixed, not_persisted=True)]
    assert HostChange.from_json(fixed.to_json()) == fixed and "not_persisted" not in fixed.to_json()


def test_original_value_is_the_first_recorded(tmp_path: Path) -> None:
    j = journal(tmp_path / "r1.json")
    j.record_undo("k", "persistent", "all", "primaries", 1)
    j.undo[0].state = UndoState.RESTORED
    j.record_undo("k", "persistent", "primaries", "primaries", 2)  # what a live read might wrongly say
    assert j.original_value("k", "persistent") == (True, "all")
    assert j.original_value("k", "transient") == (False, None)


def test_each_key_s_first_record_and_first_pending_one_are_found_in_one_pass(tmp_path: Path) -> None:
    """`undo_by_key`: for each setting, its first record (whose value before is the original) and its first record
    not yet restored, however many records later ones added; a record keeps the batch it was written for."""
    j = journal(tmp_path / "r1.json")
    first = j.record_undo("k", "persistent", "all", "primaries", 1)
    assert first.batch == 1
    j.undo_states([first], UndoState.RESTORED)
    second = j.record_undo("k", "persistent", "primaries", "none", 2)
    third = j.record_undo("k", "persistent", "none", "primaries", 3)
    other = j.record_undo("other", "transient", None, "x", None)
    assert j.undo_by_key() == {("k", "persistent"): (first, second), ("other", "transient"): (other, other)}
    assert (second.batch, third.batch, other.batch) == (2, 3, None)


def test_a_running_journal_s_copy_in_the_cluster_is_the_journal_at_every_save_past_its_ring(tmp_path: Path) -> None:
    """Each save of a running run reaches the cluster's copy (issue 60) before what follows it: a line's document
    each, and the base again once a ring of lines was written (the first after it is written whole with the
    local journal's text, not the last base's). Read back at any save, the copy is the journal as saved."""
    from orchestrator.restart.journal_copy import BASE_DOC, MIN_RING, JournalCopy, read_copy
    from orchestrator.testing.fake import FakeCluster

    cluster = FakeCluster.of(["a"])
    written: list[str] = []
    real_write = cluster.write_lock_document

    def write(index: str, doc_id: str, body: dict[str, Any]) -> Any:
        written.append(doc_id)
        return real_write(index, doc_id, body)

    cluster.write_lock_document = write  # type: ignore[method-assign]
    j = journal(tmp_path / "r1.json")
    j.set_state(RunState.RUNNING)
    copy = JournalCopy(cluster, j.run_id, "u")  # type: ignore[arg-type]
    j.copied_to(copy)
    for n in range(MIN_RING + 20):
        j.set_paused(f"pause {n}")  # a running run's change: a line of the local log
        read = read_copy(cluster, "u")  # type: ignore[arg-type]
        assert read is not None and read.raw["paused"] == f"pause {n}", n
        assert Journal.from_raw(read.raw, "the copy").to_dict() == j.to_dict(), n
    assert copy.failures == 0 and not copy.behind
    assert written.count(BASE_DOC) == 2, "the base when copied, then once past the ring: every other save a line"


def test_undo_records_made_at_once_by_a_windows_threads_are_each_numbered_once_and_all_read_back(
        tmp_path: Path) -> None:
    """A window's nodes record their undo records (a host's tuning, say) from threads of their own. Each record
    gets a number of its own, so that none stands for another when the journal is read back from its file (or
    from the cluster's copy, after a take-over): every change is put back."""
    import threading

    j = journal(tmp_path / "r1.json")
    j.set_state(RunState.RUNNING)
    start = threading.Barrier(6)

    def record(thread: int) -> None:
        start.wait(10)
        for n in range(40):
            j.record_undo(f"thread-{thread}-{n}", "persistent", None, n, None)

    threads = [threading.Thread(target=record, args=(t,)) for t in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len({u.id for u in j.undo}) == len(j.undo) == 240, "each record numbered once"
    loaded = Journal.load(tmp_path / "r1.json")
    assert sorted(u.key for u in loaded.undo) == sorted(u.key for u in j.undo), "every record read back"


def test_a_resume_without_inventory_changes_is_said_plainly(tmp_path: Path) -> None:
    j = journal(tmp_path / "r1.json")
    j.set_state(RunState.FAILED, "x")
    j.resumed([])
    assert (j.history[-1].event, j.history[-1].message) == ("resumed", "resumed from failed")


def test_what_searchers_saw_is_kept_as_a_bounded_series_and_read_back(tmp_path: Path) -> None:
    """Each interval is a point of the run's series, in SERIES_FIELDS' order (the report's plot reads it so): at
    most SERIES_POINTS points, every other one dropped once there would be more; the baseline, the latest
    interval, the series and the window's closing are read back from the journal's files."""
    from orchestrator.restart.journal import SERIES_FIELDS, SERIES_POINTS

    j = journal(tmp_path / "r1.json")
    baseline = {"worst_ms": 5.0, "queries": 10}
    for at in range(SERIES_POINTS):
        j.record_search({"at": at, "worst_ms": 7.0, "mean_ms": 3.0, "probe_ms": 9.0, "queries": 4}, baseline,
                        rate=1000 + at)
    series = j.search["series"]
    assert len(series) == SERIES_POINTS, "full, not yet thinned"
    assert dict(zip(SERIES_FIELDS, series[-1], strict=True)) == {"at": SERIES_POINTS - 1, "worst_ms": 7.0,
                                                                 "mean_ms": 3.0, "rate": 1000 + SERIES_POINTS - 1,
                                                                 "probe_ms": 9.0}
    j.record_search({"at": SERIES_POINTS, "worst_ms": 8.0}, baseline)
    thinned = j.search["series"]
    assert [p[0] for p in thinned] == list(range(0, SERIES_POINTS + 1, 2)), "every other point, the first kept"
    assert thinned[-1] == [SERIES_POINTS, 8.0, None, None, None]
    assert j.search["latest"] == {"at": SERIES_POINTS, "worst_ms": 8.0} and j.search["baseline"] == baseline
    j.record_search_gate("searches over budget for 40 s")
    read = Journal.load(tmp_path / "r1.json").search
    assert read == j.search and set(read) == {"baseline", "latest", "series", "window_closed"}
    assert read["window_closed"] == "searches over budget for 40 s"


def test_a_failed_run_keeps_the_next_try_its_cause_names() -> None:
    from orchestrator.restart.journal import RunFailed

    cause = WaitTimeout("a did not rejoin", resume="waits for it again")
    failed = RunFailed(cause, journal_of(plan_of([["a"]])))
    assert (failed.what, failed.resume, failed.cause) == ("a did not rejoin", "waits for it again", cause)


@pytest.mark.parametrize(("change", "said"), [
    ({"format": 99}, "has format 99; this version of orchestrator reads formats"),
    ({"batches": "nope"}, "is damaged"),
    ({"state": "exploded"}, "is damaged ('exploded' is not a valid RunState)"),
    ({"nodes": {"a": {"name": "a", "batch": 1, "phase": "halfway"}}}, "is damaged ('halfway' is not a valid Phase)"),
    ({"nodes": {"a": {"name": "a", "batch": 1, "phase": "pending",
                      "host_changes": [{"knob": 3, "before": {}, "after": None}]}}}, "knob is not text"),
    ({"batches": [{"number": 1, "label": "b", "nodes": ["b"], "state": "pending"}]},
     "is damaged (its batches do not match its plan)"),
    ({"nodes": {"a": {"name": "a", "batch": 1}, "z": {"name": "z", "batch": 1}}},
     "is damaged (its node records do not match its plan)"),
    ({"batches": [{"number": 1, "label": "a", "nodes": ["a"], "state": "half"}]},
     "is damaged ('half' is not a valid BatchState)"),
    ({"created": "yesterday"}, "is damaged (its field created holds str, not float)"),
])
def test_unknown_or_damaged_journal_is_refused_saying_what_is_wrong(tmp_path: Path, change: dict[str, object],
                                                                    said: str) -> None:
    j = journal(tmp_path / "r1.json")
    raw = j.to_dict() | change
    (tmp_path / "r1.json").write_text(json.dumps(raw))
    with pytest.raises(JournalError) as err:
        Journal.load(tmp_path / "r1.json")
    assert said in str(err.value), err.value


def test_the_last_success_is_the_newest_succeeded_runs_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from orchestrator.restart.journal import last_success, runs_dir

    monkeypatch.setenv("ORCHESTRATOR_STATE", str(tmp_path))
    runs_dir("c").mkdir(parents=True)
    assert last_success("c") is None
    for run_id, state, finished in (("20261121T100000-aaaaaa", RunState.SUCCEEDED, 1000.0),
                                    ("20261121T110000-bbbbbb", RunState.SUCCEEDED, 2000.0),
                                    ("20261121T120000-cccccc", RunState.FAILED, 3000.0)):
        j = journal_of(plan_of([["a"]]), run_id=run_id)
        j.path, j.state, j.finished = runs_dir("c") / f"{run_id}.json", state, finished
        j.save()
    assert last_success("c") == 2000.0


def test_phase_table_refuses_illegal_moves() -> None:
    check_transition("a", "stopped", Phase.TUNED)
    with pytest.raises(JournalError):
        check_transition("a", "stopped", Phase.STOPPING)
    with pytest.raises(JournalError):
        check_transition("a", "pending", Phase.JOINED)
    assert reached("joined", Phase.STOPPED) and not reached("stopping", Phase.STOPPED)


def test_wait_times_out_saying_what_it_saw() -> None:
    clock = FakeClock()

    def probe(seen: Seen[int]) -> int | None:
        seen.text = f"still waiting at {clock.now:.0f}"
        return None

    with pytest.raises(WaitTimeout) as err:
        wait_until(probe, what="the node", timeout_s=10, interval_s=1, clock=clock, hint="do X")
    assert "waiting for the node" in str(err.value) and "still waiting at" in str(err.value)
    assert str(err.value).endswith("do X")
    assert 10 <= clock.now <= 11


def test_wait_tolerates_transient_errors() -> None:
    clock = FakeClock()
    answers = iter([ClusterUnreachable("down"), None, 42])

    def probe(seen: Seen[int]) -> int | None:
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    assert wait_until(probe, what="x", timeout_s=60, interval_s=1, clock=clock) == 42


def test_a_probe_that_waited_is_tried_again_at_once_a_quick_one_after_the_interval() -> None:
    clock = FakeClock()
    began: list[float] = []
    takes = iter([5.0, 0.2, 0.0])  # a server-side wait that timed out, a quick read, the answer

    def probe(seen: Seen[int]) -> int | None:
        began.append(clock.now)
        clock.advance(next(takes))
        return 42 if len(began) == 3 else None

    assert wait_until(probe, what="x", timeout_s=60, interval_s=1, clock=clock) == 42
    assert began == [0.0, 5.0, 6.0], "no sleep after the 5 s wait; the 0.2 s read waits out the rest of its second"


def test_first_eta_comes_from_the_previous_succeeded_run_in_the_same_mode(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from orchestrator.restart.journal import RunState, measured_batch_seconds, runs_dir
    from orchestrator.restart.plan import Mode

    monkeypatch.setenv("ORCHESTRATOR_STATE", str(tmp_path))
    runs_dir("c").mkdir(parents=True)

    def run(run_id: str, mode: str, state: RunState, seconds: list[float]) -> None:
        j = journal_of(plan_of([[f"a{i}"] for i in range(len(seconds))], mode=Mode(mode)), run_id=run_id)
        j.path, j.state = runs_dir("c") / f"{run_id}.json", state
        for batch, s in zip(j.batches, seconds, strict=True):
            batch.started, batch.finished = 100.0, 100.0 + s
        j.save()

    assert measured_batch_seconds("c", "node", "20261121T120000-ffffff") is None
    run("20261121T100000-aaaaaa", "node", RunState.SUCCEEDED, [10, 20])
    run("20261121T103000-bbbbbb", "zone", RunState.SUCCEEDED, [50])
    run("20261121T110000-cccccc", "node", RunState.FAILED, [99])
    assert measured_batch_seconds("c", "node", "20261121T120000-ffffff") == 15
    assert measured_batch_seconds("c", "zone", "20261121T120000-ffffff") == 50
    assert measured_batch_seconds("c", "node", "20261121T100000-aaaaaa") is None  # only runs before this one
    (runs_dir("c") / "20261121T113000-dddddd.json").write_text("{damaged")  # newer, unreadable: passed over
    assert measured_batch_seconds("c", "node", "20261121T120000-ffffff") == 15
    # A failed run of another mode whose batch never finished, newer still: a run that begins after it is given
    # the succeeded run's figure, not an error (a mutant reading any of its three conditions alone divided by
    # the unfinished run's zero batches, at the next run's start).
    run("20261121T114000-eeeeee", "zone", RunState.FAILED, [])
    assert measured_batch_seconds("c", "node", "20261121T120000-ffffff") == 15
    # A failed run that died in its batch (started, never finished), newer still: passed over, not an error
    # (reading a batch as timed when it only started subtracted its start from nothing: issue 58).
    died = journal_of(plan_of([["a0"]], mode=Mode.NODE), run_id="20261121T112000-abcdef")
    died.path, died.state = runs_dir("c") / "20261121T112000-abcdef.json", RunState.FAILED
    died.batches[0].started = 100.0
    died.save()
    assert measured_batch_seconds("c", "node", "20261121T113500-ffffff") == 15
    # Five runs back at most: from 12:00, the succeeded node run of 10:00 is the sixth, and lends nothing.
    assert measured_batch_seconds("c", "node", "20261121T120000-ffffff") is None


def test_every_save_read_back_is_the_whole_journal_though_a_save_writes_only_what_changed(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A save appends the records its transition said it changed to the journal's log, or writes its base
    anew (journal_file.py): at every save of runs over the fake cluster (zone and node mode, a failed
    start, a resume, the log compacted every 7 lines), the journal read back from its files is exactly the
    journal in memory. A transition that changed a record without saying so would fail this."""
    from orchestrator.errors import HostError
    from orchestrator.restart import journal_file
    from orchestrator.restart.plan import Mode
    from orchestrator.testing.fake import FakeCluster
    from tests.unit.test_engine import ORIGINAL, inventory, new_journal, run, state_dir

    saves: list[bool] = []
    real_save = Journal.save

    def checked_save(self: Journal) -> None:
        real_save(self)
        assert self.path is not None
        saves.append(Journal.load(self.path).to_dict() == self.to_dict())

    monkeypatch.setattr(Journal, "save", checked_save)
    monkeypatch.setattr(journal_file, "COMPACT_AFTER", 7)
    with state_dir():
        names = ["a", "b", "c", "d"]
        inv = inventory(names, zones=["z1", "z1", "z2", "z2"])
        cluster = FakeCluster.of(names, zones=["z1", "z1", "z2", "z2"], settings=dict(ORIGINAL))
        run(inv, cluster, new_journal(inv, cluster, mode=Mode.ZONE))
        cluster.nodes["c"].start_fails = True
        journal = new_journal(inv, cluster)
        with pytest.raises(HostError):
            run(inv, cluster, journal)
        cluster.nodes["c"].start_fails = False
        run(inv, cluster, Journal.load(journal.path))  # type: ignore[arg-type]
    assert len(saves) > 100 and all(saves), saves.index(False)


def option_values() -> st.SearchStrategy[RunOptions]:
    """Any run's options, each field drawn by its type: a field added to RunOptions is drawn as well."""
    import dataclasses
    import typing

    by_type: dict[object, st.SearchStrategy[Any]] = {
        bool: st.booleans(), str: st.text(max_size=8),
        float: st.floats(min_value=0, max_value=1e6, allow_nan=False),
        tuple[str, ...]: st.lists(st.text(min_size=1, max_size=6), max_size=3).map(tuple)}
    hints = typing.get_type_hints(RunOptions)
    return st.builds(RunOptions, **{f.name: by_type[hints[f.name]] for f in dataclasses.fields(RunOptions)})


@settings(max_examples=200, deadline=None)
@given(options=option_values())
def test_every_run_option_survives_the_journal_as_resume_reads_it(options: RunOptions) -> None:
    """`resume` runs with the options the journal recorded: each field (every one RunOptions has, drawn by
    its type) comes back as it was. A field `from_json` forgot (a resumed reboot run that stopped rebooting,
    as the review found possible) fails this."""
    from dataclasses import asdict

    saved = json.loads(json.dumps(asdict(options)))
    assert RunOptions.from_json(saved) == options


def test_every_field_a_run_sets_is_read_back_from_its_log_and_from_its_base(tmp_path: Path) -> None:
    """A resume reads the journal as its files hold it: a field lost on the way (the preludes already done, the
    hooks' saved values, the history) would make it redo or forget what the run did (mutation survivors)."""
    j = journal(tmp_path / "r1.json")
    j.setup_done()
    j.prelude_done("forcemerge", {"outcome": "success", "merged": ["logs-1"]})
    j.save_hook_values({"silence": "s-42"})
    j.set_paused("check the canary")
    j.set_phase("a", Phase.STOPPING)
    j.resumed(["node a: host h-a -> h-a2", "node b added"])
    j.origin = "airflow:dag/run/task/-1"
    j.cluster_calls = 17
    j.set_state(RunState.RUNNING)
    logged = Journal.load(tmp_path / "r1.json")  # a running run's changes are lines of its log
    assert logged.to_dict() == j.to_dict()
    assert logged.preludes_done == ["forcemerge"] and logged.hook_values == {"silence": "s-42"}
    assert logged.paused == "check the canary" and logged.run_setup_done and logged.finished is None
    assert logged.history[-1].event == "resumed"
    assert logged.history[-1].message == ("resumed from running; inventory changed: node a: host h-a -> h-a2; "
                                          "node b added")
    j.set_state(RunState.FAILED, "node a did not come back")  # ended: the base is written again
    based = Journal.load(tmp_path / "r1.json")
    assert based.to_dict() == j.to_dict() and based.finished is not None and based.state is RunState.FAILED
    assert [(h.event, h.message) for h in based.history][-1] == ("failed", "node a did not come back")
    assert based.prelude_reports == {"forcemerge": {"outcome": "success", "merged": ["logs-1"]}}


def test_a_resume_names_the_inventory_changes_it_accepted_on_one_bounded_line(tmp_path: Path) -> None:
    """`status` and the report show a resume's history line: it names what changed in the inventory, and an
    inventory rewritten whole does not flood them (the line stays short, and says how many it left out)."""
    j = journal(tmp_path / "r1.json")
    j.resumed(["node es-9 added", "timeouts.start_s 300 -> 600"])
    said = j.history[-1].message
    assert "node es-9 added" in said and "timeouts.start_s 300 -> 600" in said and "more" not in said
    j.resumed([f"node es-{n} added" for n in range(500)])
    long = j.history[-1].message
    assert "\n" not in long and len(long) < 1000, "one short line, whatever the inventory"
    assert "node es-0 added" in long
    left_out = [n for n in range(500) if f"node es-{n} added" not in long]
    assert left_out and f"and {len(left_out)} more" in long, "what it left out, counted"
    j.resumed([])
    assert "inventory" not in j.history[-1].message, "no change, none said"
    assert Journal.load(tmp_path / "r1.json").history[-2].message == long, "kept in the journal"


def test_a_run_asked_by_id_is_found_or_the_refusal_says_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from orchestrator.restart.journal import latest, runs_dir

    monkeypatch.setenv("ORCHESTRATOR_STATE", str(tmp_path))
    runs_dir("c").mkdir(parents=True)
    j = journal_of(plan_of([["a"]]), run_id="20261121T100000-aaaaaa")
    j.path = runs_dir("c") / "20261121T100000-aaaaaa.json"
    j.save()
    assert latest("c", "20261121T100000-aaaaaa").run_id == "20261121T100000-aaaaaa"  # type: ignore[union-attr]
    assert latest("c").run_id == "20261121T100000-aaaaaa"  # type: ignore[union-attr]
    with pytest.raises(JournalError) as err:
        latest("c", "x" * 100)
    assert str(err.value) == (f"--run {'x' * 80!r} is not a run id (such as 20261122T013500-a1b2c3; `orchestrate "
                              "status` shows the latest)")
    with pytest.raises(JournalError) as err:
        latest("c", "20261121T110000-bbbbbb")
    assert str(err.value) == f"no run 20261121T110000-bbbbbb for cluster c in {runs_dir('c')}"


def test_a_journal_of_another_format_names_the_formats_this_version_reads(tmp_path: Path) -> None:
    j = journal(tmp_path / "r1.json")
    (tmp_path / "r1.json").write_text(json.dumps(j.to_dict() | {"format": 99}))
    with pytest.raises(JournalError) as err:
        Journal.load(tmp_path / "r1.json")
    assert str(err.value) == (f"journal {tmp_path / 'r1.json'} has format 99; this version of orchestrator reads "
                              "formats 2 and 3 only. Use the version that wrote it.")
    (tmp_path / "r1.json").write_text("[1, 2]")
    with pytest.raises(JournalError, match="has format 'unknown'"):
        Journal.load(tmp_path / "r1.json")


def test_a_journal_written_before_hooks_history_or_its_log_reads_with_none_of_them(tmp_path: Path) -> None:
    j = journal(tmp_path / "r1.json")
    older = {k: v for k, v in j.to_dict().items() if k not in ("hook_values", "history", "seq")} | {"format": 2}
    (tmp_path / "r1.json").write_text(json.dumps(older))
    (tmp_path / "r1.changes").unlink(missing_ok=True)
    loaded = Journal.load(tmp_path / "r1.json")
    assert loaded.hook_values == {} and loaded.history == [] and loaded.state is RunState.RUNNING
    loaded.set_phase("a", Phase.STOPPING)  # goes on in the new format: a base, then its log
    assert Journal.load(tmp_path / "r1.json").nodes["a"].phase is Phase.STOPPING
    assert json.loads((tmp_path / "r1.json").read_text())["format"] == 3


def test_each_record_a_step_writes_is_kept_as_written_and_read_back(tmp_path: Path) -> None:
    """What the steps record of a node and a batch (mutation survivors: each could be lost or changed)."""
    from orchestrator.restart.deferral import Wait

    j = journal(tmp_path / "r1.json")
    j.set_phase("a", Phase.STOPPING)
    entered = dict(j.nodes["a"].started_at)
    assert set(entered) == {"stopping"}, "the time it entered the phase"
    j.set_phase("a", Phase.STOPPING)
    assert j.nodes["a"].started_at == entered, "kept: staying in a phase is not entering it again"
    j.timed("a", "stop_s", 1.23456)
    j.restarted("a", "pid-2")
    j.recovered("a", {"bytes": 10})
    j.recovered("a", {"reused": 7})
    j.begin_batch(j.batches[0])
    j.end_batch(j.batches[0])
    back = Journal.load(tmp_path / "r1.json")
    a = back.nodes["a"]
    assert (a.phases, a.process_after, a.restarted, a.recovery) == ({"stop_s": 1.23}, "pid-2", True,
                                                                    {"bytes": 10, "reused": 7})
    batch = back.batches[0]
    assert batch.started is not None and batch.finished is not None and batch.started <= batch.finished
    with pytest.raises(JournalError, match=r"^a: illegal phase change stopping -> pending"):
        j.set_phase("a", Phase.PENDING)
    j.defer(Wait("join", 1, ("a",), "a to rejoin", 1.0, 60))
    assert Journal.load(tmp_path / "r1.json").message == "waiting for a to rejoin (deferred to the scheduler's trigger)"


def test_a_node_record_changed_after_it_was_written_is_written_anew(tmp_path: Path) -> None:
    """The base file's text of a record is kept until a change names the record (one node: one record; an
    undo record too, of which a window's run holds one per index)."""
    j = journal(tmp_path / "r1.json")
    first = j.to_text()
    j.set_phase("a", Phase.STOPPING)
    assert json.loads(j.to_text())["nodes"]["a"]["phase"] == "stopping" != json.loads(first)["nodes"]["a"]["phase"]
    j.spec = replace(j.spec, prelude={"merge": {}})
    assert json.loads(j.to_text())["spec"]["prelude"] == {"merge": {}}, "a replaced spec is written anew"
    _kept, moved = j.record_undos([("i1/delay", "index", "1m", "20m"), ("i2/delay", "index", None, "20m")], None)
    assert [u["state"] for u in json.loads(j.to_text())["undo"]] == ["intended", "intended"]
    j.undo_states([moved], UndoState.APPLIED)
    assert [(u["key"], u["state"]) for u in json.loads(j.to_text())["undo"]] == [("i1/delay", "intended"),
                                                                                ("i2/delay", "applied")]
    assert json.loads(j.to_text()) == json.loads(json.dumps(j.to_dict(), default=str)) | {"seq": j._seq}, \
        "the base's text is the journal's whole state, in its order"


def test_a_journal_whose_change_number_is_missing_or_odd_keeps_every_change_made_after_it_is_read(
        tmp_path: Path) -> None:
    """A base file without a usable change number (an older or hand-edited journal) is read as of change 0:
    the changes saved after it go to the log, and none of them is skipped as already in the base when it is
    read again, before or after the base is written anew."""
    for seq in (None, "x", True, 41):
        j = journal(tmp_path / "r1.json")
        raw = {k: v for k, v in j.to_dict().items() if k != "seq"} | ({} if seq is None else {"seq": seq})
        (tmp_path / "r1.json").write_text(json.dumps(raw))
        (tmp_path / "r1.changes").unlink(missing_ok=True)
        loaded = Journal.load(tmp_path / "r1.json")
        loaded.set_paused("check the canary")  # a change in the log, the base as it was
        loaded.resumed(["node a: host h-a -> h-a2"])
        again = Journal.load(tmp_path / "r1.json")
        assert again.paused == "check the canary" and again.history[-1].event == "resumed", seq
        again.set_state(RunState.FAILED, "x")  # ended: the base written anew, then one more change in the log
        again.set_paused(None)
        last = Journal.load(tmp_path / "r1.json")
        assert (last.state, last.paused, last.history[-2].event) == (RunState.FAILED, None, "resumed"), seq


def one_short_line(error: BaseException, *named: str) -> str:
    """An operator's refusal: one line, not flooded by what a planted file holds, naming what it must."""
    text = str(error)
    assert "\n" not in text and len(text) < 500, text
    for name in named:
        assert name in text, (name, text)
    return text


def test_the_refusals_of_a_journal_say_whose_it_is_briefly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A journal planted or damaged with long values is refused in one short line that names its file and what is
    wrong with it, never echoing the planted values whole."""
    from orchestrator.restart.journal import RunFailed, load_run, newest_first, runs_dir

    with pytest.raises(JournalError) as no_path:
        journal_of(plan_of([["a"]])).save()
    assert str(no_path.value) == "journal has no path"
    named = "20261121T100000-aaaaaa"
    j = journal_of(plan_of([["a"]]), run_id="r" * 600)
    j.path = tmp_path / f"{named}.json"
    j.save()
    with pytest.raises(JournalError) as err:
        Journal.load(tmp_path / f"{named}.json")
    said = one_short_line(err.value, str(tmp_path / f"{named}.json"), "damaged", "rrrr")
    assert said == (f"journal {tmp_path / named}.json is damaged (it holds run {'r' * 40!r}, not the run its name "
                    "says); it was not written by this tool or was changed since")
    raw = journal(tmp_path / "x.json").to_dict()
    (tmp_path / "x.json").write_text(json.dumps(raw | {"batches": [raw["batches"][0] | {"state": "s" * 3000}]}))
    (tmp_path / "x.changes").unlink(missing_ok=True)
    with pytest.raises(JournalError) as damaged:
        Journal.load(tmp_path / "x.json")
    said = one_short_line(damaged.value, str(tmp_path / "x.json"), "damaged", "sss")
    why = str(ValueError(f"{'s' * 3000!r} is not a valid BatchState"))[:200]
    assert said == (f"journal {tmp_path / 'x.json'} is damaged ({why}); it was not written by this tool or was "
                    "changed since")
    monkeypatch.setenv("ORCHESTRATOR_STATE", str(tmp_path / "state"))
    runs_dir("c").mkdir(parents=True, mode=0o700)
    assert runs_dir("c") == tmp_path / "state" / "runs" / "c"
    other = journal_of(plan_of([["a"]]), run_id="20261121T100000-bbbbbb")
    other.cluster = "d" * 1000
    other.path = runs_dir("c") / "20261121T100000-bbbbbb.json"
    other.save()
    with pytest.raises(JournalError) as moved:
        load_run("c", other.path)
    said = one_short_line(moved.value, str(other.path), "dddd", "not 'c'")
    assert said == (f"journal {other.path} is of cluster {'d' * 80!r}, not 'c'; it was moved or changed since it "
                    "was written")
    good = journal_of(plan_of([["a"]]), run_id="20261121T090000-cccccc")
    good.path = runs_dir("c") / "20261121T090000-cccccc.json"
    good.save()
    assert [r.run_id for r in newest_first("c")] == ["20261121T090000-cccccc"], "the unreadable newer one skipped"
    failed = RunFailed(WaitTimeout("a did not rejoin"), good)
    assert (str(failed), failed.exit_code) == ("a did not rejoin", WaitTimeout("x").exit_code)


def test_a_run_id_is_the_utc_time_it_began(monkeypatch: pytest.MonkeyPatch) -> None:
    import time as clock

    from orchestrator.restart.journal import new_run_id

    monkeypatch.setenv("TZ", "Asia/Tokyo")
    clock.tzset()
    try:
        before = clock.strftime("%Y%m%dT%H%M", clock.gmtime())
        assert new_run_id()[:13] in (before, clock.strftime("%Y%m%dT%H%M", clock.gmtime()))
    finally:
        monkeypatch.delenv("TZ")
        clock.tzset()


def test_a_value_json_cannot_write_is_written_as_its_own_json_or_its_text() -> None:
    from orchestrator.restart.journal import encoded

    change = HostChange("thp.enabled", before=KnobValues("always", None), after=KnobValues("never", "never"))
    assert encoded(change) == change.to_json()
    assert encoded(Path("/x")) == "/x"

    class NotCallable:
        to_json = "a field, not a method"

        def __str__(self) -> str:
            return "plain"

    assert encoded(NotCallable()) == "plain"


def test_the_journals_dict_holds_what_its_file_holds_and_a_state_without_message_says_none(tmp_path: Path) -> None:
    j = journal(tmp_path / "r1.json")
    j.set_state(RunState.FAILED, "x")
    assert set(json.loads(j.to_text())) == set(j.to_dict()) | {"seq"}
    j.set_state(RunState.RUNNING)
    assert j.message == ""


def test_the_first_eta_is_the_last_like_run_s_and_a_long_history_is_not_read_whole(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before a run has timed a batch of its own, its ETA is the newest succeeded run's of the same mode (not a
    failed one's, nor another mode's, nor its own); a cluster with hundreds of runs behind it is not read whole
    for it, or for `status`."""
    from orchestrator.restart.journal import measured_batch_seconds, newest_first, runs_dir
    from orchestrator.restart.plan import Mode

    monkeypatch.setenv("ORCHESTRATOR_STATE", str(tmp_path))
    runs_dir("c").mkdir(parents=True)

    def run(n: int, mode: Mode, seconds: float, state: RunState = RunState.SUCCEEDED) -> str:
        run_id = f"20261121T{n // 60:02}{n % 60:02}00-aaaaaa"
        j = journal_of(plan_of([["a"]], mode=mode), run_id=run_id)
        j.path, j.state = runs_dir("c") / f"{run_id}.json", state
        j.batches[0].started, j.batches[0].finished = 100.0, 100.0 + seconds
        j.save()
        return run_id

    run(0, Mode.ZONE, 40)
    run(1, Mode.NODE, 12)
    run(2, Mode.NODE, 99, RunState.FAILED)
    mine = run(3, Mode.NODE, 1000)
    assert measured_batch_seconds("c", "node", mine) == 12, "the newest succeeded run of its mode, not its own"
    assert measured_batch_seconds("c", "zone", mine) == 40
    assert measured_batch_seconds("c", "node", "20261121T000000-aaaaaa") is None, "no run before it"
    for n in range(4, 400):
        run(n, Mode.ZONE, 40)
    assert measured_batch_seconds("c", "node", "20261121T235900-ffffff") is None, "hundreds of runs back: not read"
    seen = [j.run_id for j in newest_first("c")]
    assert seen and seen == sorted(seen, reverse=True) and seen[0] == "20261121T063900-aaaaaa", "newest first"
    assert len(seen) < 100, "a long history is not read whole"
