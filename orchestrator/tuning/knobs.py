"""The knobs. Each is one small unit: inspect (live and persisted values) and the commands to fix it.

Adding a knob means adding one class here and a line in ``knobs_for``; nothing else changes.
"""

from __future__ import annotations

import shlex
from abc import ABC, abstractmethod
from dataclasses import dataclass, field, replace

from orchestrator.tuning.host import Host, choices, read_command, selected, write_file_command
from orchestrator.tuning.profile import Profile

THP_DIRS = ("/sys/kernel/mm/transparent_hugepage", "/sys/kernel/mm/redhat_transparent_hugepage")
THP_UNIT = "orchestrator-thp"
SYSCTL_FILE = "/etc/sysctl.d/99-orchestrator.conf"
UDEV_RULE = "/etc/udev/rules.d/60-orchestrator-io-scheduler.rules"
SCHEDULER_NAMES = {  # what an operator asks for -> names a kernel may offer, best first
    "noop": ["none", "noop"], "none": ["none", "noop"], "deadline": ["mq-deadline", "deadline"],
    "mq-deadline": ["mq-deadline", "deadline"], "cfq": ["bfq", "cfq"], "bfq": ["bfq", "cfq"], "kyber": ["kyber"],
}


@dataclass(frozen=True)
class KnobState:
    knob: str
    live: str | None
    persisted: str | None  # what a reboot gives; None when nothing makes it stick
    desired: str
    live_ok: bool
    persisted_ok: bool
    error: str | None = None
    note: str | None = None
    fix: tuple[str, ...] = field(default=(), compare=False)  # commands that would fix it

    @property
    def drift(self) -> bool:
        return self.error is not None or not (self.live_ok and self.persisted_ok)


class Knob(ABC):
    @abstractmethod
    def inspect(self, host: Host) -> list[KnobState]:
        """Read the live and persisted values; fill ``fix`` with the commands that would correct them."""

    def probes(self) -> list[str]:
        """Read-only commands ``inspect`` runs first: fetched for all knobs in one round trip."""
        return []


def unreadable(knob: str, desired: str, error: str) -> KnobState:
    return KnobState(knob, None, None, desired, False, False, error=error)


# --- Transparent Huge Pages -------------------------------------------------------------------------
THP_FIND = "for d in " + " ".join(THP_DIRS) + "; do [ -d \"$d\" ] && { echo \"$d\"; break; }; done"
TUNED_RUNNING = "systemctl is-active tuned || pgrep -x tuned"


class ThpKnob(Knob):
    def __init__(self, enabled: str, defrag: str) -> None:
        self.wanted = {"enabled": enabled, "defrag": defrag}

    def probes(self) -> list[str]:
        reads = [f"/etc/systemd/system/{THP_UNIT}.service", "/etc/tuned/active_profile",
                 *(f"{d}/{key}" for d in THP_DIRS for key in self.wanted)]
        return [THP_FIND, f"systemctl is-enabled {THP_UNIT}", TUNED_RUNNING, *map(read_command, reads)]

    def inspect(self, host: Host) -> list[KnobState]:
        found = host.run(THP_FIND)
        base = found.stdout.strip()
        if not base:
            return [unreadable("thp", "never", "no transparent_hugepage directory in /sys/kernel/mm "
                                               "(kernel without THP: nothing to do)")]
        unit_enabled = host.run(f"systemctl is-enabled {THP_UNIT}").stdout.strip() == "enabled"
        unit_text, _ = host.read(f"/etc/systemd/system/{THP_UNIT}.service")
        tuned_note, tuned_fix = self._tuned(host)
        fixes: list[str] = []
        states = []
        for key, want in self.wanted.items():
            path = f"{base}/{key}"
            content, error = host.read(path)
            if content is None:
                states.append(unreadable(f"thp.{key}", want, error or "unreadable"))
                continue
            live = selected(content)
            persisted = want if unit_enabled and unit_text and f"echo {want} > {path}" in unit_text else None
            persisted_ok = persisted == want and tuned_note is None
            state = KnobState(f"thp.{key}", live, persisted, want, live == want, persisted_ok, note=tuned_note)
            if live != want:
                fixes.append(f"echo {shlex.quote(want)} > {shlex.quote(path)}")
            states.append(state)
        if any(not s.persisted_ok for s in states if s.error is None):
            fixes += self._persist_commands(base)
            fixes += tuned_fix
        return [replace(s, fix=tuple(fixes)) if i == 0 else s for i, s in enumerate(states)]

    def _persist_commands(self, base: str) -> list[str]:
        writes = " && ".join(f"echo {v} > {base}/{k}" for k, v in self.wanted.items())
        unit = ("[Unit]\nDescription=Transparent Huge Pages as the database wants them (orchestrator)\n"
                "DefaultDependencies=no\nAfter=local-fs.target\nBefore=elasticsearch.service riak.service\n\n"
                f"[Service]\nType=oneshot\nRemainAfterExit=yes\nExecStart=/bin/sh -c '{writes}'\n\n"
                "[Install]\nWantedBy=multi-user.target\n")
        return [write_file_command(f"/etc/systemd/system/{THP_UNIT}.service", unit),
                "systemctl daemon-reload", f"systemctl enable {THP_UNIT}"]

    def _tuned(self, host: Host) -> tuple[str | None, list[str]]:
        """A running tuned whose profile sets THP would undo a one-off fix: give it a drop-in profile."""
        if not host.run(TUNED_RUNNING).ok:
            return None, []
        active, _ = host.read("/etc/tuned/active_profile")
        profile = (active or "").strip()
        if not profile:
            return None, []
        setting = self._tuned_thp(host, profile, depth=0)
        want = self.wanted["enabled"]
        if setting is None or setting == want:
            return None, []
        ours = profile if profile.startswith("orchestrator-") else f"orchestrator-{profile}"
        conf = f"[main]\nsummary={profile} with THP {want} (orchestrator)\ninclude={profile}\n\n" \
               f"[vm]\ntransparent_hugepages={want}\n"
        fix = [write_file_command(f"/etc/tuned/{ours}/tuned.conf", conf),
               f"if command -v tuned-adm >/dev/null; then tuned-adm profile {shlex.quote(ours)}; else "
               f"echo {shlex.quote(ours)} > /etc/tuned/active_profile && systemctl restart tuned; fi"]
        return f"tuned profile {profile!r} sets transparent_hugepages={setting} and would undo the fix", fix

    def _tuned_thp(self, host: Host, profile: str, depth: int) -> str | None:
        if depth > 5:
            return None
        for d in ("/etc/tuned", "/usr/lib/tuned"):
            text, _ = host.read(f"{d}/{profile}/tuned.conf")
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
            return self._tuned_thp(host, include, depth + 1) if include else None
        return None


# --- numad ------------------------------------------------------------------------------------------
class NumadKnob(Knob):
    def probes(self) -> list[str]:
        return ["pgrep -x numad", "systemctl is-enabled numad"]

    def inspect(self, host: Host) -> list[KnobState]:
        running = host.run("pgrep -x numad").ok
        enabled_out = host.run("systemctl is-enabled numad")
        enabled = enabled_out.stdout.strip() or "not installed"
        live = "running" if running else "stopped"
        persisted = "enabled" if enabled == "enabled" else ("disabled" if enabled == "disabled" else "not installed")
        fix = []
        if running or persisted == "enabled":
            fix = ["systemctl stop numad || true", "systemctl disable numad || true",
                   "pkill -x numad || true"]
        return [KnobState("numad", live, persisted, "stopped, disabled", not running, persisted != "enabled",
                          fix=tuple(fix))]


# --- IO scheduler -----------------------------------------------------------------------------------
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

    def inspect(self, host: Host) -> list[KnobState]:
        if not self.data_paths:
            return [unreadable("io_scheduler", self.choice, "no data_paths for this node in the inventory: the "
                                                            "devices to tune are unknown")]
        rules, _ = host.read(UDEV_RULE)
        states = []
        devices: dict[str, str] = {}  # device -> its sysfs directory
        for path in self.data_paths:
            found = host.run(self.device_script(path))
            sysdir = found.stdout.strip()
            if not found.ok or not sysdir:
                states.append(unreadable(f"io_scheduler[{path}]", self.choice,
                                         f"cannot find the device of {path}: {found.stderr.strip()}"))
                continue
            devices.setdefault(sysdir.rsplit("/", 1)[-1], sysdir)
        host.read_many([f"{d}/queue/scheduler" for d in devices.values()])
        for device, sysdir in devices.items():
            states.append(self._device(host, device, f"{sysdir}/queue/scheduler", rules or ""))
        return states

    def _device(self, host: Host, device: str, path: str, rules: str) -> KnobState:
        knob = f"io_scheduler[{device}]"
        content, error = host.read(path)
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
        fix = []
        if live != want:
            fix.append(f"echo {shlex.quote(want)} > {shlex.quote(path)}")
        if persisted != want:
            kept = [ln for ln in rules.splitlines() if ln.strip() and f'KERNEL=="{device}"' not in ln]
            kept.append(f'ACTION=="add|change", KERNEL=="{device}", ATTR{{queue/scheduler}}="{want}"')
            fix.append(write_file_command(UDEV_RULE, "\n".join(kept) + "\n"))
        return KnobState(knob, live, persisted, want, live == want, persisted == want, fix=tuple(fix))


# --- sysctls ----------------------------------------------------------------------------------------
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

    def inspect(self, host: Host) -> list[KnobState]:
        persisted = self._persisted(host)
        states, lines = [], []
        live_fix: list[str] = []
        for key, spec in self.wanted.items():
            path = "/proc/sys/" + key.replace(".", "/")
            content, error = host.read(path)
            if content is None:
                states.append(unreadable(f"sysctl {key}", spec, error or "unreadable"))
                continue
            live = content.strip()
            value, live_ok = sysctl_wanted(spec, live)
            stored, where = persisted.get(key, (None, None))
            _, persisted_ok = sysctl_wanted(spec, stored)
            note = f"set in {where}" if where and where != SYSCTL_FILE else None
            if not live_ok:
                live_fix.append(f"printf '%s\\n' {shlex.quote(value)} > {shlex.quote(path)}")
            lines.append(f"{key} = {value}")
            states.append(KnobState(f"sysctl {key}", live, stored, spec, live_ok, persisted_ok, note=note))
        fix = live_fix
        if any(not s.persisted_ok for s in states if s.error is None):
            fix = [*live_fix, write_file_command(SYSCTL_FILE, "# Written by orchestrator (tuning profile).\n"
                                                 + "\n".join(lines) + "\n")]
        return [replace(s, fix=tuple(fix)) if i == 0 else s for i, s in enumerate(states)]

    def _persisted(self, host: Host) -> dict[str, tuple[str, str]]:
        """key -> (value, file) as a boot applies them: sysctl.d files by name, /etc wins, sysctl.conf last."""
        listing = host.run(SYSCTL_FILES)
        by_name: dict[str, str] = {}
        for f in listing.stdout.split():
            by_name[f.rsplit("/", 1)[-1]] = f  # later dirs in the list (/etc) win for the same name
        files = [by_name[n] for n in sorted(by_name)] + ["/etc/sysctl.conf"]
        host.read_many(files)
        out: dict[str, tuple[str, str]] = {}
        for f in files:
            text, _ = host.read(f)
            for line in (text or "").splitlines():
                line = line.strip()
                if not line or line.startswith(("#", ";")) or "=" not in line:
                    continue
                key, value = (p.strip() for p in line.split("=", 1))
                if key.lstrip("-") in self.wanted:
                    out[key.lstrip("-")] = (value, f)
        return out


# --- Erlang schedulers (Riak) -----------------------------------------------------------------------
def erlang_schedulers(cpus: int) -> int:
    """One scheduler fewer for every six logical CPUs (seed 003): 24 -> 20, 16 -> 14, 12 -> 10."""
    return max(cpus - cpus // 6, 1)


class ErlangSchedulersKnob(Knob):
    def __init__(self, riak_conf: str) -> None:
        self.riak_conf = riak_conf

    def probes(self) -> list[str]:
        return ["nproc", read_command(self.riak_conf)]

    def inspect(self, host: Host) -> list[KnobState]:
        cpus_out = host.run("nproc")
        if not cpus_out.ok or not cpus_out.stdout.strip().isdigit():
            return [unreadable("erlang.schedulers", "?", f"cannot count CPUs: {cpus_out.stderr.strip()}")]
        want = str(erlang_schedulers(int(cpus_out.stdout.strip())))
        text, error = host.read(self.riak_conf)
        if text is None:
            return [unreadable("erlang.schedulers", f"{want}:{want}", error or "unreadable")]
        values = {}
        for line in text.splitlines():
            if "=" in line and not line.lstrip().startswith("#"):
                k, v = (p.strip() for p in line.split("=", 1))
                if k in ("erlang.schedulers.total", "erlang.schedulers.online"):
                    values[k] = v
        total = values.get("erlang.schedulers.total", "default")
        current = f"{total}:{values.get('erlang.schedulers.online', 'default')}"
        ok = current == f"{want}:{want}"
        fix = []
        if not ok:
            kept = [ln for ln in text.splitlines()
                    if not ln.strip().startswith(("erlang.schedulers.total", "erlang.schedulers.online"))]
            kept += [f"erlang.schedulers.total = {want}", f"erlang.schedulers.online = {want}"]
            fix.append(write_file_command(self.riak_conf, "\n".join(kept) + "\n"))
        # riak.conf is read at start: the configured value is what the next (re)start runs with.
        return [KnobState("erlang.schedulers", current, current, f"{want}:{want}", ok, ok,
                          note="takes effect when Riak restarts", fix=tuple(fix))]


def knobs_for(profile: Profile, data_paths: list[str]) -> list[Knob]:
    k = profile.knobs
    knobs: list[Knob] = []
    if k.thp:
        knobs.append(ThpKnob(k.thp.enabled, k.thp.defrag))
    if k.numad and k.numad.state == "disabled":
        knobs.append(NumadKnob())
    if k.io_scheduler:
        knobs.append(IoSchedulerKnob(k.io_scheduler.choice, data_paths))
    if k.sysctl:
        knobs.append(SysctlKnob(dict(k.sysctl)))
    if k.erlang_schedulers:
        knobs.append(ErlangSchedulersKnob(k.erlang_schedulers.riak_conf))
    return knobs
