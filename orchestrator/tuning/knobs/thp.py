"""Transparent Huge Pages: off live, persisted by a boot unit, and kept off against a tuned profile."""

from __future__ import annotations

import re
import shlex
from dataclasses import replace

from orchestrator.hosts.actions import KnobWrite, RootScript, systemctl
from orchestrator.tuning.knobs.base import Fix, Knob, KnobState, selected, unreadable, write_file_command
from orchestrator.tuning.reads import Reads, read_command

THP_DIRS = ("/sys/kernel/mm/transparent_hugepage", "/sys/kernel/mm/redhat_transparent_hugepage")
THP_UNIT = "orchestrator-thp"
PLAIN_NAME = re.compile(r"[A-Za-z0-9_.-]{1,100}")

THP_FIND = "for d in " + " ".join(THP_DIRS) + "; do [ -d \"$d\" ] && { echo \"$d\"; break; }; done"
TUNED_RUNNING = "systemctl is-active tuned || pgrep -x tuned"


class ThpKnob(Knob):
    def __init__(self, enabled: str, defrag: str) -> None:
        self.wanted = {"enabled": enabled, "defrag": defrag}

    def probes(self) -> list[str]:
        reads = [f"/etc/systemd/system/{THP_UNIT}.service", "/etc/tuned/active_profile",
                 *(f"{d}/{key}" for d in THP_DIRS for key in self.wanted)]
        return [THP_FIND, f"systemctl is-enabled {THP_UNIT}", TUNED_RUNNING, *map(read_command, reads)]

    def evaluate(self, reads: Reads) -> list[KnobState]:
        found = reads.run(THP_FIND)
        base = found.stdout.strip()
        if base and base not in THP_DIRS:
            return [unreadable("thp", "never", f"unexpected THP directory {base[:80]!r}")]
        if not base:
            return [unreadable("thp", "never", "no transparent_hugepage directory in /sys/kernel/mm "
                                               "(kernel without THP: nothing to do)")]
        unit_enabled = reads.run(f"systemctl is-enabled {THP_UNIT}").stdout.strip() == "enabled"
        unit_text, _ = reads.read(f"/etc/systemd/system/{THP_UNIT}.service")
        tuned_note, tuned_fix = self._tuned(reads)
        fixes: list[Fix] = []
        states = []
        for key, want in self.wanted.items():
            path = f"{base}/{key}"
            content, error = reads.read(path)
            if content is None:
                states.append(unreadable(f"thp.{key}", want, error or "unreadable"))
                continue
            live = selected(content)
            persisted = want if unit_enabled and unit_text and f"echo {want} > {path}" in unit_text else None
            persisted_ok = persisted == want and tuned_note is None
            state = KnobState(f"thp.{key}", live, persisted, want, live == want, persisted_ok, note=tuned_note)
            if live != want:
                fixes.append(KnobWrite(path, want))
            states.append(state)
        if any(not s.persisted_ok for s in states if s.error is None):
            fixes += self._persist_commands(base)
            fixes += tuned_fix
        return [replace(s, fix=tuple(fixes)) if i == 0 else s for i, s in enumerate(states)]

    def _persist_commands(self, base: str) -> list[Fix]:
        writes = " && ".join(f"echo {v} > {base}/{k}" for k, v in self.wanted.items())
        unit = ("[Unit]\nDescription=Transparent Huge Pages as the database wants them (orchestrator)\n"
                "DefaultDependencies=no\nAfter=local-fs.target\nBefore=elasticsearch.service riak.service\n\n"
                f"[Service]\nType=oneshot\nRemainAfterExit=yes\nExecStart=/bin/sh -c '{writes}'\n\n"
                "[Install]\nWantedBy=multi-user.target\n")
        return [write_file_command(f"/etc/systemd/system/{THP_UNIT}.service", unit),
                systemctl("daemon-reload"), systemctl("enable", THP_UNIT)]

    def possible_fixes(self, reads: Reads) -> list[Fix]:
        base = reads.run(THP_FIND).stdout.strip()
        if base not in THP_DIRS:
            return []
        return [*(KnobWrite(f"{base}/{key}", want) for key, want in self.wanted.items()),
                *self._persist_commands(base)]

    def _tuned(self, reads: Reads) -> tuple[str | None, list[Fix]]:
        """A running tuned whose profile sets THP would undo a one-off fix: give it a drop-in profile."""
        if not reads.run(TUNED_RUNNING).ok:
            return None, []
        active, _ = reads.read("/etc/tuned/active_profile")
        profile = (active or "").strip()
        if not profile:
            return None, []
        if not PLAIN_NAME.fullmatch(profile):  # read from the host: it goes into a file and a command
            return f"tuned's active profile {profile[:60]!r} is not a plain name; leaving tuned alone", []
        setting = self._tuned_thp(reads, profile, depth=0)
        want = self.wanted["enabled"]
        if setting is None or setting == want:
            return None, []
        ours = profile if profile.startswith("orchestrator-") else f"orchestrator-{profile}"
        conf = f"[main]\nsummary={profile} with THP {want} (orchestrator)\ninclude={profile}\n\n" \
               f"[vm]\ntransparent_hugepages={want}\n"
        fix: list[Fix] = [write_file_command(f"/etc/tuned/{ours}/tuned.conf", conf), RootScript(
            f"if command -v tuned-adm >/dev/null; then tuned-adm profile {shlex.quote(ours)}; else "
            f"echo {shlex.quote(ours)} > /etc/tuned/active_profile && systemctl restart tuned; fi",
            by_hand=f"tuned-adm profile {shlex.quote(ours)}")]
        return f"tuned profile {profile!r} sets transparent_hugepages={setting} and would undo the fix", fix

    def _tuned_thp(self, reads: Reads, profile: str, depth: int) -> str | None:
        if depth > 5:
            return None
        for d in ("/etc/tuned", "/usr/lib/tuned"):
            text, _ = reads.read(f"{d}/{profile}/tuned.conf")
            if text is None:
                continue
            section, include, value = "", None, None
            for line in text.splitlines():
                line = line.strip()
                if line.startswith("["):
                    section = line.strip("[]")
                elif "=" in line:
                    k, v = (p.strip() for p in line.split("=", 1))
                    if section == "main" and k == "include":
                        include = v
                    if section == "vm" and k == "transparent_hugepages":
                        value = v
            if value is not None:
                return value
            return self._tuned_thp(reads, include, depth + 1) if include else None
        return None
