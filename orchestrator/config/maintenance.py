"""Maintenance windows (issue 60): the agreed hours in which nodes may be taken away.

Pure, and below the engine: a schedule is read from text (the inventory's ``maintenance.windows``, ``--until``)
and answers, for a moment and a batch's estimated time, whether the batch fits before the window in force
closes, and when the next window opens. The engine asks before each batch (restart/engine.py); a batch that does not
fit is not begun, and the run stops as ``--stop-after`` stops it, every setting restored (errors.OutsideWindow).

A window is written as operators write them: ``Mon-Fri 22:00-06:00 Europe/Berlin``. Days: ``Mon``..``Sun``,
ranges (``Fri-Mon`` wraps) and lists (``Sat,Sun``), or ``daily``. Hours: ``HH:MM-HH:MM``; an end at or before
the start crosses midnight and belongs to the day it starts. The time zone is an IANA name (UTC if left out);
daylight saving is the zone's, so ``22:00`` stays 22:00 on the wall clock all year.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

FULL_DAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
SPEC = re.compile(r"^\s*(?P<days>[A-Za-z,\-*]+)\s+(?P<start>\d{1,2}:\d{2})\s*-\s*(?P<end>\d{1,2}:\d{2})"
                  r"(?:\s+(?P<zone>\S+))?\s*$")
LOOK_AHEAD_DAYS = 8  # a weekly schedule repeats within a week: one more day covers a window open across midnight


def parse_days(text: str) -> frozenset[int]:
    """``Mon-Fri``, ``Sat,Sun``, ``Fri-Mon``, ``daily`` or ``*``: the weekdays (Monday 0)."""
    if text.lower() in ("daily", "*"):
        return frozenset(range(7))
    days: set[int] = set()
    for part in text.split(","):
        ends = [day_of(e.lower(), part) for e in part.split("-")]
        if len(ends) > 2:
            raise ValueError(f"{part!r} is not a day or a range of days (Mon..Sun, e.g. Mon-Fri or Sat,Sun)")
        days.update((ends[0] + i) % 7 for i in range((ends[-1] - ends[0]) % 7 + 1))
    return frozenset(days)


def day_of(word: str, part: str) -> int:
    """Monday 0 from ``mon`` or ``monday`` (any case)."""
    index = next((i for i, day in enumerate(FULL_DAYS) if len(word) >= 3 and day.startswith(word)), None)
    if index is None:
        raise ValueError(f"{part!r} is not a day or a range of days (Mon..Sun, e.g. Mon-Fri or Sat,Sun)")
    return index


def parse_clock(text: str) -> time:
    hours, minutes = (int(p) for p in text.split(":"))
    if not (0 <= hours <= 24 and 0 <= minutes < 60) or (hours == 24 and minutes):
        raise ValueError(f"{text!r} is not a time of day (00:00..24:00)")
    return time(0, minutes) if hours == 24 else time(hours, minutes)


def zone_of(name: str | None) -> tzinfo:
    if not name or name.upper() == "UTC":
        return UTC
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ValueError(f"{name!r} is not a time zone (an IANA name such as Europe/Berlin)") from exc


@dataclass(frozen=True)
class Window:
    """One recurring window: on ``days``, from ``start`` to ``end`` in ``zone``'s wall-clock time."""

    text: str
    days: frozenset[int]
    start: time
    end: time
    zone: tzinfo

    @classmethod
    def parse(cls, text: str) -> Window:
        match = SPEC.match(text)
        if not match:
            raise ValueError(f"{text!r} is not a window: write it as DAYS HH:MM-HH:MM [ZONE], "
                             "e.g. 'Mon-Fri 22:00-06:00 Europe/Berlin'")
        start, end = parse_clock(match["start"]), parse_clock(match["end"])
        return cls(text.strip(), parse_days(match["days"]), start, end, zone_of(match["zone"]))

    def spans(self, around: datetime) -> Iterator[tuple[datetime, datetime]]:
        """The window's openings that start from the day before ``around`` to a week after, in order."""
        first = around.astimezone(self.zone).date() - timedelta(days=1)
        for offset in range(LOOK_AHEAD_DAYS + 1):
            day = first + timedelta(days=offset)
            if day.weekday() in self.days:
                yield self.span_on(day)

    def span_on(self, day: date) -> tuple[datetime, datetime]:
        opens = datetime.combine(day, self.start, self.zone)
        closes_on = day + timedelta(days=1) if self.end <= self.start else day
        return opens, datetime.combine(closes_on, self.end, self.zone)


@dataclass(frozen=True)
class Schedule:
    """The windows in force for a run (none: always open) and an end of its own (``--until``)."""

    windows: tuple[Window, ...] = ()
    until: datetime | None = None

    @classmethod
    def of(cls, windows: Sequence[str] = (), until: datetime | None = None) -> Schedule:
        return cls(tuple(Window.parse(w) for w in windows), until)

    @property
    def limited(self) -> bool:
        return bool(self.windows) or self.until is not None

    def spans(self, now: datetime) -> list[tuple[datetime, datetime]]:
        """Every opening near ``now``, merged where windows touch or overlap, and cut at ``until``."""
        if not self.windows:
            far = now + timedelta(days=LOOK_AHEAD_DAYS)
            raw = [(now - timedelta(days=1), far)]
        else:
            raw = sorted(span for window in self.windows for span in window.spans(now))
        merged: list[tuple[datetime, datetime]] = []
        for opens, closes in raw:
            if merged and opens <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(merged[-1][1], closes))
            else:
                merged.append((opens, closes))
        if self.until is not None:
            merged = [(o, min(c, self.until)) for o, c in merged if o < self.until]
        return merged

    def closes_at(self, now: datetime) -> datetime | None:
        """When the window open at ``now`` closes; None when none is open (or the schedule is unlimited)."""
        if not self.limited:
            return None
        return next((closes for opens, closes in self.spans(now) if opens <= now < closes), None)

    def is_open(self, now: datetime) -> bool:
        return not self.limited or self.closes_at(now) is not None

    def fits(self, now: datetime, needs_s: float) -> bool:
        """Whether work of ``needs_s`` seconds begun now ends before the window in force closes."""
        if not self.limited:
            return True
        closes = self.closes_at(now)
        return closes is not None and now + timedelta(seconds=needs_s) <= closes

    def next_opening(self, now: datetime, needs_s: float = 0.0) -> datetime | None:
        """The first moment after ``now`` at which work of ``needs_s`` seconds fits; None: no window ahead
        (``--until`` passed, or no opening within a week is long enough)."""
        for opens, closes in self.spans(now):
            begin = max(opens, now)
            if begin < closes and begin + timedelta(seconds=needs_s) <= closes and begin > now:
                return begin
        return None

    def describe(self) -> str:
        parts = [w.text for w in self.windows]
        if self.until is not None:
            parts.append(f"until {self.until.isoformat(timespec='minutes')}")
        return "; ".join(parts) or "always"


def parse_until(text: str, now: datetime) -> datetime:
    """``--until``: an ISO 8601 date and time (with an offset, else the machine's local time), or ``HH:MM``, the
    next such time on this machine's clock."""
    text = text.strip()
    if re.fullmatch(r"\d{1,2}:\d{2}", text):
        local = now.astimezone()
        at = datetime.combine(local.date(), parse_clock(text), local.tzinfo)
        return at if at > local else at + timedelta(days=1)
    try:
        at = datetime.fromisoformat(text)
    except ValueError as exc:
        raise ValueError(f"{text!r} is not a time: give HH:MM or an ISO 8601 time such as "
                         "2026-11-27T06:00+01:00") from exc
    return at if at.tzinfo is not None else at.astimezone()


def when(at: datetime, now: datetime) -> str:
    """A moment as an operator reads it: its wall-clock time and how far it is."""
    left = max(int((at - now).total_seconds()), 0)
    hours, minutes = divmod(left // 60, 60)
    far = f"{hours} h {minutes} min" if hours else f"{minutes} min" if minutes else f"{left} s"
    return f"{at.isoformat(timespec='minutes')} (in {far})"


def calendar_end(schedule: Schedule, now: datetime, durations: Sequence[float], at_once: int = 1) -> datetime | None:
    """When work of these batches (each of its ``durations``, ``at_once`` of them together) ends, each begun only
    where it fits a window; None when one of them fits no window ahead."""
    at = now
    for seconds in durations:
        if not schedule.fits(at, seconds):
            opens = schedule.next_opening(at, seconds)
            if opens is None:
                return None
            at = opens
        at += timedelta(seconds=seconds / max(at_once, 1))
    return at
