"""What a host's hardware carries, as the host itself says: the speed of its network links and the kind
of disk under each data path. Read (one command, nothing changed) for the recovery rate a run raises
when the nodes declare no recovery bandwidth of their own (shards/limits.py).

A disk's kind is named, not timed: timing it would mean writing to a production disk. Each kind counts
what such a disk sustains in sequential reads and writes, low in its range (`DISK_BYTES_S`). A virtual
disk that says it rotates (many virtio disks do, whatever is under them) is counted as one that does.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from orchestrator.units import human_bytes

MB = 1000 * 1000
# Sustained sequential throughput of each kind of disk, taken low: a recovery writes and reads at once.
DISK_BYTES_S = {"NVMe": 1500 * MB, "SSD": 450 * MB, "HDD": 150 * MB}


@dataclass(frozen=True)
class HostCapacity:
    link_mbit_s: int | None = None  # the fastest network link that is up (Mb/s, as the kernel reports it)
    link: str = ""  # its interface
    disk: str | None = None  # the slowest kind of disk under the node's data paths: NVMe, SSD or HDD

    @property
    def bytes_s(self) -> int | None:
        """What the host carries for a recovery: the smaller of its link and its disks; None if neither is known."""
        known = [b for b in (self.link_mbit_s * MB // 8 if self.link_mbit_s else None,
                             DISK_BYTES_S.get(self.disk or "")) if b]
        return min(known) if known else None

    @property
    def text(self) -> str:
        parts = [f"a {self.link_mbit_s / 1000:g} Gb/s link ({self.link})" if self.link_mbit_s else "",
                 f"an {self.disk} disk (~{human_bytes(DISK_BYTES_S[self.disk])}/s)" if self.disk else ""]
        return ", ".join(p for p in parts if p) or "nothing read"


def capacity_command(data_paths: Sequence[str]) -> str:
    """Prints `link NAME SPEED` for each network interface that is up (not loopback), and
    `disk DEVICE ROTATIONAL` for each data path. Read-only; a value it cannot read is left empty."""
    links = ('for d in /sys/class/net/*; do n=${d##*/}; [ "$n" = lo ] && continue; '
             '[ "$(cat "$d/operstate" 2>/dev/null)" = up ] || continue; '
             'echo "link $n $(cat "$d/speed" 2>/dev/null)"; done')
    # The device under the path, through links (/dev/mapper/vg-lv is dm-0); a partition's queue is its disk's.
    disks = [f'd=$(readlink -f "$(findmnt -nvo SOURCE --target {shlex.quote(p)} 2>/dev/null)" 2>/dev/null); '
             f'n=${{d##*/}}; r=$(cat "/sys/class/block/$n/queue/rotational" 2>/dev/null || '
             f'cat "/sys/class/block/$n/../queue/rotational" 2>/dev/null); echo "disk $n $r"'
             for p in data_paths]
    return "; ".join([links, *disks])


def parse_capacity(output: str) -> HostCapacity:
    """The command's output read: the fastest link up, and the slowest kind of disk of the data paths."""
    speeds: list[tuple[int, str]] = []
    kinds: list[str] = []
    for line in output.splitlines():
        words = line.split()
        if len(words) == 3 and words[0] == "link" and words[2].isdigit() and int(words[2]) > 0:
            speeds.append((int(words[2]), words[1]))
        elif len(words) == 3 and words[0] == "disk" and words[2] in ("0", "1"):
            kinds.append("HDD" if words[2] == "1" else "NVMe" if words[1].startswith("nvme") else "SSD")
    fastest = max(speeds, default=None)
    slowest = min(kinds, key=lambda k: DISK_BYTES_S[k], default=None)
    return HostCapacity(link_mbit_s=fastest[0] if fastest else None, link=fastest[1] if fastest else "",
                        disk=slowest)
