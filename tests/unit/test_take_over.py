"""A run any operator can pick up (issue 60): the journal copied into the cluster beside the lock, seen by
`status` from another machine and finished there by `resume --take-over`, over the fake cluster engine. Two
machines are two state directories; "another machine's" lock is one whose host is not this one's. The real
nodes' test is tests/integration/test_take_over.py."""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from orchestrator import api
from orchestrator.errors import JournalError, OrchestratorError, PreflightFailed, RunLocked, StoppedAfter
from orchestrator.restart.journal_copy import BASE_DOC, MIN_RING, JournalCopy, read_copy
from orchestrator.restart.lock import LOCK_INDEX, RUN_DOC
from orchestrator.testing.fake import FLEET, LIMIT, Crash, FakeCluster
from tests.unit.test_airflow_fleet import NODES, add_cluster

NAME = "prod"


@pytest.fixture
def machines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """Machine A's and machine B's state directories, one inventory directory (each operator has the
    inventory), and the fake cluster both reach. ``on(m)`` makes machine ``m`` the one that runs."""
    configs = tmp_path / "configs"
    configs.mkdir()
    monkeypatch.setenv("ORCHESTRATOR_CONFIGS", str(configs))
    cluster = add_cluster(configs, NAME)

    def on(machine: str) -> Path:
        state = tmp_path / f"state-{machine}"
        monkeypatch.setenv("ORCHESTRATOR_STATE", str(state))
        return state

    yield {"configs": configs, "cluster": cluster, "on": on}
    FLEET.clear()


def starts(cluster: FakeCluster) -> dict[str, int]:
    return {n: node.starts for n, node in cluster.nodes.items()}


def as_another_machines(cluster: FakeCluster, quiet_s: float) -> None:
    """The run lock, as the run of another machine leaves it: its host is not this one, last renewed
    ``quiet_s`` ago."""
    lock = cluster.locks[(LOCK_INDEX, RUN_DOC)]
    lock.update(host="machine-a.example", pid=4242, started=time.time() - quiet_s, renewed=time.time() - quiet_s)
    lock.pop("state", None)


def killed_mid_run(cluster: FakeCluster) -> None:
    """Machine A's run killed as by SIGKILL halfway (after its run setting was raised and a node restarted):
    what it left in the cluster (lock, copy) is what was there at that moment."""
    frozen: dict[tuple[str, str], dict[str, Any]] = {}
    cluster.crash_at = 20  # of the 34 points a whole run of 3 nodes passes
    cluster.on_crash = lambda: frozen.update(copy.deepcopy(cluster.locks))
    with pytest.raises((Crash, OrchestratorError)):  # the engine's last resort says it as an internal error
        api.restart(NAME)
    assert frozen, "the run was killed"
    cluster.on_crash, cluster.killed = None, False
    cluster.locks.clear()
    cluster.locks.update(frozen)


def test_a_run_stopped_on_one_machine_is_seen_and_finished_on_another_each_node_once(
        machines: dict[str, Any]) -> None:
    cluster = machines["cluster"]
    machines["on"]("a")
    with pytest.raises(StoppedAfter):
        api.restart(NAME, stop_after=1)
    run_id = api.status(NAME)["run"]["run_id"]
    assert sum(starts(cluster).values()) == 1
    machines["on"]("b")  # another operator, another machine: no journal of the run here
    seen = api.status(NAME)
    assert seen["run"]["run_id"] == run_id and seen["run"]["state"] == "stopped", seen["run"]
    assert seen["run"]["journal"].startswith("the cluster's copy, saved by "), seen["run"]["journal"]
    assert "--take-over" in seen["run"]["message"]
    with pytest.raises(JournalError, match="no run to resume"):
        api.resume(NAME)  # a plain resume knows only this machine's journals
    said: list[str] = []
    with pytest.raises(StoppedAfter):  # machine B goes one batch further, and stops in its turn
        api.resume(NAME, take_over=True, stop_after=1, on_event=lambda e: said.append(e.message))
    assert any(m.startswith(f"taking over run {run_id} from ") for m in said), said[:5]
    assert sum(starts(cluster).values()) == 2
    machines["on"]("a")  # machine A's journal is behind the run now: never resumed from it
    said.clear()
    done = api.resume(NAME, on_event=lambda e: said.append(e.message))
    assert any(m.startswith(f"this machine's journal of run {run_id} is behind the cluster's copy") for m in said)
    assert done.result == "succeeded" and done.run_id == run_id
    assert starts(cluster) == dict.fromkeys(NODES, 1), "each node restarted once, across the two machines"
    assert cluster.settings[("cluster", LIMIT)] == "normal", "the run's setting put back by the machine that ended it"
    assert (LOCK_INDEX, RUN_DOC) not in cluster.locks
    after = read_copy(cluster, cluster.uuid)
    assert after is not None and after.raw["state"] == "succeeded", "the copy follows the run to its end"
    machines["on"]("b")  # B's journal of the run, left stopped, is behind the run's end: a new run is not refused
    assert api.status(NAME)["run"]["state"] == "succeeded"
    with pytest.raises(JournalError, match="was finished on another machine"):
        api.resume(NAME)
    assert api.restart(NAME).result == "succeeded"
    assert starts(cluster) == dict.fromkeys(NODES, 2)


def test_a_killed_run_is_taken_over_only_once_its_lock_is_stale_and_its_undo_records_are_carried(
        machines: dict[str, Any]) -> None:
    cluster = machines["cluster"]
    machines["on"]("a")
    killed_mid_run(cluster)
    assert cluster.settings[("cluster", LIMIT)] == "raised", "killed with the run's setting in force"
    assert 0 < sum(starts(cluster).values()) < len(NODES), starts(cluster)
    machines["on"]("b")
    as_another_machines(cluster, quiet_s=5)  # alive, for all machine B can tell
    before = copy.deepcopy(cluster.locks)
    with pytest.raises(RunLocked, match=r"is alive: .* once its lock is stale"):
        api.resume(NAME, take_over=True)
    assert cluster.locks == before, "a refused take-over changes nothing in the cluster"
    assert api.status(NAME)["run"]["state"] == "running"
    as_another_machines(cluster, quiet_s=400)  # silent past its stale time (300 s): its machine is gone
    assert api.status(NAME)["run"]["state"] == "interrupted"
    done = api.resume(NAME, take_over=True)
    assert done.result == "succeeded", done
    assert starts(cluster) == dict.fromkeys(NODES, 1), "no node restarted twice: the copy said which were"
    assert cluster.settings[("cluster", LIMIT)] == "normal", "the undo record written on machine A, restored on B"


def test_a_lock_says_its_own_stale_time_and_every_machine_judges_it_by_that(machines: dict[str, Any]) -> None:
    """`timeouts.lock_stale_s` of the inventory that started the run, written into its lock: a 30 s lock
    silent for 40 s is taken over; a damaged stale time is not believed (the default 300 s then holds)."""
    cluster = machines["cluster"]
    inventory = machines["configs"] / f"{NAME}.yaml"
    raw = yaml.safe_load(inventory.read_text())
    raw["timeouts"]["lock_stale_s"] = 30
    inventory.write_text(yaml.safe_dump(raw))
    machines["on"]("a")
    killed_mid_run(cluster)
    assert cluster.locks[(LOCK_INDEX, RUN_DOC)]["stale_after_s"] == 30
    machines["on"]("b")
    as_another_machines(cluster, quiet_s=40)
    cluster.locks[(LOCK_INDEX, RUN_DOC)]["stale_after_s"] = 1e12  # forged: a lock that never goes stale
    with pytest.raises(RunLocked):
        api.resume(NAME, take_over=True)
    cluster.locks[(LOCK_INDEX, RUN_DOC)]["stale_after_s"] = 30
    assert api.resume(NAME, take_over=True).result == "succeeded"
    assert starts(cluster) == dict.fromkeys(NODES, 1)


@pytest.mark.parametrize("planted", ["another cluster", "damaged", "another run", "other procedure"])
def test_a_planted_or_foreign_copy_is_refused_and_nothing_changes(machines: dict[str, Any], planted: str) -> None:
    cluster = machines["cluster"]
    machines["on"]("a")
    with pytest.raises(StoppedAfter):
        api.restart(NAME, stop_after=1)
    machines["on"]("b")
    docs = cluster.locks
    if planted == "another cluster":
        cluster.uuid = "another-clusters-uuid"  # as if the documents were moved here from elsewhere
        wanted = "written in another cluster"
    elif planted == "damaged":
        docs[(LOCK_INDEX, BASE_DOC)]["base"] = docs[(LOCK_INDEX, BASE_DOC)]["base"].replace('"n1"', '"n9"', 1)
        wanted = "damaged"
    elif planted == "another run":
        docs[(LOCK_INDEX, RUN_DOC)] = {"run_id": "20261126T000000-abcdef", "host": "machine-c", "pid": 1,
                                       "started": time.time() - 999, "renewed": time.time() - 999}
        wanted = "not of the run that holds the cluster's lock"
    else:
        inventory = machines["configs"] / f"{NAME}.yaml"
        raw = yaml.safe_load(inventory.read_text())
        playbook = machines["configs"] / "mine.yaml"
        playbook.write_text(yaml.safe_dump({"name": "mine", "product": "fake", "batch": [
            "stop_service", {"command": {"name": "wipe", "run": "echo planted"}}, "start_service", "wait_for_join"]}))
        raw["playbook"] = str(playbook)
        inventory.write_text(yaml.safe_dump(raw))
        wanted = "records a procedure"
    settings, locks = dict(cluster.settings), copy.deepcopy(docs)
    with pytest.raises((JournalError, PreflightFailed), match=wanted):
        api.resume(NAME, take_over=True, accept_changes=True)
    assert cluster.settings == settings and cluster.locks == locks, "nothing changed in the cluster"
    assert sum(starts(cluster).values()) == 1, "no node touched"
    assert not list((machines["on"]("b") / "runs").glob(f"{NAME}/*.json")), "nothing written on machine B"


class Flaky:
    """A cluster whose lock index refuses writes while ``down``."""

    def __init__(self) -> None:
        self.cluster = FakeCluster.of(["a"])
        self.down = False

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.cluster, name)
        if name in ("create_lock", "renew_lock", "delete_lock", "write_lock_document"):
            def refused(*args: Any) -> Any:
                if self.down:
                    raise ConnectionError("unreachable")
                return method(*args)
            return refused
        return method


def test_a_copy_that_cannot_be_written_never_stops_the_run_and_is_whole_again_at_the_next_save_that_works(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import orchestrator.restart.journal_copy as journal_copy

    monkeypatch.setattr(journal_copy, "RETRY_AFTER_S", 0.0)
    flaky = Flaky()
    kept = JournalCopy(flaky, "20261126T000000-abcdef", "u")  # type: ignore[arg-type]

    def base(seq: int, message: str) -> str:
        return (f'{{"format": 3, "run_id": "20261126T000000-abcdef", "seq": {seq}, "message": "{message}", '
                '"nodes": {}, "batches": [], "undo": []}')

    kept.saved(1, None, lambda: base(1, "first"))
    kept.saved(2, '{"seq": 2, "run": {"message": "second"}}', lambda: base(2, "?"))
    flaky.down = True
    kept.saved(3, '{"seq": 3, "run": {"message": "lost"}}', lambda: base(3, "?"))  # no exception: the run goes on
    assert kept.behind and kept.failures == 1 and "unreachable" in kept.last_error
    read = read_copy(flaky, "u")  # type: ignore[arg-type]
    assert read is not None and read.seq == 2 and read.raw["message"] == "second", "behind: as of the last write"
    flaky.down = False
    kept.saved(4, '{"seq": 4, "run": {"message": "line"}}', lambda: base(4, "whole"))
    assert not kept.behind
    read = read_copy(flaky, "u")  # type: ignore[arg-type]
    assert read is not None and read.seq == 4 and read.raw["message"] == "whole", "the base written whole again"


def test_the_lines_after_the_base_are_read_in_order_round_after_round_of_their_slots() -> None:
    """Each save writes one small document (its line, in slot seq % ring), whatever the journal's size; the
    base again once a ring of lines was written. Read back at any save, the copy is the journal as saved."""
    cluster = FakeCluster.of(["a"])
    kept = JournalCopy(cluster, "20261126T000000-abcdef", "u")  # type: ignore[arg-type]
    text = '{"format": 3, "run_id": "20261126T000000-abcdef", "seq": 1, "nodes": {}, "batches": [], "undo": []}'
    kept.saved(1, None, lambda: text)
    def whole(seq: int) -> str:
        return text.replace('"seq": 1', f'"seq": {seq}').replace('"nodes"', f'"message": "change {seq}", "nodes"')

    for seq in range(2, 3 * MIN_RING + 7):
        kept.saved(seq, f'{{"seq": {seq}, "run": {{"message": "change {seq}"}}}}', lambda seq=seq: whole(seq))
        if seq % 37 == 0 or seq > 3 * MIN_RING:
            read = read_copy(cluster, "u")  # type: ignore[arg-type]
            assert read is not None and read.seq == seq and read.raw["message"] == f"change {seq}", seq
    slots = [k for k in cluster.locks if k[1].startswith("journal-log-")]
    assert len(slots) <= MIN_RING, "the slots are written over, never more than a ring of them"
    # A save written alone keeps the shape earlier versions wrote and read (``line``): a take-over by one of them
    # reads a copy of saves made one at a time.
    assert all("line" in cluster.locks[k] and "lines" not in cluster.locks[k] for k in slots)


def test_lines_queued_before_a_base_are_not_written_the_base_holds_them() -> None:
    cluster = FakeCluster.of(["a"])
    kept = JournalCopy(cluster, "20261126T000000-abcdef", "u")  # type: ignore[arg-type]
    text = '{"format": 3, "run_id": "20261126T000000-abcdef", "seq": 3, "nodes": {}, "batches": [], "undo": []}'
    kept.saved(1, None, lambda: text.replace('"seq": 3', '"seq": 1'))
    written: list[str] = []
    real_write = cluster.write_lock_document

    def write(index: str, doc_id: str, body: dict[str, Any]) -> None:
        written.append(doc_id)
        real_write(index, doc_id, body)

    cluster.write_lock_document = write  # type: ignore[method-assign]
    kept.queue(2, '{"seq": 2, "run": {"message": "change 2"}}', lambda: "?")
    kept.queue(3, None, lambda: text)  # the run stopped, say: its base written whole
    kept.flush(3)
    assert written == [BASE_DOC], "one write: the base, which holds change 2"
    read = read_copy(cluster, "u")  # type: ignore[arg-type]
    assert read is not None and read.seq == 3


@pytest.mark.parametrize("fails", [False, True], ids=["written", "the write fails"])
def test_saves_made_while_a_write_is_under_way_go_together_in_the_next_each_returning_once_its_own_is_in(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fails: bool) -> None:
    """A window's nodes save from threads of their own. While one save's write is in the cluster, the others'
    saves are made (the journal is not held meanwhile) and wait; the next write carries them all, one document.
    Each returns only once its change is in the copy, or its write failed: the run goes on, and the next save
    writes the copy whole. Read back, the copy is the journal as saved."""
    import orchestrator.restart.journal_copy as journal_copy
    from orchestrator.restart.journal import Journal, RunState
    from tests.unit.test_journal_and_retry import journal

    monkeypatch.setattr(journal_copy, "RETRY_AFTER_S", 0.0)
    cluster = FakeCluster.of(["a"])
    j = journal(tmp_path / "r1.json")
    j.set_state(RunState.RUNNING)
    kept = JournalCopy(cluster, j.run_id, "u")  # type: ignore[arg-type]
    j.copied_to(kept)
    written: list[dict[str, Any]] = []
    in_the_cluster, go_on = threading.Event(), threading.Event()
    real_write = cluster.write_lock_document

    def write(index: str, doc_id: str, body: dict[str, Any]) -> None:
        written.append(body)
        if len(written) == 1:  # the first save's write stays in the cluster until the others are made
            in_the_cluster.set()
            assert go_on.wait(10)
        if fails and len(written) == 1:
            raise ConnectionError("unreachable")
        real_write(index, doc_id, body)

    cluster.write_lock_document = write  # type: ignore[method-assign]
    seen: dict[int, bool] = {}

    def save(n: int) -> None:
        j.record_undo(f"key-{n}", "persistent", None, n, None)
        copied = read_copy(cluster, "u")  # type: ignore[arg-type]
        seen[n] = copied is not None and f"key-{n}" in {u.key for u in Journal.from_raw(copied.raw, "copy").undo}

    first = threading.Thread(target=save, args=(0,), daemon=True)
    first.start()
    assert in_the_cluster.wait(10)
    others = [threading.Thread(target=save, args=(n,), daemon=True) for n in range(1, 5)]
    for thread in others:
        thread.start()
    deadline = time.monotonic() + 10
    while len(j.undo) < 5 and time.monotonic() < deadline:  # bounded: made while the first write is held
        time.sleep(0.01)
    assert len(j.undo) == 5, "the other saves were made while a write was in the cluster"
    time.sleep(0.1)
    assert len(written) == 1 and not any(t.is_alive() is False for t in others), "each waits for its own write"
    go_on.set()
    for thread in [first, *others]:
        thread.join(10)
    assert not any(t.is_alive() for t in [first, *others])
    if fails:
        assert len(written) == 1, "what was queued behind the failed write is not written: the copy has a gap"
        assert seen == {n: False for n in range(5)}
        assert kept.behind and kept.failures == 1 and "unreachable" in kept.last_error
        j.set_paused("after the failure")
        assert not kept.behind and "base" in written[-1], "the next save writes the copy whole"
    else:
        assert len(written) == 2 and len(written[1]["lines"]) == 4, "the four saves queued meanwhile: one write"
        assert seen == {n: True for n in range(5)}, "each save returned once its change was in the copy"
    copied = read_copy(cluster, "u")  # type: ignore[arg-type]
    assert copied is not None and Journal.from_raw(copied.raw, "copy").to_dict() == j.to_dict()


def test_a_save_made_by_the_thread_that_writes_the_copy_never_waits_for_itself(tmp_path: Path) -> None:
    """Whatever the cluster's client does while it writes (a hook of its own that saves the journal, say), a save
    it makes then goes with the next write: the run never waits on itself. A few saves after, the copy is whole."""
    from orchestrator.restart.journal import Journal, RunState
    from tests.unit.test_journal_and_retry import journal

    cluster = FakeCluster.of(["a"])
    j = journal(tmp_path / "r1.json")
    j.set_state(RunState.RUNNING)
    j.copied_to(JournalCopy(cluster, j.run_id, "u"))  # type: ignore[arg-type]
    real_write = cluster.write_lock_document
    saves_inside: list[int] = []

    def write(index: str, doc_id: str, body: dict[str, Any]) -> None:
        if not saves_inside:
            saves_inside.append(1)
            j.set_paused("saved while the copy is written")
        real_write(index, doc_id, body)

    cluster.write_lock_document = write  # type: ignore[method-assign]
    done = threading.Thread(target=j.set_paused, args=("first",), daemon=True)
    done.start()
    done.join(10)
    assert not done.is_alive(), "the save returned"
    j.set_paused("next")
    copied = read_copy(cluster, "u")  # type: ignore[arg-type]
    assert copied is not None and Journal.from_raw(copied.raw, "copy").to_dict() == j.to_dict()


@pytest.mark.parametrize("damage", ["a line changed", "no line", "not a list"])
def test_a_log_document_of_several_lines_that_does_not_match_its_digest_is_refused(damage: str) -> None:
    import orchestrator.restart.journal_copy as journal_copy

    cluster = FakeCluster.of(["a"])
    kept = JournalCopy(cluster, "20261126T000000-abcdef", "u")  # type: ignore[arg-type]
    text = '{"format": 3, "run_id": "20261126T000000-abcdef", "seq": 1, "nodes": {}, "batches": [], "undo": []}'
    kept.queue(1, None, lambda: text)
    for seq in (2, 3, 4):
        kept.queue(seq, f'{{"seq": {seq}, "run": {{"message": "change {seq}"}}}}', lambda: "?")
    kept.flush(4)
    kept.saved(5, '{"seq": 5, "run": {"message": "change 5"}}', lambda: "?")
    read = read_copy(cluster, "u")  # type: ignore[arg-type]
    assert read is not None and read.seq == 5 and read.raw["message"] == "change 5", "three lines, one document"
    doc = cluster.locks[(LOCK_INDEX, f"journal-log-{2 % MIN_RING}")]
    doc["lines"] = {"a line changed": [doc["lines"][0], doc["lines"][0], doc["lines"][2]], "no line": [],
                    "not a list": "x"}[damage]
    if damage != "a line changed":  # its digest made to match: the shape alone is refused (no endless read)
        doc["digest"] = journal_copy.digest("\n".join(doc["lines"]))
    with pytest.raises(JournalError, match="damaged"):
        read_copy(cluster, "u")  # type: ignore[arg-type]


def test_a_process_whose_run_was_taken_over_stops_at_once_leaving_node_and_settings_to_the_new_holder() -> None:
    """Machine A's run, its lock taken over while its node is down (the lock's renewal says so: `hands_off`),
    brings nothing back and restores nothing: the node and the settings are machine B's run's now."""
    from orchestrator.config.model import NodeEntry
    from orchestrator.errors import Aborted
    from orchestrator.hosts.transport import CommandResult
    from tests.unit.test_engine import ORIGINAL, engine, fake, new_journal, state_dir

    with state_dir():
        inv, cluster = fake(["a", "b"])
        journal = new_journal(inv, cluster)
        eng = engine(inv, cluster, journal, [])
        real_run = eng.ctx.transport.run

        def run_then_taken_over(node: NodeEntry, command: str, timeout_s: float | None = None,
                                stdin: bytes | None = None) -> CommandResult:
            result = real_run(node, command, timeout_s, stdin)
            if "systemctl stop" in command and node.name == "a":
                eng.ctx.abort.request("its lock was taken over", hands_off=True)  # the node is down now
            return result

        eng.ctx.transport.run = run_then_taken_over  # type: ignore[method-assign]
        with pytest.raises(Aborted) as stopped:
            eng.run()
    said = ("stopped (its lock was taken over) at a safe point; nothing restored: another process goes on with the "
            "run, and its temporary settings are its own now")  # not "by the operator": nobody here asked it
    assert str(stopped.value) == journal.message == said, "and no next try of its own: the run is the other's"
    assert not cluster.nodes["a"].up and cluster.nodes["a"].starts == 0, "left down, for the new holder's resume"
    assert cluster.settings != ORIGINAL and cluster.settings[("cluster", LIMIT)] == "raised", "nothing restored"
    assert journal.state.value == "aborted"


def test_a_new_run_is_refused_over_another_machines_unfinished_run_until_taken_over_or_given_up(
        machines: dict[str, Any]) -> None:
    """Machine B, which never ran on this cluster, must not begin a new run over machine A's stopped one unseen:
    refused with both ways out; `abandon --take-over` gives A's run up from B (its settings put back, the copy
    says abandoned), then B's new run starts; A's own resume then says the run was finished elsewhere."""
    from typer.testing import CliRunner

    from orchestrator.cli.main import app

    cluster, config = machines["cluster"], str(machines["configs"] / f"{NAME}.yaml")
    machines["on"]("a")
    with pytest.raises(StoppedAfter):
        api.restart(NAME, stop_after=1)
    machines["on"]("b")
    with pytest.raises(PreflightFailed, match=r"last saved by .* is stopped and not finished: `orchestrate resume "
                                              r"--cluster prod --take-over` finishes it here"):
        api.restart(NAME)
    assert sum(starts(cluster).values()) == 1, "nothing begun"
    given_up = CliRunner().invoke(app, ["abandon", "--config", config, "--take-over", "--yes"])
    assert given_up.exit_code == 0, given_up.output
    copy_now = read_copy(cluster, cluster.uuid)
    assert copy_now is not None and copy_now.raw["state"] == "abandoned"
    assert api.restart(NAME).result == "succeeded"
    machines["on"]("a")
    with pytest.raises(JournalError, match=r"has run on this cluster since run .* out of date"):
        api.resume(NAME)
