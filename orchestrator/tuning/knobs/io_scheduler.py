"""The IO scheduler of the data disks: set live and persisted by a udev rule."""

from __future__ import annotations

import re
import shlex

from orchestrator.hosts.actions import KnobWrite
from orchestrator.tuning.knobs.base import Fix, Knob, KnobState, choices, selected, unreadable, write_file_command
from orchestrator.tuning.reads import Reads, read_command

DEVICE_NAME = re.compile(r"[A-Za-z0-9_.:-]{1,64}")
UDEV_RULE = "/etc/udev/rules.d/60-orchestrator-io-scheduler.rules"
SCHEDULER_NAMES = {  # what an operator asks for -> names a kernel may offer, best first
    "noop": ["none", "noop"], "none": ["none", "noop"], "deadline": ["mq-deadline", "deadline"],
    "mq-deadline": ["mq-deadline", "deadline"], "cfq": ["bfq", "cfq"], "bfq": ["bfq", "cfq"], "kyber": ["kyber"],
}



class IoSchedulerKnob(Knob):
    def __init__(self, choice: str, data_paths: list[str]) -> None:
        self.choice = choice
        self.data_paths = data_paths

    @staticmethod
    def device_script(path: str) -> str:
        """Prints the sysfs directory of the disk holding ``path`` (a partition's parent disk)."""
        return (f"p={shlex.quote(path)}; d=$(stat -c '%Hd:%Ld' \"$p\") || exit 3; "
                "s=$(readlink -f /sys/dev/block/$d); [ -e \"$s/partition\" ] && s=$(dirname \"$s\"); "
                "echo \"$s\"")

    def probes(self) -> list[str]:
        return [read_command(UDEV_RULE), *map(self.device_script, self.data_paths)]

    def evaluate(self, reads: Reads) -> list[KnobState]:
        if not self.data_paths:
            return [unreadable("io_scheduler", self.choice, "no data_paths for this node in the inventory: the "
                                                            "devices to tune are unknown")]
        rules, _ = reads.read(UDEV_RULE)
        states, devices = self._devices(reads)
        reads.need([f"{d}/queue/scheduler" for d in devices.values()])
        for device, sysdir in devices.items():
            states.append(self._device(reads, device, f"{sysdir}/queue/scheduler", rules or ""))
        return states

    def _devices(self, reads: Reads) -> tuple[list[KnobState], dict[str, str]]:
        """The data paths' disks (name -> sysfs directory), and a state for each path whose disk is unknown."""
        states = []
        devices: dict[str, str] = {}  # device -> its sysfs directory
        for path in self.data_paths:
            found = reads.run(self.device_script(path))
            sysdir = found.stdout.strip()
            if not found.ok or not sysdir:
                states.append(unreadable(f"io_scheduler[{path}]", self.choice,
                                         f"cannot find the device of {path}: {found.stderr.strip()}"))
                continue
            device = sysdir.rsplit("/", 1)[-1]
            if not sysdir.startswith("/sys/") or not DEVICE_NAME.fullmatch(device):  # goes into a udev rule
                states.append(unreadable(f"io_scheduler[{path}]", self.choice,
                                         f"unexpected device path {sysdir[:80]!r} for {path}"))
                continue
            devices.setdefault(device, sysdir)
        return states, devices

    def possible_fixes(self, reads: Reads) -> list[Fix]:
        _, devices = self._devices(reads)
        if not devices:
            return []
        return [*(KnobWrite(f"{d}/queue/scheduler", self.choice) for d in devices.values()),
                write_file_command(UDEV_RULE, "")]

    def _device(self, reads: Reads, device: str, path: str, rules: str) -> KnobState:
        knob = f"io_scheduler[{device}]"
        content, error = reads.read(path)
        if content is None:
            return unreadable(knob, self.choice, error or "unreadable")
        offered = choices(content)
        want = next((n for n in SCHEDULER_NAMES[self.choice] if n in offered), None)
        if want is None and len(offered) > 1:
            return unreadable(knob, self.choice, f"{device} offers {', '.join(offered)}; none of them is "
                                                 f"{self.choice!r} (or its blk-mq name)")
        live = selected(content)
        want = want or self.choice  # a plain value (sandbox overlay after a write) lists one word
        persisted = None
        for line in rules.splitlines():
            if f'KERNEL=="{device}"' in line and "ATTR{queue/scheduler}=" in line:
                persisted = line.split('ATTR{queue/scheduler}="', 1)[1].split('"', 1)[0]
        fix: list[Fix] = []
        if live != want:
            fix.append(KnobWrite(path, want))
        if persisted != want:
            kept = [ln for ln in rules.splitlines() if ln.strip() and f'KERNEL=="{device}"' not in ln]
            kept.append(f'ACTION=="add|change", KERNEL=="{device}", ATTR{{queue/scheduler}}="{want}"')
            fix.append(write_file_command(UDEV_RULE, "\n".join(kept) + "\n"))
        return KnobState(knob, live, persisted, want, live == want, persisted == want, fix=tuple(fix))
