"""Which nodes need a restart, and why (`orchestrate pending`, `plan --pending`, `restart --pending`): what a
product says of each running node (``RunningNode``) and what its host says (pending/host.py), judged
by a pure function into reasons, each with its evidence. What cannot be read is unknown, never clean.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from orchestrator.config.loader import MAX_CONFIG_BYTES, parse
from orchestrator.errors import ConfigError
from orchestrator.pending.host import HostEvidence

VERSION = "version"
CONFIGURATION = "configuration"
REPLACED_CODE = "replaced code"
REBOOT = "reboot"
REASONS = (VERSION, CONFIGURATION, REPLACED_CODE, REBOOT)
# A file changed within this long of the process's start was written by the start itself, or so close to
# it that the process may have read the new file.
START_SLACK_S = 2.0
# Files a node writes itself as it starts (a keystore created when absent, or upgraded to a new format):
# a change within this long of its start is its own.
WRITTEN_AT_START_S = 120.0
# Where processes extract native libraries and delete them at once, on purpose (JNA, zstd-jni, netty):
# a deleted file there is not replaced code. A node's own temporary directory is added to these.
TEMPORARY = ("/tmp/", "/var/tmp/", "/dev/", "/run/", "/memfd:")
SHOWN = 3  # files or settings named in one reason; the rest counted
# Settings a node never shows in its answer (Elasticsearch and OpenSearch filter their TLS and secret
# settings out): not compared. A file they name is watched by its change time instead.
HIDDEN_SETTINGS = ("*.ssl.*", "*.ssl", "*password*", "*secure*", "*.ssl_*")


@dataclass(frozen=True)
class RunningNode:
    """What the cluster says of a running node, and where its host keeps what it read at start."""

    name: str  # the product's node name
    addresses: tuple[str, ...]  # its address and host name, for an inventory entry named otherwise
    version: str | None
    pid: int | None  # on its host; None: the service's main process
    started_s: float | None  # when its process started (seconds since the epoch); None: read on the host
    package: str
    files: tuple[str, ...]  # read at start; a path ending in / stands for each file in that directory
    settings_file: str | None = None  # compared setting by setting with ``settings``
    settings: Mapping[str, Any] = field(default_factory=dict)  # the node's own, flat
    # Where no package is installed, the home's jar named with its version: its directory and the jar's name
    # before the version (`(/usr/share/elasticsearch/lib, elasticsearch)`).
    version_jars: tuple[str, str] | None = None
    version_file: str | None = None  # or a file whose last word is the installed release (Riak's start_erl.data)
    command: str | None = None  # the process's name as its host shows it (java); None: not checked
    written_at_start: tuple[str, ...] = ()  # files the node itself may write as it starts (its keystore)
    temporary: tuple[str, ...] = ()  # its own temporary directories (java.io.tmpdir), each ending in /


@dataclass(frozen=True)
class Reason:
    kind: str  # one of REASONS
    evidence: str
    installed: str = ""  # a version reason's: what the node would start as, and what it runs
    running: str = ""

    def __str__(self) -> str:
        return f"{self.kind}: {self.evidence}"


@dataclass(frozen=True)
class NodePending:
    """A node's verdict: ``reasons`` it needs a restart; ``unknown`` what could not be read (its reasons
    may be more than those listed)."""

    node: str  # the inventory's name
    reasons: tuple[Reason, ...] = ()
    unknown: tuple[str, ...] = ()

    @property
    def state(self) -> str:
        return "pending" if self.reasons else "unknown" if self.unknown else "clean"

    @property
    def reboot(self) -> bool:
        return any(r.kind == REBOOT for r in self.reasons)

    def to_json(self) -> dict[str, Any]:
        return {"node": self.node, "state": self.state,
                "reasons": [{"reason": r.kind, "evidence": r.evidence} for r in self.reasons],
                "unknown": list(self.unknown)}


def judge(node: str, unit: str, running: RunningNode, ev: HostEvidence) -> NodePending:
    """The node's reasons, from what the cluster and its host (whose service ``unit`` runs it) said. Pure."""
    reasons: list[Reason] = []
    unknown: list[str] = []
    if ev.pid is None:
        unknown.append(f"its process ({running.pid or 'the service main process'}) was not found on its host: "
                       "is the node on another host than the inventory says?")
        return NodePending(node, (), tuple(unknown))
    if running.command and ev.command and ev.command != running.command:
        unknown.append(f"process {ev.pid} on its host is `{ev.command}`, not the node's `{running.command}`: "
                       "is the node on another host than the inventory says?")
        return NodePending(node, (), tuple(unknown))
    for found in (_version(running, ev), _configuration(running, ev), _replaced(unit, running, ev), _reboot(ev)):
        if isinstance(found, Reason):
            reasons.append(found)
        elif found:
            unknown.append(found)
    return NodePending(node, tuple(reasons), tuple(unknown))


def _version(running: RunningNode, ev: HostEvidence) -> Reason | str | None:
    installed = _upstream(ev.package) if ev.package else None
    where = f"package {running.package}"
    if not installed and len(set(ev.home_versions)) == 1:
        installed, where = ev.home_versions[0], "the home's own version"
    if not installed:
        return f"version: no package {running.package} installed and no version in the home"
    if running.version is None:
        return "version: the node did not say its version"
    if installed != running.version:
        return Reason(VERSION, f"{where} is {installed}, the node runs {running.version}", installed,
                      running.version)
    return None


def _upstream(version: str) -> str:
    """A package's version without its epoch and revision (1:9.5.3-1 -> 9.5.3)."""
    version = version.split(":", 1)[-1]
    return version.rsplit("-", 1)[0] if "-" in version else version


def _started(running: RunningNode, ev: HostEvidence) -> float | None:
    return running.started_s if running.started_s is not None else ev.started_s


def _configuration(running: RunningNode, ev: HostEvidence) -> Reason | str | None:
    started = _started(running, ev)
    if started is None:
        return "configuration: when the process started could not be read"
    def slack(path: str) -> float:
        return WRITTEN_AT_START_S if path in running.written_at_start else START_SLACK_S

    changed = sorted((path for path, ctime in ev.files.items() if ctime > started + slack(path)),
                     key=lambda p: ev.files[p])
    if not changed:
        if ev.unreadable:
            return f"configuration: {_named(ev.unreadable)} could not be read (a root shell reads them)"
        return None
    # Both times named: a reader looks for the file's change, and the start alone read as that.
    last = "last changed" if len(changed) > 1 else "changed"
    said = [f"{_named(changed)} changed after the node started (started {_when(started)}, {last} "
            f"{_when(ev.files[changed[-1]])})"]
    if running.settings_file in changed and ev.settings_text is not None:
        differ = settings_differ(ev.settings_text, running.settings)
        said.append(f"{running.settings_file}: {_named(differ)}" if differ else
                    f"{running.settings_file}: no setting differs from the running node's")
    return Reason(CONFIGURATION, "; ".join(said))


def settings_differ(text: str, running: Mapping[str, Any]) -> list[str]:
    """Each setting of a YAML settings file whose value differs from the running node's (both flat)."""
    try:  # the configuration loader's bounds: a host's file can hold an alias bomb or nesting past any real one
        loaded = parse(Path("the settings file"), text[:MAX_CONFIG_BYTES])
    except ConfigError as exc:
        return [f"the file was not compared ({'; '.join(exc.problems)[:200]})"]
    if loaded is None:
        return []
    if not isinstance(loaded, dict):
        return ["the file is not a mapping of settings"]
    out = []
    for key, value in flat(loaded).items():
        if "${" in str(value) or any(fnmatchcase(key, hidden) for hidden in HIDDEN_SETTINGS):
            continue  # an environment variable's value (the node's is what it was given at start), or hidden
        now = running.get(key)
        if now is None:
            out.append(f"{key}: {_shown(value)} in the file, not set on the running node")
        elif _normal(now) != _normal(value):
            out.append(f"{key}: {_shown(value)} in the file, {_shown(now)} on the running node")
    return out


def flat(tree: Mapping[Any, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            out.update(flat(value, name + "."))
        else:
            out[name] = value
    return out


def _normal(value: Any) -> list[str]:
    """A setting's value as both sides compare it: a list of texts, in order of text (a one-element list
    is its element: `path.data: /x` is `["/x"]` on the running node)."""
    values = value if isinstance(value, (list, tuple)) else [value]
    return sorted(("true" if v else "false") if isinstance(v, bool) else str(v) for v in values)


def _shown(value: Any) -> str:
    text = ",".join(_normal(value))
    return repr(text if len(text) <= 60 else text[:57] + "...")


def _replaced(unit: str, running: RunningNode, ev: HostEvidence) -> Reason | str | None:
    said = ev.needrestart.get("NEEDRESTART-SVC")
    replaced = [path for path in ev.replaced if not path.startswith((*TEMPORARY, *running.temporary))]
    if ev.needrestart:
        # needrestart's own verdict where it is installed: the services it would restart.
        if said and any(s.removesuffix(".service") == unit.removesuffix(".service") for s in said):
            return Reason(REPLACED_CODE, "needrestart -b lists the node's service")
        if replaced:
            return Reason(REPLACED_CODE, f"the process maps {_named(replaced)}, since deleted or replaced "
                                         "(needrestart did not list the service)")
        return None
    if replaced:
        return Reason(REPLACED_CODE, f"the process maps or holds open {_named(replaced)}, since deleted or "
                                     "replaced")
    if not ev.maps_readable:
        return "replaced code: the process's maps could not be read (a root shell reads them)"
    return None


def _reboot(ev: HostEvidence) -> Reason | None:
    if ev.reboot_required is not None:
        packages = f" (for {ev.reboot_required})" if ev.reboot_required else ""
        return Reason(REBOOT, f"/run/reboot-required{packages}")
    state = (ev.needrestart.get("NEEDRESTART-KSTA") or [""])[0]
    if state in ("2", "3"):
        expected = (ev.needrestart.get("NEEDRESTART-KEXP") or ["?"])[0]
        return Reason(REBOOT, f"needrestart: kernel {expected} installed, {ev.kernel_running} running")
    if ev.kernel_running and ev.kernels_installed:
        newest = max(ev.kernels_installed, key=_version_key)
        if _version_key(newest) > _version_key(ev.kernel_running):
            return Reason(REBOOT, f"kernel {newest} installed, {ev.kernel_running} running")
    return None


def version_problem(node: str, reason: Reason) -> str | None:
    """Why a restart must not start ``node`` on the version installed: older than it runs (the node would
    not start on its data), or another major (an upgrade's own checks and order: `orchestrate upgrade`)."""
    if reason.kind != VERSION or not reason.installed or not reason.running:
        return None
    installed, running = _version_key(reason.installed), _version_key(reason.running)
    if installed < running:
        return (f"{node}: {reason.installed} is installed, older than the {reason.running} it runs: it would not "
                f"start on its data; install {reason.running} again")
    if installed[:1] != running[:1]:
        return (f"{node}: {reason.installed} is installed, another major than the {reason.running} it runs: roll it "
                f"out with `orchestrate upgrade --to {reason.installed}` (its checks and order)")
    return None


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(n) for n in re.findall(r"[0-9]{1,18}", version))  # ASCII digits, any length of text


def _named(items: list[str]) -> str:
    shown = ", ".join(items[:SHOWN])
    return shown + (f" and {len(items) - SHOWN} more" if len(items) > SHOWN else "")


def _when(epoch_s: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(epoch_s))
