"""Whether a batch may begin now under the run's maintenance windows (config/maintenance.py): pure, over the
schedule, the calendar's time and the batch's estimated time. A batch is begun only if it should end before
the window in force closes; the one that would not is where the run stops (errors.OutsideWindow)."""

from __future__ import annotations

from datetime import datetime

from orchestrator.config.maintenance import Schedule, when
from orchestrator.errors import OutsideWindow
from orchestrator.restart.journal import BatchRecord
from orchestrator.units import human_duration


def outside_window(schedule: Schedule, now: datetime, needs_s: float, batch: BatchRecord) -> OutsideWindow | None:
    """None when ``batch`` (of ``needs_s`` seconds) fits the window open ``now``; else why not, and when the next
    window it fits opens."""
    if schedule.fits(now, needs_s):
        return None
    closes = schedule.closes_at(now)
    opens = schedule.next_opening(now, needs_s)
    why = ("outside the maintenance windows" if closes is None else f"about {human_duration(needs_s)} would end "
           f"after the window closes at {closes.isoformat(timespec='minutes')}")
    then = f"the next window it fits opens {when(opens, now)}" if opens else "no window ahead fits it"
    return OutsideWindow(f"batch {batch.number} ({batch.label}) not begun: {why} ({schedule.describe()}); {then}",
                         opens)
