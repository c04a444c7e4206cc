"""Watching handoffs drain: progress, what was handed off, and when a transfer has stalled. Pure.

A transfer is stalled when its progress (objects transferred, percent) has not changed for
`handoff_stall_s` of our own observation. Waiting partitions with no transfer running are
stalled too when their count has not gone down for that long (handoff disabled, a node that
refuses inbound handoff, a receiver that crashed).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from orchestrator.riak.status import ActiveTransfer, Transfers


@dataclass
class HandoffWatch:
    stall_s: float
    progress_at: dict[tuple[str, str, str, str], tuple[tuple[int | None, int | None], float]] = field(
        default_factory=dict)
    waiting_since: tuple[tuple[tuple[str, int], ...], float] | None = None
    seen: dict[str, set[str]] = field(default_factory=dict)  # target node -> partitions handed to it
    objects: dict[str, int] = field(default_factory=dict)  # target node -> objects handed to it (largest seen)

    def observe(self, transfers: Transfers, now: float) -> str | None:
        """Record one reading; return why the handoff is stalled, or None."""
        stalled: list[ActiveTransfer] = []
        current = {}
        for t in transfers.active:
            self.seen.setdefault(t.target, set()).add(t.partition)
            if t.objects is not None:
                key = f"{t.target}|{t.partition}|{t.source}"
                self.objects[key] = max(self.objects.get(key, 0), t.objects)
            before = self.progress_at.get(t.key)
            since = before[1] if before is not None and before[0] == t.progress else now
            current[t.key] = (t.progress, since)
            if now - since >= self.stall_s:
                stalled.append(t)
        self.progress_at = current
        if stalled:
            return "; ".join(
                f"{t.kind} handoff of partition {t.partition} ({t.vnode}) from {t.source} to {t.target} made no "
                f"progress for {self.stall_s:.0f} s (objects transferred: "
                f"{t.objects if t.objects is not None else 'unknown'}, {t.percent if t.percent is not None else '?'}%)"
                for t in stalled)
        waiting = tuple(sorted(transfers.waiting.items()))
        if not waiting or transfers.active:
            self.waiting_since = None
            return None
        if self.waiting_since is None or self.waiting_since[0] != waiting:
            self.waiting_since = (waiting, now)
            return None
        if now - self.waiting_since[1] >= self.stall_s:
            said = ", ".join(f"{node} ({count} partition(s))" for node, count in waiting)
            return (f"partitions wait to be handed off but no transfer has run for {self.stall_s:.0f} s: {said}. "
                    "Check `riak-admin handoff config` and the logs of these nodes")
        return None

    def handed_to(self, target: str) -> tuple[int, int]:
        """(partitions, objects) seen handed off to ``target``."""
        objects = sum(v for k, v in self.objects.items() if k.startswith(f"{target}|"))
        return len(self.seen.get(target, ())), objects
