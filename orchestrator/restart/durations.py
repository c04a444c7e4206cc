"""How long a node took to restart last time, read from its own log, for a first plan's estimate.

Before a cluster has had a run of its own (whose journal says how long its batches took), the plan
estimated every batch with fixed figures (EST_STOP_S, EST_START_TO_JOIN_S), several times what a small
cluster's restart took (docs/benchmarks.md, `bench_restart`). Each node's log says better: Elasticsearch and
OpenSearch log `stopping ...`, `closed` when a node stops, and a new process's first line
(`version[...]`) then `starting ...` (its modules loaded) and `started` (once it has joined its cluster)
when it starts. Pure: the log lines in, seconds out.

Nodes started together on hosts of one kernel (containers of one machine, as the sandbox's) shared its
CPUs while they loaded: JVMs loading at once on a few cores each took longer than one alone, and a
rolling restart starts one at a time. Such a start's loading is counted at the share
of the machine it had (`shared_cpu_starts`): alone, all of its time; with two others, a third.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass, replace
from datetime import datetime
from itertools import pairwise

from orchestrator.restart.plan import EST_START_TO_JOIN_S, EST_STOP_S, Plan

# `[2026-11-24T19:39:05,857][INFO ][o.e.n.Node               ] [es-1] started ...`; a node process's first
# line is `version[9.5.3], pid[535], ...` (most of a start is before `starting ...`: loading its modules).
LINE = re.compile(r"^\[(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)[,.](\d{3})[^\]]*\]\[[A-Z]+ *\]\[[^\]]*\] ?\[[^\]]*\] "
                  r"(version\[|starting \.\.\.|started|stopping \.\.\.|closed)(?:\S*)(?:\s|$)")
LAUNCH_S = 1.0  # the JVM and its launcher, before the node's first line
# A graceful stop, for a node whose log shows none yet (the next plan reads the real one): a node stops
# right after the run's flush, with nothing left to write (the nodes' own logs say how long: bench_restart).
UNSEEN_STOP_S = 1.0
WANTED = r"\] (version\[|starting \.\.\.|started|stopping \.\.\.|closed)"  # for grep on the host: these lines


@dataclass(frozen=True)
class LastRestart:
    stop_s: float | None  # its last graceful stop; None when the log shows none
    start_s: float  # from the JVM's launch to the node started (joined)
    # When that start's process wrote its first line and `starting ...` (its loading), in seconds of the
    # host's clock; equal when the log shows no `starting ...`.
    loading: tuple[float, float] = (0.0, 0.0)

    @property
    def total_s(self) -> float:
        return (UNSEEN_STOP_S if self.stop_s is None else self.stop_s) + self.start_s


def last_restart(lines: str) -> LastRestart | None:
    """The node's last stop and start in its log lines (oldest first); None without a whole start."""
    marks: list[tuple[str, float]] = []
    for line in lines.splitlines():
        m = LINE.match(line)
        if m:
            at = datetime.strptime(m[1], "%Y-%m-%dT%H:%M:%S").timestamp() + int(m[2]) / 1000
            marks.append((m[3], at))
    start = span(marks, "version[", "started")
    if start is None:
        return None
    started_at = max(at for what, at in marks if what == "started")
    launched = max(at for what, at in marks if what == "version[" and at <= started_at)
    loaded = [at for what, at in marks if what == "starting ..." and launched <= at <= started_at]
    return LastRestart(stop_s=span(marks, "stopping ...", "closed"), start_s=LAUNCH_S + start,
                       loading=(launched, loaded[-1] if loaded else launched))


def span(marks: list[tuple[str, float]], begin: str, end: str) -> float | None:
    """Seconds from the last ``begin`` that has an ``end`` after it, to that end."""
    ends = [i for i, (what, _) in enumerate(marks) if what == end]
    for i in reversed(ends):
        began = [at for what, at in marks[:i] if what == begin]
        if began and marks[i][1] >= began[-1]:
            return round(marks[i][1] - began[-1], 3)
    return None


def shared_cpu_starts(measured: dict[str, LastRestart], kernel_of: dict[str, str]) -> dict[str, LastRestart]:
    """Each start with its loading counted at the share of its kernel's CPUs it had: while m nodes of one
    kernel were loading at once, each second counts 1/m. Nodes on other kernels are left as they are."""
    out = dict(measured)
    for name, m in measured.items():
        kernel = kernel_of.get(name)
        others = [o.loading for n, o in measured.items() if n != name and kernel and kernel_of.get(n) == kernel]
        begin, end = m.loading
        cuts = sorted({begin, end, *(t for a, b in others for t in (a, b) if begin < t < end)})
        alone = sum((b - a) / (1 + sum(1 for x, y in others if x <= a and b <= y)) for a, b in pairwise(cuts))
        if end - alone > 0.001:
            out[name] = replace(m, start_s=round(m.start_s - (end - begin) + alone, 3))
    return out


def with_measured_restarts(plan: Plan, measured: dict[str, LastRestart]) -> Plan:
    """The plan's estimate with each batch's restart part (the fixed figures) replaced by its slowest
    node's last restart (a node not read: the median of those read). The rest of a batch's estimate
    (its recovery) is the product's and stays."""
    if not measured:
        return plan
    typical = statistics.median(m.total_s for m in measured.values())
    batches = []
    for b in plan.batches:
        restart = max((measured[n].total_s if n in measured else typical) for n in b.nodes) if b.nodes else 0.0
        batches.append(replace(b, estimate_s=round(max(b.estimate_s - EST_STOP_S - EST_START_TO_JOIN_S, 0.0)
                                                    + restart, 1)))
    slowest = max(measured.items(), key=lambda kv: kv[1].total_s)
    note = (f"estimate from each node's last restart in its own log ({len(measured)} read; slowest "
            f"{slowest[0]}: {slowest[1].total_s:.1f} s to stop and start), not fixed figures")
    return replace(plan, batches=tuple(batches), estimate_s=round(sum(b.estimate_s for b in batches), 1),
                   notes=(*plan.notes, note))
