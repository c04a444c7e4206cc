"""The one way the orchestrator waits: poll a probe until it answers, over tenacity.

The clock and sleep are injectable so waits are tested without waiting. A probe returns
``None`` for "not yet" and may raise a *transient* error (the cluster is briefly unreachable
while its master restarts); the last thing seen is kept for the timeout message.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Generic, TypeVar

from tenacity import RetryCallState, Retrying, retry_if_result

from orchestrator.errors import ClusterUnreachable, HostUnreachable, IncompleteAnswer, WaitTimeout

T = TypeVar("T")
TRANSIENT: tuple[type[Exception], ...] = (ClusterUnreachable, HostUnreachable, IncompleteAnswer)


@dataclass
class Clock:
    monotonic: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    wall: Callable[[], datetime] = field(default=lambda: datetime.now(UTC))  # the calendar's time (windows)


@dataclass
class Seen(Generic[T]):
    """What the probe last reported, for the operator when the wait gives up."""

    text: str = "nothing yet"


def wait_until(probe: Callable[[Seen[T]], T | None], *, what: str, timeout_s: float, interval_s: float,
               clock: Clock | None = None, hint: str = "", resume: str = "",
               should_stop: Callable[[], bool] | None = None,
               on_miss: Callable[[str], None] | None = None, waited_before_s: float = 0.0) -> T:
    """Call ``probe`` until it returns a value; raise WaitTimeout naming what was awaited and seen.
    ``on_miss``: called (with what was seen) at each look that finds the wait not over; it may raise to
    leave the wait to someone else (a scheduler's trigger, restart/deferral.py);
    ``waited_before_s``: how long the wait went on before this call (said in the timeout's message); ``hint``:
    what to check, said with the timeout; ``resume``: what the run's next try does then (errors.py)."""
    clock = clock or Clock()
    seen: Seen[T] = Seen()
    start = clock.monotonic()

    began = start

    def attempt() -> T | None:
        nonlocal began
        began = clock.monotonic()
        try:
            result = probe(seen)
        except TRANSIENT as exc:
            seen.text = f"transient error: {exc}"
            result = None
        if result is None and on_miss is not None:
            on_miss(seen.text)
        return result

    def stop(state: RetryCallState) -> bool:
        return clock.monotonic() - start >= timeout_s or bool(should_stop and should_stop())

    def pace(state: RetryCallState) -> float:
        # Attempts begin at most once per interval: a probe that already waited (a server-side wait
        # that timed out) is tried again at once, not after a sleep in which its answer may come.
        return max(0.0, interval_s - (clock.monotonic() - began))

    retrying = Retrying(stop=stop, wait=pace, retry=retry_if_result(lambda r: r is None),
                        sleep=clock.sleep, retry_error_callback=lambda state: None, reraise=True)
    result = retrying(attempt)
    if result is None:
        if should_stop and should_stop():
            from orchestrator.errors import Aborted

            raise Aborted(f"stopped while waiting for {what}")
        waited_s = waited_before_s + timeout_s
        raise WaitTimeout(f"timed out after {waited_s:.0f} s waiting for {what}; last seen: {seen.text}"
                          + (f". {hint}" if hint else ""), resume=resume)
    return result


class _Worker:
    """A daemon thread that runs one piece of work at a time, then waits for the next (starting a thread per
    request cost a run of 3,000 nodes more CPU than its requests' deadlines are worth)."""

    def __init__(self) -> None:
        self.work: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        threading.Thread(target=self.serve, name="deadline", daemon=True).start()

    def serve(self) -> None:
        while True:
            self.work.get()()
            with _idle_lock:
                _idle.append(self)


_idle: list[_Worker] = []  # workers waiting for work; one late past its deadline joins again when it is done
_idle_lock = threading.Lock()


def within(seconds: float, work: Callable[[], T], late: str) -> T:
    """``work``'s result, or ClusterUnreachable(``late``) once ``seconds`` have passed (the worker is left
    to its socket timeouts: a daemon thread, it does not hold the command's exit)."""
    result: list[T] = []
    error: list[BaseException] = []
    done = threading.Event()

    def run() -> None:
        try:
            result.append(work())
        except BaseException as exc:  # handed to the caller's thread as it is
            error.append(exc)
        finally:
            done.set()

    with _idle_lock:
        worker = _idle.pop() if _idle else None
    (worker or _Worker()).work.put(run)
    if not done.wait(seconds):
        raise ClusterUnreachable(f"{late}: an answer arriving too slowly, or a server that is not the cluster")
    if error:
        raise error[0]
    return result[0]
