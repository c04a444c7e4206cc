"""The window's budget (issue 57), as the engine runs it: how many nodes may be away at once, and the ramp
that opens the window 1, 2, 4, ... up to it. Pure; it knows no product (each product proves who may join)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from orchestrator.errors import ConfigError

BUDGET = re.compile(r"([1-9][0-9]{0,5})(%?)")


@dataclass(frozen=True)
class Budget:
    """At most ``count`` nodes (or ``percent`` % of the nodes in play, at least 1) away or not yet recovered."""

    count: int = 1
    percent: bool = False

    @classmethod
    def parse(cls, text: str, where: str = "--max-unavailable") -> Budget:
        found = BUDGET.fullmatch(text.strip())
        if not found or (found[2] and int(found[1]) > 100):
            raise ConfigError(where, [f"{text[:40]!r}: give a number of nodes (4) or a percentage of them (5%)"])
        return cls(int(found[1]), bool(found[2]))

    def nodes(self, in_play: int) -> int:
        """How many nodes may be away at once, of ``in_play``."""
        return max(1, in_play * self.count // 100) if self.percent else max(1, min(self.count, in_play))

    def __str__(self) -> str:
        return f"{self.count}%" if self.percent else str(self.count)


def window_asked(budget: str) -> bool:
    """Whether a run's recorded budget asks for a window (its procedure and its engine loop), not one at a time."""
    return bool(budget) and budget.strip() != "1"


def room_of(budget: str, in_play: int) -> int:
    """The most nodes a run records as its budget (``RunOptions.max_unavailable``, "" for one) lets away."""
    return Budget.parse(budget).nodes(in_play) if budget else 1


def ramp(room: int, left_clean: int) -> int:
    """How many nodes the window may hold once ``left_clean`` nodes have left it clean: 1, then 2 after the
    first, 4 after the first three, 8 after seven, ... never more than ``room``. A bad node (one that does not
    come back, or whose copies do not recover) is met with one node away, not with the whole budget."""
    opened = 1
    while opened * 2 <= left_clean + 1:
        opened *= 2
    return min(room, opened)
