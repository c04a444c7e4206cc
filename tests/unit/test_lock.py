"""The run lock: renewed while a run lives, stale when it stops renewing, kept when its run failed."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, ClassVar

import pytest
from hypothesis import given
from hypothesis import strategies as st

from orchestrator.errors import RunLocked
from orchestrator.restart.lock import (
    LOCK_INDEX,
    MAX_STALE_S,
    RUN_DOC,
    STALE_S,
    LockHolder,
    RunLock,
    clear_pause,
    pause_request,
    renew_deferred,
    request_pause,
    stale_after,
)
from orchestrator.testing.fake import FakeCluster


def test_a_held_lock_is_renewed_until_release_and_never_renewed_for_another_run() -> None:
    cluster = FakeCluster.of(["n1"])
    lock = RunLock(cluster, "c", "run-1")  # type: ignore[arg-type]
    lock.acquire()
    taken = cluster.read_lock(LOCK_INDEX, RUN_DOC)
    assert taken is not None and "renewed" not in taken
    lock.keep_renewed(interval_s=0.05)
    deadline = time.monotonic() + 5
    while "renewed" not in (cluster.read_lock(LOCK_INDEX, RUN_DOC) or {}) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert "renewed" in (cluster.read_lock(LOCK_INDEX, RUN_DOC) or {})
    lock.release()
    assert cluster.read_lock(LOCK_INDEX, RUN_DOC) is None
    assert cluster.renew_lock(LOCK_INDEX, RUN_DOC, "run-1", {"renewed": 1.0}) is False  # gone: nothing renewed
    RunLock(cluster, "c", "run-2").acquire()  # type: ignore[arg-type]
    assert cluster.renew_lock(LOCK_INDEX, RUN_DOC, "run-1", {"renewed": 1.0}) is False  # another run's
    assert "renewed" not in (cluster.read_lock(LOCK_INDEX, RUN_DOC) or {})


def holder(age_s: float, host: str = "elsewhere", **more: object) -> dict[str, object]:
    return {"run_id": "r1", "host": host, "pid": 1, "started": time.time() - age_s - 10,
            "renewed": time.time() - age_s, **more}


def is_stale(doc: dict[str, object]) -> bool:
    return LockHolder.from_document(doc).is_stale()


def describe(doc: dict[str, object]) -> str:
    return LockHolder.from_document(doc).describe()


def why_keep(doc: dict[str, object]) -> str | None:
    return LockHolder.from_document(doc).why_keep()


def test_stale_live_and_failed_locks_are_told_apart() -> None:
    assert not is_stale(holder(10)) and is_stale(holder(STALE_S + 5))
    assert "renewed 10 s ago" in describe(holder(10))
    assert "STALE: not renewed for" in describe(holder(STALE_S + 5))
    failed = holder(STALE_S + 5, state="failed")
    assert not is_stale(failed) and "FAILED and waits for `orchestrate resume`" in describe(failed)
    assert why_keep(holder(10)) is not None and "is alive" in str(why_keep(holder(10)))
    assert why_keep(holder(STALE_S + 5)) is None
    assert why_keep(holder(10, host=socket.gethostname(), pid=2 ** 22 + 7)) is None  # its process here is gone
    assert "GONE: its process no longer runs on this machine" in describe(holder(10, host=socket.gethostname(),
                                                                                 pid=2 ** 22 + 7))
    assert "waits for `orchestrate resume`" in str(why_keep(failed))


def test_resume_from_another_machine_takes_over_a_stale_or_failed_lock_not_a_live_one() -> None:
    for held, taken in ((holder(10), False), (holder(STALE_S + 5), True), (holder(10, state="failed"), True)):
        cluster = FakeCluster.of(["n1"])
        cluster.locks[(LOCK_INDEX, RUN_DOC)] = dict(held)
        lock = RunLock(cluster, "c", "r1")  # type: ignore[arg-type]
        if taken:
            lock.acquire(takeover=True)
            assert (cluster.read_lock(LOCK_INDEX, RUN_DOC) or {}).get("host") == socket.gethostname()
        else:
            with pytest.raises(RunLocked, match="still active"):
                lock.acquire(takeover=True)
        with pytest.raises(RunLocked, match="another run holds the lock"):
            RunLock(cluster, "c", "r2").acquire(takeover=True)  # type: ignore[arg-type]


def test_two_inventories_of_one_cluster_share_its_lock_and_no_name_reaches_another_document() -> None:
    cluster = FakeCluster.of(["n1"])
    RunLock(cluster, "prod", "run-1").acquire()  # type: ignore[arg-type]
    with pytest.raises(RunLocked, match="another run holds the lock of this cluster"):
        RunLock(cluster, "prod-eu", "run-2").acquire()  # type: ignore[arg-type]
    # A pause asked and cleared (`continue`) from an inventory named like another document never touches
    # the run's lock.
    assert request_pause(cluster, "maintenance")  # type: ignore[arg-type]
    assert pause_request(cluster) is not None  # type: ignore[arg-type]
    clear_pause(cluster)  # type: ignore[arg-type]
    assert pause_request(cluster) is None and (cluster.read_lock(LOCK_INDEX, RUN_DOC) or {}).get("run_id") == "run-1"


odd = st.one_of(st.none(), st.booleans(), st.integers(min_value=-2**70, max_value=2**70), st.floats(),
                st.text(max_size=20), st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=3),
                                                                                         st.integers(), max_size=2))


@given(started=odd, renewed=odd, pid=odd, run_id=odd, host=odd, state=odd)
def test_a_forged_or_damaged_lock_document_never_crashes_and_never_sticks(started: Any, renewed: Any, pid: Any,
                                                                           run_id: Any, host: Any, state: Any) -> None:
    doc = {"started": started, "renewed": renewed, "pid": pid, "run_id": run_id, "host": host, "state": state}
    held = LockHolder.from_document(doc)
    said = held.describe()
    assert said.isprintable() and len(said) < 1000
    held.why_keep()
    # A lock whose only times are unbelievable (not numbers, or far ahead of this clock) is stale, not live
    # for ever: `unlock` removes it and a resume takes it over.
    believable = [t for t in (renewed, started) if isinstance(t, int | float) and not isinstance(t, bool)
                  and 0 <= t < time.time() + 3600]
    if not believable and not held.failed:
        assert held.is_stale() and held.why_keep() is None
    cluster = FakeCluster.of(["n1"])
    cluster.locks[(LOCK_INDEX, RUN_DOC)] = doc
    try:
        RunLock(cluster, "c", "r-new").acquire()  # type: ignore[arg-type]
    except RunLocked as exc:
        assert "another run holds the lock" in str(exc)


def test_a_lock_renewed_far_in_the_future_is_stale_not_live_for_ever() -> None:
    doc = holder(0, renewed=time.time() + 10 * 365 * 86400, started=time.time() + 10 * 365 * 86400)
    assert is_stale(doc) and why_keep(doc) is None and "no believable time" in describe(doc)


def test_of_runs_taking_the_lock_at_the_same_moment_from_separate_machines_exactly_one_proceeds() -> None:
    """The lock is one create of a document in the cluster (`_create`: 409 when it exists), so it holds across
    machines: eight runs with adapters of their own, released together against the fake Elasticsearch
    through the real client, and one takes it."""
    import threading

    from orchestrator.errors import RunLocked
    from orchestrator.es.connect import ElasticsearchRest
    from orchestrator.restart.lock import RunLock
    from orchestrator.shards.adapter import ShardClusterAdapter
    from orchestrator.shards.connection import Connection
    from orchestrator.testing.fake_es.model import FakeCluster
    from orchestrator.testing.fake_es.server import FakeEsServer

    with FakeEsServer(FakeCluster.generate(3, copies_per_node=2)) as server:
        start = threading.Barrier(8)
        outcomes: list[str] = []

        def run(n: int) -> None:
            lock = RunLock(ShardClusterAdapter(ElasticsearchRest(Connection((server.url,)))), "c", f"run-{n}")
            start.wait(timeout=10)
            try:
                lock.acquire()
                outcomes.append("took it")
            except RunLocked:
                outcomes.append("refused")

        threads = [threading.Thread(target=run, args=(n,)) for n in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert sorted(outcomes) == ["refused"] * 7 + ["took it"]
        assert server.counts.as_json()["requests"]["PUT /{index}/_create/{id}"] == 8


def test_a_renewal_that_finds_the_lock_changed_since_it_read_it_writes_nothing() -> None:
    """Compare and set: the renewal writes only if the lock is as it read it (`if_seq_no`); a takeover
    between its read and its write (here, as the read is answered) makes it give the lock up, not overwrite."""
    from orchestrator.es.connect import ElasticsearchRest
    from orchestrator.restart.lock import LOCK_INDEX, RUN_DOC
    from orchestrator.shards.adapter import ShardClusterAdapter
    from orchestrator.shards.connection import Connection
    from orchestrator.testing.fake_es.model import FakeCluster, LockDoc
    from orchestrator.testing.fake_es.server import FakeEsServer

    cluster = FakeCluster.generate(3, copies_per_node=2)
    with FakeEsServer(cluster) as server:
        adapter = ShardClusterAdapter(ElasticsearchRest(Connection((server.url,))))
        assert adapter.create_lock(LOCK_INDEX, RUN_DOC, {"run_id": "mine", "renewed": 1})
        assert adapter.renew_lock(LOCK_INDEX, RUN_DOC, "mine", {"renewed": 2})
        assert adapter.read_lock(LOCK_INDEX, RUN_DOC) == {"run_id": "mine", "renewed": 2}

        def taken_over_as_read(c: FakeCluster) -> None:
            c.seq_no += 1
            c.docs[(LOCK_INDEX, RUN_DOC)] = LockDoc({"run_id": "theirs", "renewed": 3}, c.seq_no)

        server.tamper["GET /{index}/_doc/{id}"] = taken_over_as_read  # answered as it was, changed just after
        assert not adapter.renew_lock(LOCK_INDEX, RUN_DOC, "mine", {"renewed": 4})
        server.tamper.clear()
        assert adapter.read_lock(LOCK_INDEX, RUN_DOC) == {"run_id": "theirs", "renewed": 3}, "nothing overwritten"
        assert not adapter.renew_lock(LOCK_INDEX, RUN_DOC, "mine", {"renewed": 5}), "and it is no longer its lock"


def test_a_deferred_lock_is_kept_while_its_trigger_renews_it_and_removable_once_stale() -> None:
    fresh, stale = holder(10, state="deferred"), holder(STALE_S + 5, state="deferred")
    assert str(why_keep(fresh)).startswith("run r1 is deferred: a scheduler's trigger watches it and renewed its "
                                           "lock 10 s ago")
    assert why_keep(stale) is None and "DEFERRED" in describe(fresh) and "STALE" in describe(stale)
    assert why_keep(holder(STALE_S + 5, state="failed")) == (
        "run r1 failed and waits for `orchestrate resume` with its temporary settings in force; removing its lock "
        "lets another run start over them")


@pytest.mark.parametrize(("state", "said"), [(None, "running"), ("deferred", "deferred"), ("failed", "failed")])
def test_the_lock_as_status_json_says_each_field_by_name(state: str | None, said: str) -> None:
    doc = holder(STALE_S + 5, **({"state": state} if state else {}))
    shown = LockHolder.from_document(doc).as_json()
    assert shown == {"run_id": "r1", "host": "elsewhere", "pid": 1, "started": doc["started"],
                     "renewed": doc["renewed"], "state": said, "stale": state != "failed", "gone": False,
                     "stale_after_s": STALE_S}


def test_a_run_whose_lock_was_taken_over_releases_nothing_of_the_new_holders() -> None:
    cluster = FakeCluster.of(["n1"])
    lock = RunLock(cluster, "c", "run-1")  # type: ignore[arg-type]
    lock.acquire()
    cluster.delete_lock(LOCK_INDEX, RUN_DOC)  # an operator's `unlock --force`, then another run
    RunLock(cluster, "c", "run-2").acquire()  # type: ignore[arg-type]
    lock.release()
    assert (cluster.read_lock(LOCK_INDEX, RUN_DOC) or {}).get("run_id") == "run-2" and lock.held is False


def test_a_failed_runs_lock_says_so_with_its_last_sign_of_life() -> None:
    cluster = FakeCluster.of(["n1"])
    lock = RunLock(cluster, "c", "run-1")  # type: ignore[arg-type]
    lock.acquire()
    before = time.time()
    lock.mark_failed()
    doc = cluster.read_lock(LOCK_INDEX, RUN_DOC) or {}
    assert doc.get("state") == "failed" and float(doc.get("renewed", 0)) >= before
    assert LockHolder.from_document(doc).failed


def test_only_the_deferred_runs_own_lock_is_renewed_by_its_trigger() -> None:
    cluster = FakeCluster.of(["n1"])
    RunLock(cluster, "c", "run-1").acquire()  # type: ignore[arg-type]
    assert not renew_deferred(cluster, "run-1"), "a running run's lock is the run's to renew, not a trigger's"
    assert not renew_deferred(cluster, "run-2", marking=True), "another run's lock"
    before = time.time()
    assert renew_deferred(cluster, "run-1", marking=True)  # the run itself, deferring
    doc = cluster.read_lock(LOCK_INDEX, RUN_DOC) or {}
    assert doc.get("state") == "deferred" and float(doc.get("renewed", 0)) >= before
    assert renew_deferred(cluster, "run-1") and not renew_deferred(cluster, "run-2")
    cluster.delete_lock(LOCK_INDEX, RUN_DOC)
    assert not renew_deferred(cluster, "run-1"), "taken back, or removed"


def test_a_pause_request_says_why_who_and_when() -> None:
    cluster = FakeCluster.of(["n1"])
    before = time.time()
    assert request_pause(cluster, "check the canary")  # type: ignore[arg-type]
    asked = pause_request(cluster) or {}  # type: ignore[arg-type]
    assert asked["reason"] == "check the canary" and asked["host"] == socket.gethostname()
    assert asked["pid"] == os.getpid() and float(asked["started"]) >= before
    assert not request_pause(cluster, "again"), "already asked"  # type: ignore[arg-type]


class RefusingRenewals(FakeCluster):
    """A cluster where each renewal fails (returns False, or raises every other time), counting them."""

    renewals = 0

    def renew_lock(self, index: str, doc_id: str, run_id: str, fields: dict[str, Any]) -> bool:
        self.renewals += 1
        if self.renewals % 2:
            raise OSError("connection reset")
        return False


def test_failed_renewals_are_told_as_they_happen_and_stop_the_run_before_its_lock_could_go_stale() -> None:
    """A run whose renewals keep failing used to say nothing until its lock went stale and another run could take
    it. Each failure is now a warning; past RENEWAL_TROUBLE_S without a renewal the run is asked to stop at its next
    safe point (`resume` goes on); `status` says the renewals are failing; the renewer stops with the run."""
    from orchestrator.restart.context import AbortFlag
    from orchestrator.restart.events import Event
    from orchestrator.restart.lock import RENEW_S, RENEWAL_TROUBLE_S, LockHolder
    from orchestrator.runs.restart import lock_trouble

    cluster = RefusingRenewals.of(["n1"])
    lock = RunLock(cluster, "c", "run-1")  # type: ignore[arg-type]
    lock.acquire()
    events: list[Event] = []
    abort = AbortFlag()
    now = [0.0]

    def clock() -> float:
        now[0] += RENEWAL_TROUBLE_S / 3  # each look, as if a third of the allowed time had passed
        return now[0]

    lock.keep_renewed(interval_s=0.01, trouble=lock_trouble(events.append, abort, lock), clock=clock)
    deadline = time.monotonic() + 5
    while not abort.requested and time.monotonic() < deadline:
        time.sleep(0.01)
    lock.stop_renewing()
    assert abort.requested and "could not be renewed" in abort.reason
    said = [e for e in events if e.kind == "warning"]
    assert said and "the run's lock could not be renewed (OSError: connection reset)" in said[0].message
    assert said[0].data["lock_renewal"] == "failing" and said[-1].data["lock_renewal"] == "stopping"
    asked = cluster.renewals
    time.sleep(0.05)
    assert cluster.renewals == asked, "no renewal after the renewer was stopped"
    quiet = LockHolder.from_document({"run_id": "r", "host": "h", "pid": 1, "started": time.time() - 600,
                                      "renewed": time.time() - 3 * RENEW_S})
    assert "RENEWALS FAILING: last renewed 90 s ago" in quiet.describe()


class ScriptedRenewals(FakeCluster):
    """A cluster whose renewals answer as scripted: True renews, False says the document is no longer this run's;
    after the script, each renewal stops the renewer (the test has seen all it needs)."""

    script: ClassVar[list[bool]] = []
    lock: ClassVar[RunLock | None] = None

    def renew_lock(self, index: str, doc_id: str, run_id: str, fields: dict[str, Any]) -> bool:
        if not self.script:
            assert self.lock is not None
            self.lock._stop.set()
            return True
        return self.script.pop(0)


def test_the_renewer_asks_the_run_to_stop_at_half_the_stale_time_and_says_once_when_renewals_work_again() -> None:
    """Each failed renewal is told with its reason and how long the lock has gone unrenewed; the run is asked to
    stop once that reaches half the stale time (before another machine may take the lock as stale), not before; a
    renewal that works after failures says so once, with their count, and the count starts again."""
    cluster = ScriptedRenewals.of(["n1"])
    cluster.script = [False, False, False, True, True, False, True]
    lock = RunLock(cluster, "c", "run-1", stale_s=60)  # type: ignore[arg-type]
    cluster.lock = lock
    lock.acquire()
    now = [0.0]

    def clock() -> float:
        now[0] += 10  # each look of the renewer's, ten seconds on
        return now[0]

    told: list[tuple[str, bool]] = []
    lock.keep_renewed(interval_s=0.001, trouble=lambda said, stop: told.append((said, stop)), clock=clock)
    assert lock._renewer is not None
    lock._renewer.join(5)
    assert not lock._renewer.is_alive()
    failed = "the run's lock could not be renewed (the lock document is no longer this run's); not renewed for "
    then = ": the run stops at a safe point after 30 s, before another run could take the lock as stale (60 s)"
    assert told == [(failed + "10 s" + then, False), (failed + "20 s" + then, False), (failed + "30 s" + then, True),
                    ("the run's lock is renewed again, after 3 failed renewals", False),
                    (failed + "10 s" + then, False),
                    ("the run's lock is renewed again, after 1 failed renewal", False)]


def test_without_an_interval_the_lock_is_renewed_at_a_tenth_of_its_stale_time() -> None:
    cluster = FakeCluster.of(["n1"])
    lock = RunLock(cluster, "c", "run-1", stale_s=30)  # type: ignore[arg-type]  # the shortest: renewed every 3 s
    lock.acquire()
    lock.keep_renewed()
    deadline = time.monotonic() + 10
    while "renewed" not in (cluster.read_lock(LOCK_INDEX, RUN_DOC) or {}) and time.monotonic() < deadline:
        time.sleep(0.05)
    lock.release()
    assert time.monotonic() < deadline, "not renewed within 10 s"


def test_stopping_the_renewer_twice_is_harmless() -> None:
    cluster = FakeCluster.of(["n1"])
    lock = RunLock(cluster, "c", "run-1")  # type: ignore[arg-type]
    lock.acquire()
    lock.keep_renewed(interval_s=0.01)
    lock.stop_renewing()
    lock.stop_renewing()  # mark_failed, then the run's own end, say
    lock.release()
    assert cluster.read_lock(LOCK_INDEX, RUN_DOC) is None


def test_a_process_whose_run_another_machine_took_over_stops_and_changes_nothing_of_the_new_holders() -> None:
    """Never two at once, within one run: machine A's process, cut off long enough for machine B to take its run
    over (`resume --take-over`), wakes up. Its next renewal sees the lock is B's taking of it: it says so and asks
    its run to stop at once; it renews, marks, releases and copies nothing of B's."""
    from orchestrator.restart.journal_copy import BASE_DOC, JournalCopy

    cluster = FakeCluster.of(["n1"])
    run_id = "20261126T000000-abcdef"
    a = RunLock(cluster, "c", run_id, stale_s=30)  # type: ignore[arg-type]
    a.acquire()
    cluster.locks[(LOCK_INDEX, RUN_DOC)].update(host="machine-a", renewed=time.time() - 60)  # silent past 30 s
    b = RunLock(cluster, "c", run_id, stale_s=30)  # type: ignore[arg-type]
    b.acquire(takeover=True)  # machine B's resume --take-over
    taken = dict(cluster.locks[(LOCK_INDEX, RUN_DOC)])
    told: list[tuple[str, bool]] = []
    a.keep_renewed(interval_s=0.02, trouble=lambda said, stop: told.append((said, stop)))
    deadline = time.monotonic() + 5
    while not told and time.monotonic() < deadline:
        time.sleep(0.02)
    assert told and told[0][1] and "was taken over" in told[0][0], told
    assert told[0][0].endswith("): this process stops at its next safe point"), told
    assert a.lost and not a.still_held() and b.still_held()
    copy = JournalCopy(cluster, run_id, "u", still_held=a.still_held)  # type: ignore[arg-type]
    copy.saved(7, None, lambda: "{}")
    a.mark_failed()
    a.release()
    assert cluster.locks[(LOCK_INDEX, RUN_DOC)] == taken, "B's lock as B took it: not renewed, marked or removed by A"
    assert (LOCK_INDEX, BASE_DOC) not in cluster.locks and copy.behind, "A copies nothing over B's journal"


NOW = 1_000_000_000.0  # far from this machine's clock: a description must use the time it is given


@pytest.mark.parametrize(("doc", "said"), [
    ({"renewed": NOW}, "run r1 on elsewhere (pid 4242) since 2001-09-09 01:45:00 UTC, renewed 0 s ago"),
    ({"renewed": NOW - 10}, "run r1 on elsewhere (pid 4242) since 2001-09-09 01:45:00 UTC, renewed 10 s ago"),
    ({"renewed": NOW - 60}, "run r1 on elsewhere (pid 4242) since 2001-09-09 01:45:00 UTC, renewed 60 s ago"),
    ({"renewed": NOW - 61}, "run r1 on elsewhere (pid 4242) since 2001-09-09 01:45:00 UTC, RENEWALS FAILING: last "
     "renewed 61 s ago (a live run renews every 30 s; it stops at a safe point after 150 s, and the lock is stale "
     "after 300 s)"),
    ({"renewed": NOW - 301}, "run r1 on elsewhere (pid 4242) since 2001-09-09 01:45:00 UTC, STALE: not renewed for "
     "301 s (a live run renews every 30 s)"),
    ({"renewed": NOW - 300}, "run r1 on elsewhere (pid 4242) since 2001-09-09 01:45:00 UTC, RENEWALS FAILING: last "
     "renewed 300 s ago (a live run renews every 30 s; it stops at a safe point after 150 s, and the lock is stale "
     "after 300 s)"),
    ({"renewed": NOW - 700, "state": "failed"}, "run r1 on elsewhere (pid 4242) since 2001-09-09 01:45:00 UTC, the "
     "run FAILED and waits for `orchestrate resume` (its temporary settings are still in force)"),
    ({"renewed": NOW - 20, "state": "deferred"}, "run r1 on elsewhere (pid 4242) since 2001-09-09 01:45:00 UTC, "
     "DEFERRED: the run waits in a scheduler's trigger, which renewed the lock 20 s ago; the run resumes from its "
     "journal when the wait is over"),
    ({"renewed": None, "started": None, "pid": None}, "run r1 on elsewhere (pid ?) since an unknown time, STALE: the "
     "lock shows no believable time of renewal (damaged or forged)"),
])
def test_what_an_operator_reads_of_a_lock_in_each_state(doc: dict[str, object], said: str) -> None:
    """The whole sentence a refused run, `status` and `unlock` print of a holder: who, since when, and its state
    with what comes next, at the moment it is given (at the edges: renewed two renewals ago is not yet failing,
    and at its stale time not yet stale)."""
    held = LockHolder.from_document({"run_id": "r1", "host": "elsewhere", "pid": 4242, "started": NOW - 100, **doc})
    assert held.describe(now=NOW) == said


@contextmanager
def live_child() -> Iterator[subprocess.Popen[bytes]]:
    """A live process of this machine that this test started (never one it did not), its signals the defaults (a
    shell started with nohup leaves SIGHUP ignored in its children); ended and reaped on leaving."""
    def signals_as_default() -> None:
        for sig in (signal.SIGHUP, signal.SIGINT, signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2):
            signal.signal(sig, signal.SIG_DFL)

    child = subprocess.Popen(["sleep", "30"], preexec_fn=signals_as_default)
    try:
        yield child
    finally:
        child.kill()
        child.wait(10)


def test_a_gone_process_of_this_machine_is_said_gone_and_a_live_one_is_left_alive() -> None:
    """`alive_here` asks the kernel with signal 0: a child of this test, alive, stays alive and is judged alive;
    once it has ended its lock is GONE, `resume` takes it over; a lock of this machine without a pid is a dead one."""
    with live_child() as child:
        doc = {"run_id": "r1", "host": socket.gethostname(), "pid": child.pid, "started": NOW - 100,
               "renewed": NOW - 10}
        assert LockHolder.from_document(doc).alive_here() and not LockHolder.from_document(doc).gone_here()
        with pytest.raises(subprocess.TimeoutExpired):  # asking must not signal the process
            child.wait(timeout=0.3)
    gone = LockHolder.from_document(doc)
    assert not gone.alive_here() and gone.may_be_taken_over()
    assert gone.describe(now=NOW).endswith(", GONE: its process no longer runs on this machine (killed, or the "
                                           "machine restarted); `orchestrate resume` continues the run")
    assert not LockHolder.from_document({**doc, "pid": None}).alive_here()


def test_a_taken_lock_says_its_process_and_when_and_only_a_resume_takes_a_run_s_lock_back() -> None:
    """The document says who took the lock (this process) and when. A plain start of the same run is refused even
    when its holder is dead; a resume (takeover) takes a dead holder's lock and this process's own, never a live
    other process's of this machine."""
    cluster = FakeCluster.of(["n1"])
    before = time.time()
    RunLock(cluster, "c", "r1").acquire()  # type: ignore[arg-type]
    doc = cluster.read_lock(LOCK_INDEX, RUN_DOC)
    assert doc is not None and doc["pid"] == os.getpid() and before <= doc["started"] <= time.time()
    with pytest.raises(RunLocked, match="this run is still active"):
        RunLock(cluster, "c", "r1").acquire()  # type: ignore[arg-type]  # its own process's: a resume's to take
    RunLock(cluster, "c", "r1").acquire(takeover=True)  # type: ignore[arg-type]
    with live_child() as other:  # a live process of this machine, not this one
        cluster.locks[(LOCK_INDEX, RUN_DOC)].update(pid=other.pid)
        with pytest.raises(RunLocked, match="this run is still active"):
            RunLock(cluster, "c", "r1").acquire(takeover=True)  # type: ignore[arg-type]
    cluster.locks[(LOCK_INDEX, RUN_DOC)].update(pid=None)  # a holder of this machine with no process: dead
    with pytest.raises(RunLocked, match="this run is still active"):
        RunLock(cluster, "c", "r1").acquire()  # type: ignore[arg-type]
    RunLock(cluster, "c", "r1").acquire(takeover=True)  # type: ignore[arg-type]


def test_a_process_that_has_not_noticed_a_take_over_releases_and_marks_nothing_of_the_new_holder_s() -> None:
    """Machine A's run, taken over by B's resume before A's renewer looked: A's release and its mark of failure or
    deferral read the lock first and leave B's as it is."""
    cluster = FakeCluster.of(["n1"])
    run_id = "20261126T000000-abcdef"
    a = RunLock(cluster, "c", run_id, stale_s=30)  # type: ignore[arg-type]
    a.acquire()
    cluster.locks[(LOCK_INDEX, RUN_DOC)].update(host="machine-a", renewed=time.time() - 60)
    RunLock(cluster, "c", run_id, stale_s=30).acquire(takeover=True)  # type: ignore[arg-type]
    taken = dict(cluster.locks[(LOCK_INDEX, RUN_DOC)])
    a.mark_failed()
    a.mark_deferred()
    a.release()
    assert cluster.locks[(LOCK_INDEX, RUN_DOC)] == taken and a.lost
    own = RunLock(cluster, "c", "another-run")  # type: ignore[arg-type]
    cluster.locks.clear()
    own.acquire()
    own.mark_failed()
    assert cluster.read_lock(LOCK_INDEX, RUN_DOC)["state"] == "failed" and not own.lost  # type: ignore[index]


def test_a_live_process_of_another_user_on_this_machine_is_alive_not_gone(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two operators of one machine: the second one's process may not signal the first one's, and the kernel says
    so (EPERM, as it says to an unprivileged user asking of root's init here); that process lives, so its lock is
    neither GONE nor taken over by a resume."""
    def not_permitted(pid: int, sig: int) -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "kill", not_permitted)
    held = LockHolder.from_document({"run_id": "r1", "host": socket.gethostname(), "pid": 4242, "started": NOW,
                                     "renewed": NOW})
    assert held.alive_here() and not held.gone_here()


def test_a_forged_lock_s_fields_are_bounded_and_never_crash_the_look_at_its_process() -> None:
    """Text is printable and bounded (a host name up to DNS's longest is kept whole); a pid is one the kernel can
    have (1 to 2**31 - 1): 0 would signal this process's own group, and a larger one crashes `os.kill`."""
    forged = LockHolder.from_document({"run_id": None, "host": "es-\x1b[2J" + "h" * 240, "pid": 0})
    assert forged.run_id == "?" and forged.host == "es-?[2J" + "h" * 240 and forged.pid is None
    assert LockHolder.from_document({"host": "h" * 1000}).host == "h" * 255
    for pid in (-1, 2**31, 3**31, 2**32):
        held = LockHolder.from_document({"run_id": "r1", "host": socket.gethostname(), "pid": pid})
        assert held.pid is None and held.alive_here() is False
    assert LockHolder.from_document({"pid": 2**31 - 1}).pid == 2**31 - 1
    assert stale_after(MAX_STALE_S) == MAX_STALE_S and stale_after(MAX_STALE_S + 1) == STALE_S


def test_a_lock_never_taken_releases_nothing_and_a_refusal_names_the_cluster_to_unlock() -> None:
    cluster = FakeCluster.of(["n1"])
    RunLock(cluster, "prod", "r1").acquire()  # type: ignore[arg-type]
    RunLock(cluster, "prod", "r1").release()  # type: ignore[arg-type]  # another process of r1 that took nothing
    assert cluster.read_lock(LOCK_INDEX, RUN_DOC) is not None
    with pytest.raises(RunLocked, match="`orchestrate unlock --cluster prod` removes the lock once it is stale"):
        RunLock(cluster, "prod", "r2").acquire()  # type: ignore[arg-type]
