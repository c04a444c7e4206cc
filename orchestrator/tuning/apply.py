"""Checking and applying a tuning profile on nodes' hosts: the `tune` command and the restart step."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from fnmatch import fnmatchcase
from typing import Any

from orchestrator.config.model import Inventory, NodeEntry
from orchestrator.errors import ConfigError, HostError, OrchestratorError
from orchestrator.hosts.actions import FileWrite
from orchestrator.hosts.batch import run_batch
from orchestrator.hosts.changes import HostChange, KnobValues
from orchestrator.hosts.transport import Transport
from orchestrator.tuning.host import Host
from orchestrator.tuning.knobs import KnobState, knobs_for
from orchestrator.tuning.knobs.base import Fix
from orchestrator.tuning.knobs.io_scheduler import SCHEDULER_NAMES, UDEV_RULE
from orchestrator.tuning.knobs.sysctl import SYSCTL_FILE
from orchestrator.tuning.knobs.thp import THP_UNIT
from orchestrator.tuning.profile import Profile, load_profile


@dataclass
class NodeReport:
    node: str
    host: str
    knobs: list[KnobState]
    error: str | None = None
    applied: list[str] | None = None  # the commands run
    fixed: list[str] | None = None  # the knobs that drifted before
    changes: list[HostChange] | None = None  # what each fixed knob was and became
    reads: list[str] = field(default_factory=list)  # the read-only commands the inspection ran on the host

    @property
    def drift(self) -> bool:
        return self.error is not None or any(k.drift for k in self.knobs)

    def to_json(self) -> dict[str, Any]:
        return {"node": self.node, "host": self.host, "drift": self.drift, "error": self.error,
                "applied": self.applied,
                "changes": None if self.changes is None else [c.to_json() for c in self.changes],
                "knobs": [{k: v for k, v in asdict(s).items() if k != "fix"} | {"drift": s.drift} for s in self.knobs]}


def profile_of(inv: Inventory) -> Profile | None:
    return None if inv.tuning.profile == "none" else load_profile(inv.tuning.profile, inv.directory)


def profile_summary(inv: Inventory, tune: bool = True) -> tuple[str, ...]:
    """What the plan says about tuning: the profile, then one line per knob with where the change is kept
    (each is made live and in a file or unit that outlasts a reboot). ``tune`` False: `--no-tune`."""
    profile = profile_of(inv)
    if profile is None:
        return ("none (tuning.profile: none)",)
    if not tune:
        return (f"left out of this run (--no-tune): the hosts are neither read nor changed (profile {profile.name})",)
    k = profile.knobs
    if inv.tuning.mode == "check":
        return (f"profile {profile.name}, CHECKED on each host while its node is stopped (tuning.mode: check): drift "
                "is reported, nothing on the hosts is changed",)
    lines = [f"profile {profile.name}, applied to each host while its node is stopped; the changes are PERSISTENT "
             "(live, and in the files named; `--no-tune` leaves the hosts alone, `tuning.mode: check` only reports)"]
    if k.thp:
        lines.append(f"THP enabled={k.thp.enabled} defrag={k.thp.defrag} (a boot unit, "
                     f"/etc/systemd/system/{THP_UNIT}.service; where tuned runs, a tuned profile in /etc/tuned/)")
    if k.numad:
        lines.append("numad stopped and disabled (systemctl disable)")
    if k.io_scheduler:
        names = SCHEDULER_NAMES.get(k.io_scheduler.choice, [k.io_scheduler.choice])
        # As the kernel names it: `none` on blk-mq kernels, where `noop` is gone (what `tune` shows).
        lines.append(f"IO scheduler {' (or '.join(names[:2])}{')' if len(names) > 1 else ''} on the data devices "
                     f"(a udev rule, {UDEV_RULE})")
    lines += [f"{key}={value} ({SYSCTL_FILE})" for key, value in k.sysctl.items()]
    if k.erlang_schedulers:
        lines.append(f"Erlang schedulers from the CPU count ({k.erlang_schedulers.riak_conf})")
    return tuple(lines)


def inspect_node(profile: Profile, transport: Transport, node: NodeEntry,
                 likely_reads: Sequence[str] = ()) -> NodeReport:
    """What each knob is on the host. ``likely_reads``: what a similar host needed (the previous node
    of a rolling restart); read in the first round trip, they spare the passes that discover them."""
    host = Host(transport, node)
    knobs = knobs_for(profile, list(node.data_paths))
    try:
        states = host.gather(lambda reads: [s for knob in knobs for s in knob.evaluate(reads)],
                             first=[*(p for knob in knobs for p in knob.probes()), *likely_reads])
    except OrchestratorError as exc:
        return NodeReport(node.name, node.host, [], error=str(exc))
    return NodeReport(node.name, node.host, states, reads=list(host.cache))


def fix_commands(report: NodeReport) -> list[Fix]:
    seen: list[Fix] = []
    for state in report.knobs:
        for fix in state.fix:
            if fix not in seen:
                seen.append(fix)
    return seen


def apply_node(profile: Profile, transport: Transport, node: NodeEntry,
               likely_reads: Sequence[str] = ()) -> NodeReport:
    """Fix what drifts, live and persisted; then inspect again. Idempotent: no drift, no command."""
    before = inspect_node(profile, transport, node, likely_reads)
    if before.error:
        return before
    commands = fix_commands(before)
    if not commands:
        before.applied, before.fixed, before.changes = [], [], []
        return before  # nothing drifted: nothing to change, nothing to read again
    run_in_order(transport, node, commands)
    after = inspect_node(profile, transport, node, before.reads)
    after.applied = [str(c) for c in commands]  # a file write is shown by its path and size, never its content
    after.fixed = [k.knob for k in before.knobs if k.drift]
    now = {k.knob: KnobValues(k.live, k.persisted) for k in after.knobs}
    after.changes = [HostChange(k.knob, before=KnobValues(k.live, k.persisted), after=now.get(k.knob))
                     for k in before.knobs if k.drift]
    return after


def rendered(fix: Fix, exact_sudo: bool) -> str:
    """The fix as a shell command: for a root shell, or as exact `sudo -n` calls (hosts/actions.py)."""
    if isinstance(fix, str):
        if exact_sudo:
            raise OrchestratorError(f"a fix given as a shell command cannot run under exact sudo rules: {fix}")
        return fix
    return fix.shell(exact_sudo)


def run_in_order(transport: Transport, node: NodeEntry, fixes: list[Fix]) -> None:
    """Run the fixes in one round trip, in order, stopping at the first that fails. File contents go on
    standard input, each write taking exactly its own bytes; other commands run with input closed."""
    exact = transport.exact_sudo(node)
    try:
        shells = [rendered(f, exact) for f in fixes]
    except OrchestratorError as exc:
        raise HostError(f"{node.name}: {exc}") from None
    commands = [cmd if isinstance(f, FileWrite) else f"{{ {cmd}\n}} </dev/null" for f, cmd in zip(fixes, shells,
                                                                                                  strict=True)]
    data = b"".join(f.data for f in fixes if isinstance(f, FileWrite))
    results = run_batch(transport, node, commands, stop_at_failure=True, stdin=data)
    if results is None:  # the host cannot batch: one at a time
        results = []
        for fix, cmd in zip(fixes, commands, strict=True):
            results.append(transport.run(node, cmd, stdin=fix.data if isinstance(fix, FileWrite) else None))
            if not results[-1].ok:
                break
    failed = next(((fix, r) for fix, r in zip(fixes, results, strict=False) if not r.ok), None)
    if failed is not None:
        fix, result = failed
        # The kernel's own words (e.g. "Invalid argument") are the message.
        said = (result.stderr or result.stdout).strip() or f"exit {result.rc}"
        raise HostError(f"{node.name}: tuning command failed: {fix}\n  {said}")


def for_nodes(inv: Inventory, patterns: tuple[str, ...]) -> list[NodeEntry]:
    """The nodes whose name matches one of ``patterns`` (shell-style, as `restart --nodes`); all without."""
    if not patterns:
        return list(inv.nodes)
    unmatched = [p for p in patterns if not any(fnmatchcase(n.name, p) for n in inv.nodes)]
    if unmatched:
        raise ConfigError("command line", [f"--nodes: no node of the inventory matches {', '.join(unmatched)}"])
    return [n for n in inv.nodes if any(fnmatchcase(n.name, p) for p in patterns)]


def run_all(inv: Inventory, transport: Transport, nodes: list[NodeEntry], apply: bool) -> list[NodeReport]:
    profile = profile_of(inv)
    if profile is None:
        raise ConfigError("inventory", ["tuning.profile is 'none': there is nothing to check or apply"])
    fn = apply_node if apply else inspect_node

    def one(node: NodeEntry) -> NodeReport:
        try:
            return fn(profile, transport, node)
        except OrchestratorError as exc:
            return NodeReport(node.name, node.host, [], error=str(exc))

    with ThreadPoolExecutor(max_workers=min(len(nodes), 16) or 1) as pool:
        return list(pool.map(one, nodes))


@dataclass
class TuneResult:
    changes: list[HostChange]  # per fixed knob: what it was and became
    read_ahead_s: float | None = None  # nothing read now: a read this old (the look-ahead's) found no drift
    drift: list[str] = field(default_factory=list)  # `tuning.mode: check`: what drifts, left as it is


# A read ahead older than this is read again when its host's turn comes (a long gate wait, a pause).
READ_AHEAD_MAX_AGE_S = 60.0


class RollingTuner:
    """The restart's tune_host step: apply the profile to one host, fail loudly if anything still drifts.

    A rolling restart tunes similar hosts one after another, so two things are read ahead:
    - each host's first round trip also reads what the previous one turned out to need (its listings'
      results: disks, THP directory), so a host in steady state costs one round trip instead of two;
    - ``look_ahead`` reads the next batch's hosts while the current batch boots and recovers. When
      that read (at most READ_AHEAD_MAX_AGE_S old) found nothing to fix, the host's turn costs no
      round trip while its node is down; when it found drift, the host is read again and fixed then.
    """

    def __init__(self, profile: Profile, transport: Transport, clock: Callable[[], float] = time.monotonic,
                 check_only: bool = False) -> None:
        self.profile = profile
        self.check_only = check_only  # `tuning.mode: check`: read and report, never write
        self.transport = transport
        self.clock = clock
        self.learned: list[str] = []
        self._ahead: dict[str, tuple[float, Future[NodeReport]]] = {}
        self._pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="tuning-read-ahead")
        self._asking = threading.Lock()

    def look_ahead(self, nodes: Sequence[NodeEntry]) -> None:
        with self._asking:  # asked from each node's thread of a zone batch: one read per host all the same
            for node in nodes:
                earlier = self._ahead.get(node.name)
                if earlier is None or self.clock() - earlier[0] > READ_AHEAD_MAX_AGE_S:
                    read = self._pool.submit(inspect_node, self.profile, self.transport, node, list(self.learned))
                    self._ahead[node.name] = (self.clock(), read)

    def read_ahead(self, node: NodeEntry) -> tuple[NodeReport, float] | None:
        """The look-ahead's report on ``node`` and its age, when usable (recent, read without error)."""
        entry = self._ahead.pop(node.name, None)
        if entry is None:
            return None
        at, read = entry
        try:
            report = read.result()
        except Exception:  # a look-ahead that failed is only a read lost: the host is read again now
            return None
        age = self.clock() - at
        return (report, age) if report.error is None and age <= READ_AHEAD_MAX_AGE_S else None

    def __call__(self, node: NodeEntry, read_ahead_ok: bool = False) -> TuneResult:
        """Tune ``node``'s host. ``read_ahead_ok``: its node has been down since the look-ahead read it
        (the tune_host step), so that read stands; after a reboot (say) the host is read now."""
        ahead = self.read_ahead(node)  # taken either way: a read is used once at most
        if read_ahead_ok and ahead is not None and not ahead[0].drift:
            self.learned[:] = ahead[0].reads
            return TuneResult([], read_ahead_s=ahead[1])
        if self.check_only:
            found = inspect_node(self.profile, self.transport, node, self.learned)
            self.learned[:] = found.reads
            return TuneResult([], drift=[found.error] if found.error else [
                f"{k.knob} is {k.live}, wanted {k.desired}" for k in found.knobs if k.drift])
        report = apply_node(self.profile, self.transport, node, self.learned)
        self.learned[:] = report.reads
        if report.drift:
            problems = [report.error] if report.error else [
                f"{k.knob}: {k.error or f'live {k.live}, persisted {k.persisted}, wanted {k.desired}'}"
                for k in report.knobs if k.drift]
            raise HostError(f"{node.name}: host tuning incomplete: {'; '.join(p for p in problems if p)}")
        return TuneResult(report.changes or [])

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


def make_tuner(inv: Inventory, transport: Transport) -> RollingTuner | None:
    profile = profile_of(inv)
    return None if profile is None else RollingTuner(profile, transport, check_only=inv.tuning.mode == "check")
