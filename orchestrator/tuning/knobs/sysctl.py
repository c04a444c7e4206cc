"""Kernel settings (sysctl): live values and the sysctl.d files a boot applies."""

from __future__ import annotations

from dataclasses import replace

from orchestrator.hosts.actions import KnobWrite
from orchestrator.tuning.knobs.base import Fix, Knob, KnobState, unreadable, write_file_command
from orchestrator.tuning.reads import Reads, read_command

SYSCTL_FILE = "/etc/sysctl.d/99-orchestrator.conf"



def sysctl_wanted(spec: str, live: str | None) -> tuple[str, bool]:
    """(value to set, whether ``live`` satisfies the spec); a spec is 'N' or '>=N'."""
    if spec.startswith(">="):
        floor = int(spec[2:])
        ok = live is not None and live.strip().lstrip("-").isdigit() and int(live) >= floor
        return (live.strip() if ok and live else str(floor)), ok
    return spec, live is not None and live.strip() == spec


SYSCTL_FILES = ("for f in /usr/lib/sysctl.d/*.conf /run/sysctl.d/*.conf /etc/sysctl.d/*.conf; do "
                "[ -f \"$f\" ] && echo \"$f\"; done")


class SysctlKnob(Knob):
    def __init__(self, wanted: dict[str, str]) -> None:
        self.wanted = wanted

    def probes(self) -> list[str]:
        return [SYSCTL_FILES, read_command("/etc/sysctl.conf"),
                *(read_command("/proc/sys/" + key.replace(".", "/")) for key in self.wanted)]

    def evaluate(self, reads: Reads) -> list[KnobState]:
        persisted = self._persisted(reads)
        states, lines = [], []
        live_fix: list[Fix] = []
        for key, spec in self.wanted.items():
            path = "/proc/sys/" + key.replace(".", "/")
            content, error = reads.read(path)
            if content is None:
                states.append(unreadable(f"sysctl {key}", spec, error or "unreadable"))
                continue
            live = content.strip()
            value, live_ok = sysctl_wanted(spec, live)
            stored, where = persisted.get(key, (None, None))
            _, persisted_ok = sysctl_wanted(spec, stored)
            note = f"set in {where}" if where and where != SYSCTL_FILE else None
            if not live_ok:
                live_fix.append(KnobWrite(path, value))
            lines.append(f"{key} = {value}")
            states.append(KnobState(f"sysctl {key}", live, stored, spec, live_ok, persisted_ok, note=note))
        fix = live_fix
        if any(not s.persisted_ok for s in states if s.error is None):
            fix = [*live_fix, write_file_command(SYSCTL_FILE, "# Written by orchestrator (tuning profile).\n"
                                                 + "\n".join(lines) + "\n")]
        return [replace(s, fix=tuple(fix)) if i == 0 else s for i, s in enumerate(states)]

    def possible_fixes(self, reads: Reads) -> list[Fix]:
        return [*(KnobWrite("/proc/sys/" + key.replace(".", "/"), sysctl_wanted(spec, None)[0])
                  for key, spec in self.wanted.items()), write_file_command(SYSCTL_FILE, "")]

    def _persisted(self, reads: Reads) -> dict[str, tuple[str, str]]:
        """key -> (value, file) as a boot applies them: sysctl.d files by name, /etc wins, sysctl.conf last."""
        listing = reads.run(SYSCTL_FILES)
        by_name: dict[str, str] = {}
        for f in listing.stdout.split():
            by_name[f.rsplit("/", 1)[-1]] = f  # later dirs in the list (/etc) win for the same name
        files = [by_name[n] for n in sorted(by_name)] + ["/etc/sysctl.conf"]
        reads.need(files)
        out: dict[str, tuple[str, str]] = {}
        for f in files:
            text, _ = reads.read(f)
            for line in (text or "").splitlines():
                line = line.strip()
                if not line or line.startswith(("#", ";")) or "=" not in line:
                    continue
                key, value = (p.strip() for p in line.split("=", 1))
                if key.lstrip("-") in self.wanted:
                    out[key.lstrip("-")] = (value, f)
        return out
