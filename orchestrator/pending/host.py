"""What a host says about the node it runs, for `orchestrate pending` (pending/verdict.py judges it): one
read-only shell command per host over the usual transport, its answer one fact a line.

Read as the transport's user; with a root shell (root's login, or `ssh.sudo_rules: shell`) everything can
be read; without one, what only root may read (another user's /proc/PID/maps, a configuration directory
of mode 750) comes back as unreadable, and the node's reasons as unknown, never as clean.
"""

from __future__ import annotations

import base64
import re
import shlex
from dataclasses import dataclass, field

from orchestrator.reading import lines, plain_path, whole_number

MAX_SETTINGS_FILE = 1_000_000  # bytes of the settings file read (a larger one is not compared)
MAX_LINES = 20_000  # of an answer read: a host cannot make the tool read without end
# What counts as code the process runs (not a deleted segment file of an index, mapped by Lucene). A
# library extracted to a temporary directory and deleted on purpose is told apart by the judge.
CODE_FILE = re.compile(r"\.(jar|so(\.[0-9]+)*|jsa)$|/lib/modules$|/bin/(java|beam\.smp|erlexec)$")
# The settings that name a file read at start (sed's basic regular expression, GNU's alternation).
NAMING_FILES = "\\|".join(("ssl\\.key", "ssl\\.certificate", "ssl\\.certificate_authorities", "ssl\\.keystore\\.path",
                          "ssl\\.truststore\\.path", "_filepath"))
JAR_NAME = re.compile(r"[a-z][a-z0-9-]{0,40}")
MAX_OUTPUT_LINE = 4096  # characters of one echoed value (a path); a longer line is cut, never split
VERSION_IN_JAR = re.compile(r"-([0-9]+\.[0-9]+\.[0-9]+[A-Za-z0-9.+~-]*)\.jar$")


@dataclass(frozen=True)
class HostAsk:
    """What to ask one host about one node."""

    pid: int | None  # the node's process; None: the unit's main process
    unit: str  # its systemd unit ("": a service run by the inventory's own commands)
    package: str
    files: tuple[str, ...]  # files read at start; a path ending in / stands for each file in that directory
    settings_file: str | None
    version_jars: tuple[str, str] | None  # where the home's own version shows: a directory, a jar's name
    version_file: str | None = None  # or a file whose last word is it (a release's start_erl.data)

    def __post_init__(self) -> None:
        # Every path here goes into the host's shell (quoted, as every value is): only plain absolute paths
        # are asked for, whoever built the question. The products pass only those (shards/running.py).
        paths = [*self.files, *filter(None, (self.settings_file, self.version_file))]
        if self.version_jars is not None:
            paths.append(self.version_jars[0])
            if not JAR_NAME.fullmatch(self.version_jars[1]):
                raise ValueError(f"not a jar's name: {self.version_jars[1][:80]!r}")
        bad = [p for p in paths if plain_path(p) is None]
        if bad:
            raise ValueError(f"not a plain absolute path: {bad[0][:200]!r}")


@dataclass
class HostEvidence:
    """One host's answer, parsed; absent facts stay None (the judge says they are unknown)."""

    boot_id: str | None = None
    pid: int | None = None
    command: str | None = None  # the process's name (/proc/PID/comm)
    started_s: float | None = None  # when the process started, by the host's clock (/proc)
    package: str | None = None  # the installed package's version ("" when it is not installed)
    home_versions: tuple[str, ...] = ()
    files: dict[str, float] = field(default_factory=dict)  # path -> change time (ctime)
    unreadable: list[str] = field(default_factory=list)  # files that exist but could not be read
    settings_text: str | None = None
    settings_unreadable: bool = False
    maps_readable: bool | None = None
    replaced: list[str] = field(default_factory=list)  # code the process maps or holds open, since deleted
    reboot_required: str | None = None  # /run/reboot-required's packages ("" when it names none)
    kernel_running: str | None = None
    kernels_installed: tuple[str, ...] = ()
    needrestart: dict[str, list[str]] = field(default_factory=dict)  # its batch output: key -> values


def _file_lines(path: str) -> str:
    if path.endswith("/"):
        return f"for f in {shlex.quote(path)}*; do [ -f \"$f\" ] && one \"$f\"; done"
    return f"one {shlex.quote(path)}"


def host_command(ask: HostAsk) -> str:
    """The read-only shell command that answers ``ask`` (POSIX sh and coreutils: Debian's and RHEL's)."""
    pid = (str(ask.pid) if ask.pid else
           f"$(systemctl show -p MainPID --value {shlex.quote(ask.unit)} 2>/dev/null)" if ask.unit else "")
    package = shlex.quote(ask.package)
    script = [
        # Every value is said on one line of its own: a newline in a file's or a process's name cannot add a
        # fact (parse_host splits on newlines alone).
        f"say() {{ k=$1; shift; printf '%s ' \"$k\"; printf '%s' \"$*\" | tr '\\n' '?' | head -c {MAX_OUTPUT_LINE}; "
        "echo; }",
        f"pid={pid}",
        'say boot "$(cat /proc/sys/kernel/random/boot_id 2>/dev/null)"',
        'if [ -n "$pid" ] && [ "$pid" != 0 ] && [ -r "/proc/$pid/stat" ]; then',
        '  say pid "$pid"; say comm "$(cat /proc/$pid/comm 2>/dev/null)"',
        # Field 22 of stat (after the command's name in parentheses, the 20th): clock ticks since boot.
        "  ticks=$(sed 's/.*) //' /proc/$pid/stat | cut -d' ' -f20)",
        "  btime=$(sed -n 's/^btime //p' /proc/stat)",
        '  echo "started $btime $ticks $(getconf CLK_TCK)"',
        '  if maps=$(cat /proc/$pid/maps 2>/dev/null); then echo "maps readable";',
        "    printf '%s\\n' \"$maps\" | sed -n 's/^[^/]*\\(\\/.*\\) (deleted)$/replaced \\1/p' | sort -u",
        "    ls -l /proc/$pid/fd 2>/dev/null | sed -n 's/.* -> \\(\\/.*\\) (deleted)$/replaced \\1/p' | sort -u",
        '  else echo "maps unreadable"; fi',
        "fi",
        f"if v=$(dpkg-query -W -f='${{Status}}|${{Version}}' {package} 2>/dev/null); then",
        '  case "$v" in *" installed|"*) say package "${v#*|}";; *) echo "package ";; esac',
        f"elif v=$(rpm -q --qf '%{{VERSION}}' {package} 2>/dev/null); then say package \"$v\"",
        "else echo 'package '; fi",
    ]
    if ask.version_jars:
        directory, jar = ask.version_jars
        script.append(f"for f in {shlex.quote(directory)}/{jar}-[0-9]*.jar; do [ -e \"$f\" ] && say homejar \"$f\"; "
                      "done")
    if ask.version_file:
        quoted = shlex.quote(ask.version_file)
        script.append(f"[ -r {quoted} ] && say homeversion \"$(awk '{{v=$NF}} END {{print v}}' {quoted})\"")
    script += [
        'one() { if s=$(stat -c %Z -- "$1" 2>&1); then say file "$s $1";',
        '  else case "$s" in *"No such file"*) ;; *) say unreadable "$1";; esac; fi; }',
        *(_file_lines(path) for path in ask.files),
    ]
    if ask.unit:  # the unit, its drop-ins and its environment files
        script.append(f"systemctl show -p FragmentPath -p DropInPaths -p EnvironmentFiles {shlex.quote(ask.unit)} "
                     "2>/dev/null | sed 's/^[A-Za-z]*=//; s/ ([a-z_]*=[a-z]*)//g' | tr ' ' '\\n' | sed 's/^-//'"
                     ' | while read -r f; do [ -n "$f" ] && one "$f"; done')
    if ask.settings_file:
        quoted = shlex.quote(ask.settings_file)
        # The TLS keys, certificates and stores the settings file names (a node's own answer hides them),
        # in the flat form `xpack.security.http.ssl.key: certs/node.key`; relative to the file's directory.
        script.append(f"d=$(dirname {quoted}); sed -n 's/^[[:space:]]*[A-Za-z0-9_.]*\\({NAMING_FILES}\\)"
                     f"[[:space:]]*:\\(.*\\)$/\\2/p' {quoted} 2>/dev/null | sed 's/[[:space:]]#.*//' "
                     "| tr -d \"[]\\\"'\" | tr ',' '\\n' | while read -r f; do [ -n \"$f\" ] || continue; "
                     'case "$f" in /*) ;; *) f="$d/$f";; esac; one "$f"; done')
        script.append(f"if t=$(head -c {MAX_SETTINGS_FILE} {quoted} 2>/dev/null | base64 -w0) && [ -r {quoted} ]; "
                     "then echo \"settings $t\"; else echo 'settings unreadable'; fi")
    script += [
        "[ -e /run/reboot-required ] && echo \"reboot-required $(cat /run/reboot-required.pkgs 2>/dev/null"
        " | tr '\\n' ' ')\"",
        'echo "kernel-running $(uname -r)"',
        "for k in /boot/vmlinuz-*; do [ -e \"$k\" ] && say kernel-installed \"${k#/boot/vmlinuz-}\"; done",
        "command -v needrestart >/dev/null 2>&1 && needrestart -b -r l 2>/dev/null | sed 's/^/needrestart /'",
        "exit 0",
    ]
    return "\n".join(script)


def parse_host(out: str) -> HostEvidence:
    """The host's answer, line by line; a line it does not know is ignored (a shell's noise)."""
    ev = HostEvidence()
    for line in lines(out)[:MAX_LINES]:
        key, _, value = line.partition(" ")
        if key == "boot":
            ev.boot_id = value.strip() or None
        elif key == "pid" and (pid := whole_number(value.strip(), 10)):
            ev.pid = pid
        elif key == "comm":
            ev.command = value.strip()
        elif key == "started":
            numbers = [n for p in value.split(" ") if (n := whole_number(p)) is not None]
            if len(numbers) == 3 == len(value.split(" ")) and numbers[2]:
                boot, ticks, per_s = numbers
                ev.started_s = boot + ticks / per_s
        elif key == "maps":
            ev.maps_readable = value.strip() == "readable"
        elif key == "replaced" and CODE_FILE.search(value):
            if value not in ev.replaced:
                ev.replaced.append(value)
        elif key == "package":
            ev.package = value.strip()
        elif key == "homejar":
            found = VERSION_IN_JAR.search(value)
            if found:
                ev.home_versions += (found.group(1),)
        elif key == "homeversion" and re.fullmatch(r"[0-9][0-9A-Za-z.+~-]{0,60}", value.strip()):
            ev.home_versions += (value.strip(),)
        elif key == "file":
            stamp, _, path = value.partition(" ")
            if (changed := whole_number(stamp)) is not None and path:
                ev.files[path] = float(changed)
        elif key == "unreadable" and value:
            ev.unreadable.append(value)
        elif key == "settings":
            _settings(ev, value.strip())
        elif key == "reboot-required":
            ev.reboot_required = " ".join(value.split())
        elif key == "kernel-running":
            ev.kernel_running = value.strip() or None
        elif key == "kernel-installed" and value.strip():
            ev.kernels_installed += (value.strip(),)
        elif key == "needrestart":
            name, _, said = value.partition(":")
            ev.needrestart.setdefault(name.strip(), []).append(said.strip())
    return ev


def _settings(ev: HostEvidence, value: str) -> None:
    if value == "unreadable":
        ev.settings_unreadable = True
        return
    try:
        ev.settings_text = base64.b64decode(value, validate=True).decode("utf-8", errors="replace")
    except ValueError:
        ev.settings_unreadable = True
