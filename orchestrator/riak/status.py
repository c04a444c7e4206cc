"""What `riak-admin` prints, parsed into an immutable snapshot. Pure functions, no I/O.

The formats are those of riak_core's console (`riak_core_console.erl`) from Riak KV 2.0 through
3.x and OpenRiak 3.4: `member-status` (with a location after the node since riak_kv 3.0.10),
`ring-status`, `transfers` (hinted, ownership and repair transfers) and `transfer-limit`. Long
lists that Erlang's `~p` wraps over several lines are joined first, and the `ok` that 3.x prints
after a command is dropped. Riak 1.x output (no transfer type) is refused, never guessed from.
Examples of each are in tests/unit/test_riak.py and docs/riak.md.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

MEMBER_RE = re.compile(r"^(\S+)\s+([\d.]+)%\s+(--|[\d.]+%)\s+'?([^'\s]+)'?(?:\s+\(([^)]*)\))?\s*$")
FOOTER_RE = re.compile(r"Valid:\s*(\d+)\s*/\s*Leaving:\s*(\d+)\s*/\s*Exiting:\s*(\d+)\s*/\s*Joining:\s*(\d+)"
                       r"\s*/\s*Down:\s*(\d+)")
LIMIT_RE = re.compile(r"^\s*(\d+|\(offline\))\s+'?([^'\s]+)'?\s*$")
WAITING_RE = re.compile(r"^'?([^'\s]+)'? waiting to handoff (\d+) partitions")
STOPPED_RE = re.compile(r"^'?([^'\s]+)'? does not have (\d+) primary partitions running")
DOWN_RE = re.compile(r"^Nodes \[(.*)\] are currently down")
UNCONTACTED_RE = re.compile(r"^Node '?([^'\s]+)'? could not be contacted")
AGO_RE = re.compile(r"\[([\d.]+) (us|ms|s|min|h|hr)s? ago\]")
PERCENT_RE = re.compile(r"\|\s*(\d+|N/A)%\s*$")
ARROW = "=======>"


class RiakOutputError(ValueError):
    """Output that does not look like what riak-admin prints: never guess from it."""


@dataclass(frozen=True)
class Member:
    node: str
    status: str  # valid, joining, leaving, exiting, down, (legacy)
    ring_pct: float
    pending_pct: float | None
    location: str | None = None  # riak_kv 3.0.10+: the node's location (rack, zone)


@dataclass(frozen=True)
class RingStatus:
    claimant: str | None
    ring_ready: bool | None  # None: unknown (the claimant is down)
    pending_changes: bool
    unreachable: tuple[str, ...]


@dataclass(frozen=True)
class ActiveTransfer:
    kind: str  # hinted, ownership, repair, resize
    vnode: str
    partition: str
    source: str
    target: str
    objects: int | None
    percent: int | None
    last_update_s: float | None  # seconds since the last progress report; None: no update seen

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (self.vnode, self.partition, self.source, self.target)

    @property
    def progress(self) -> tuple[int | None, int | None]:
        return (self.objects, self.percent)


@dataclass(frozen=True)
class Transfers:
    waiting: dict[str, int] = field(default_factory=dict)  # node -> partitions waiting to hand off
    stopped: dict[str, int] = field(default_factory=dict)  # node -> owned partitions not running
    down: tuple[str, ...] = ()
    active: tuple[ActiveTransfer, ...] = ()
    uncontacted: tuple[str, ...] = ()

    @property
    def none(self) -> bool:
        return not (self.waiting or self.stopped or self.active)

    def describe(self) -> str:
        parts = [f"{n} waiting to hand off {c} partition(s)" for n, c in sorted(self.waiting.items())]
        parts += [f"{n} has {c} primary partition(s) not running" for n, c in sorted(self.stopped.items())]
        parts += [f"{len(self.active)} transfer(s) active"] if self.active else []
        return "; ".join(parts) or "no transfers"


@dataclass(frozen=True)
class RiakSnapshot:
    members: tuple[Member, ...]
    ring: RingStatus
    transfers: Transfers
    limits: dict[str, int | None]  # node -> handoff concurrency (None: offline)

    def member(self, node: str) -> Member | None:
        return next((m for m in self.members if m.node == node), None)


def _atom_list(text: str) -> tuple[str, ...]:
    return tuple(a.strip().strip("'") for a in text.split(",") if a.strip())


def cleaned(text: str) -> list[str]:
    """The output's lines, with the `ok` that Riak 3.x prints after a command's output dropped, and an
    Erlang list that `~p` wrapped over several lines (`['a',` / `'b']`) joined back into one line."""
    lines = text.rstrip("\n").splitlines()
    while lines and lines[-1].strip() in ("ok", ""):
        lines.pop()
    joined: list[str] = []
    for line in lines:
        if joined and joined[-1].count("[") > joined[-1].count("]"):
            joined[-1] = joined[-1].rstrip() + " " + line.strip()
        else:
            joined.append(line)
    return joined


def parse_member_status(text: str) -> tuple[Member, ...]:
    if "Membership" not in text:
        raise RiakOutputError(f"not member-status output: {text.strip()[:200]!r}")
    members, footer = [], None
    for line in cleaned(text):
        if m := MEMBER_RE.match(line.strip()):
            pending = None if m.group(3) == "--" else float(m.group(3).rstrip("%"))
            members.append(Member(node=m.group(4), status=m.group(1), ring_pct=float(m.group(2)),
                                  pending_pct=pending, location=m.group(5)))
        elif f := FOOTER_RE.search(line):
            footer = sum(int(n) for n in f.groups())
    # A row in a format not understood would vanish from the gate's view (a down member, say).
    if footer is not None and footer != len(members):
        raise RiakOutputError(f"member-status counts {footer} member(s) in its footer but {len(members)} row(s) "
                              "could be read; refusing to guess which are missing")
    return tuple(members)


def parse_ring_status(text: str) -> RingStatus:
    if "Claimant" not in text:
        raise RiakOutputError(f"not ring-status output: {text.strip()[:200]!r}")
    claimant, ready, pending = None, None, True
    unreachable: tuple[str, ...] = ()
    for line in cleaned(text):
        line = line.strip()
        if line.startswith("Claimant:"):
            claimant = line.split(":", 1)[1].strip().strip("'") or None
        elif line.startswith("Ring Ready:"):
            value = line.split(":", 1)[1].strip()
            ready = True if value == "true" else False if value == "false" else None
        elif line.startswith("No pending changes"):
            pending = False
        elif line.startswith("The following nodes are unreachable:"):
            unreachable = _atom_list(line.split(":", 1)[1].strip().strip("[]"))
    return RingStatus(claimant=claimant, ring_ready=ready, pending_changes=pending, unreachable=unreachable)


def _seconds(ago: str, unit: str) -> float:
    factor = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "min": 60.0, "h": 3600.0, "hr": 3600.0}[unit]
    return float(ago) * factor


def _transfer_block(lines: list[str]) -> ActiveTransfer:
    fields: dict[str, str] = {}
    source = target = ""
    percent: int | None = None
    arrow_at = None
    for i, raw in enumerate(lines):
        line = raw.strip()
        if ARROW in raw:
            left, right = raw.split(ARROW, 1)
            source, target, arrow_at = left.strip(), right.strip(), i
        elif arrow_at is not None and PERCENT_RE.search(line):
            value = PERCENT_RE.search(line).group(1)  # type: ignore[union-attr]
            percent = None if value == "N/A" else int(value)
        elif arrow_at is not None and i > arrow_at and line and percent is None:
            # A name longer than 25 characters continues below: columns 0-25 and 37-62.
            source += raw[:25].strip()
            target += raw[37:].strip()
        elif ":" in line:
            key, value = line.split(":", 1)
            fields[key.strip()] = value.strip()
    # A repair transfer names a source and a target partition; the others, one partition.
    partition = fields.get("partition") or fields.get("target partition")
    if not source or not target or not partition:
        raise RiakOutputError("an active transfer without partition, source or target: " + " | ".join(lines)[:300])
    objects = fields.get("objects transferred", "unknown")
    ago = AGO_RE.search(fields.get("last update", ""))
    return ActiveTransfer(kind=fields.get("transfer type", "unknown").replace("_handoff", ""),
                          vnode=fields.get("vnode type", "unknown"), partition=partition,
                          source=source, target=target, objects=int(objects) if objects.isdigit() else None,
                          percent=percent, last_update_s=_seconds(*ago.groups()) if ago else None)


def parse_transfers(text: str) -> Transfers:
    if "Active Transfers:" not in text:
        raise RiakOutputError(f"not transfers output: {text.strip()[:200]!r}")
    head, _, tail = "\n".join(cleaned(text)).partition("Active Transfers:")
    if re.search(r"^target node:", tail, re.MULTILINE):
        raise RiakOutputError("this is Riak 1.x transfer output (no transfer type, progress or source); Riak "
                              "before 2.0 is not supported")
    waiting: dict[str, int] = {}
    stopped: dict[str, int] = {}
    down: tuple[str, ...] = ()
    for line in head.splitlines():
        line = line.strip()
        if m := WAITING_RE.match(line):
            waiting[m.group(1)] = int(m.group(2))
        elif m := STOPPED_RE.match(line):
            stopped[m.group(1)] = int(m.group(2))
        elif m := DOWN_RE.match(line):
            down = _atom_list(m.group(1))
        elif line.startswith("Transfers failed"):
            raise RiakOutputError("riak-admin transfers failed (see the Riak log of the node it ran on)")
    blocks: list[list[str]] = []
    uncontacted = []
    for raw in tail.splitlines():
        if raw.startswith("transfer type:"):
            blocks.append([raw])
        elif m := UNCONTACTED_RE.match(raw.strip()):
            uncontacted.append(m.group(1))
        elif blocks and raw.strip():
            blocks[-1].append(raw)
    return Transfers(waiting=waiting, stopped=stopped, down=down,
                     active=tuple(_transfer_block(b) for b in blocks), uncontacted=tuple(uncontacted))


def parse_transfer_limit(text: str) -> dict[str, int | None]:
    if "Transfer Limit" not in text:
        raise RiakOutputError(f"not transfer-limit output: {text.strip()[:200]!r}")
    limits: dict[str, int | None] = {}
    for line in cleaned(text):
        m = LIMIT_RE.match(line)
        if m:
            limits[m.group(2)] = None if m.group(1) == "(offline)" else int(m.group(1))
    return limits


def cluster_problems(snap: RiakSnapshot) -> list[str]:
    """Why no node may be restarted now (empty when one may): the per-node preflight of a run."""
    problems = []
    not_valid = [f"{m.node} ({m.status})" for m in snap.members if m.status != "valid"]
    if not_valid:
        problems.append(f"not every member is valid: {', '.join(not_valid)}. Let joins and leaves finish "
                        "(`riak-admin member-status`) before restarting.")
    if snap.ring.ring_ready is not True:
        said = "unknown (the claimant is down)" if snap.ring.ring_ready is None else "false"
        problems.append(f"the ring is not ready ({said}): the members do not agree on the ring yet "
                        "(`riak-admin ring-status`).")
    if snap.ring.pending_changes:
        problems.append("ownership handoff is pending (a membership change is in progress): wait for "
                        "`riak-admin ring-status` to show no pending changes.")
    unreachable = sorted(set(snap.ring.unreachable) | set(snap.transfers.down))
    if unreachable:
        problems.append(f"node(s) unreachable: {', '.join(unreachable)}. Restarting another node now would "
                        "take more replicas offline.")
    if not snap.transfers.none:
        problems.append(f"transfers are active ({snap.transfers.describe()}): wait until `riak-admin transfers` "
                        "shows none, so that every partition has its replicas.")
    return problems
