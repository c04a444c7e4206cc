"""What a run changed on a host: one record per knob (what it was, what it became), kept in the run's
journal, said in its events, and read back by `status` and the report. Made by the tuning, recorded by the
engine, which knows neither the other: the record is here, beneath both."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any


@dataclass(frozen=True)
class KnobValues:
    """A knob's value now (``live``) and what a reboot would give (``persisted``; None: nothing keeps one)."""

    live: str | None
    persisted: str | None

    def to_json(self) -> dict[str, str | None]:
        return {"live": self.live, "persisted": self.persisted}

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> KnobValues:
        return cls(live=optional_text(raw["live"]), persisted=optional_text(raw["persisted"]))


@dataclass(frozen=True)
class HostChange:
    """One knob fixed on a host: ``before`` and ``after`` (None: it could not be read again).
    ``not_persisted``: a reboot had reverted it (`restart --reboot`), and the run set it again."""

    knob: str
    before: KnobValues
    after: KnobValues | None
    not_persisted: bool = False

    def reverted_by_reboot(self) -> HostChange:
        return replace(self, not_persisted=True)

    def to_json(self) -> dict[str, Any]:
        return {"knob": self.knob, "before": self.before.to_json(),
                "after": None if self.after is None else self.after.to_json(),
                **({"not_persisted": True} if self.not_persisted else {})}

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> HostChange:
        """As a journal holds it; a wrong shape raises KeyError, TypeError or ValueError (a damaged journal)."""
        if not isinstance(raw["knob"], str) or not isinstance(raw.get("not_persisted", False), bool):
            raise ValueError("a host change's knob is not text, or its not_persisted not a flag")
        after = raw["after"]
        return cls(knob=raw["knob"], before=KnobValues.from_json(raw["before"]),
                   after=None if after is None else KnobValues.from_json(after),
                   not_persisted=raw.get("not_persisted", False))


def optional_text(value: object) -> str | None:
    if value is not None and not isinstance(value, str):
        raise ValueError(f"a knob's value is {type(value).__name__}, not text")
    return value
