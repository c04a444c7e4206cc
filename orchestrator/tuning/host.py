"""A host as the knobs see it: the I/O side of host tuning.

``gather`` runs the knobs' evaluations over what the host said, fetching whatever they found
missing in one SSH round trip per pass (a few passes: a file listing, then the files), until an
evaluation needs nothing more. The knobs themselves never touch the host (tuning/reads.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from orchestrator.config.model import NodeEntry
from orchestrator.errors import HostError
from orchestrator.hosts.batch import run_batch
from orchestrator.hosts.transport import CommandResult, Transport
from orchestrator.tuning.reads import Reads

T = TypeVar("T")
MAX_PASSES = 8  # a tuned profile's include chain is followed at most 5 deep


@dataclass
class Host:
    transport: Transport
    node: NodeEntry
    cache: dict[str, CommandResult] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.node.name

    def prefetch(self, commands: list[str]) -> None:
        """Run the read-only ``commands`` not seen yet in one round trip; later reads use their results."""
        todo = list(dict.fromkeys(c for c in commands if c not in self.cache))
        if not todo:
            return
        results = run_batch(self.transport, self.node, todo) if len(todo) > 1 else None
        if results is None:  # one command, or a host that cannot batch: one at a time
            results = [self.transport.run(self.node, c) for c in todo]
        self.cache.update(zip(todo, results, strict=True))

    def gather(self, evaluate: Callable[[Reads], T], first: list[str] | None = None) -> T:
        """``evaluate`` over everything it reads, fetched in as few round trips as it allows."""
        self.prefetch(first or [])
        for _ in range(MAX_PASSES):
            reads = Reads(self.cache)
            outcome = evaluate(reads)
            if not reads.missing:
                return outcome
            self.prefetch(reads.missing)
        raise HostError(f"{self.node.name}: host tuning kept asking for more reads after {MAX_PASSES} passes")
