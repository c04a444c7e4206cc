"""What the tool does as root on a host, as fixed commands.

Each action renders two ways. For a root shell (root's own login, or `ssh.sudo_rules: shell`, where
the whole command runs under `sudo /bin/sh -c`): a plain shell command. For exact sudo rules
(`ssh.sudo_rules: commands`): the same work done by calls of `sudo -n` whose arguments are fixed
(values go on standard input, never in arguments), so that each call matches one line of the rules
`orchestrate sudoers` prints from the same actions (``rules``). Reads never need root.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from orchestrator.errors import OrchestratorError

# Absolute paths: a sudoers rule names a command by its path (Debian 12 and RHEL 9 have /usr merged).
SYSTEMCTL = "/usr/bin/systemctl"
TEE = "/usr/bin/tee"
CHMOD = "/usr/bin/chmod"
MV = "/usr/bin/mv"
MKDIR = "/usr/bin/mkdir"
PKILL = "/usr/bin/pkill"

Rule = tuple[str, ...]  # the argv one sudoers line allows, exactly


@dataclass(frozen=True)
class RootCommand:
    """A command with fixed arguments (``may_fail``: its failure is expected and ignored)."""

    argv: tuple[str, ...]
    may_fail: bool = False

    def shell(self, sudo: bool = False) -> str:
        # For a root shell the command is found on PATH, as it always was.
        argv = self.argv if sudo else (self.argv[0].rsplit("/", 1)[-1], *self.argv[1:])
        command = ("sudo -n " if sudo else "") + shlex.join(argv)
        return command + (" || true" if self.may_fail else "")

    def rules(self) -> list[Rule]:
        return [self.argv]

    def __str__(self) -> str:
        return self.shell()


def systemctl(*args: str, may_fail: bool = False) -> RootCommand:
    return RootCommand((SYSTEMCTL, *args), may_fail)


@dataclass(frozen=True)
class KnobWrite:
    """A value written to a kernel file (/sys, /proc/sys): by `tee` under sudo, the value on its input."""

    path: str
    value: str

    def shell(self, sudo: bool = False) -> str:
        value, path = shlex.quote(self.value), shlex.quote(self.path)
        if sudo:
            return f"printf '%s\\n' {value} | sudo -n {TEE} {path} >/dev/null"
        return f"printf '%s\\n' {value} > {path}"

    def rules(self) -> list[Rule]:
        return [(TEE, self.path)]

    def __str__(self) -> str:
        return f"write {self.value} to {self.path}"


@dataclass(frozen=True)
class FileWrite:
    """A file written on a host: its content goes on the command's standard input, never in its
    arguments (`ps` shows those; riak.conf holds the cluster's cookie). Written to a temporary name in
    the same directory, then renamed, and only into a directory owned by root (or, for a root shell,
    by the SSH user): a planted symlink in a directory another account can write is never followed.
    Under exact sudo rules the temporary name is fixed (root's directory: nobody else can create it)."""

    path: str
    text: str
    mode: str = "0644"

    @property
    def data(self) -> bytes:
        return self.text.encode()

    @property
    def directory(self) -> str:
        return self.path.rsplit("/", 1)[0] or "/"

    @property
    def temporary(self) -> str:
        return f"{self.directory}/.orchestrator-{self.path.rsplit('/', 1)[-1]}.new"

    def shell(self, sudo: bool = False) -> str:
        """The command; it reads exactly the file's bytes from standard input."""
        directory, path = shlex.quote(self.directory), shlex.quote(self.path)
        if sudo:
            tmp = shlex.quote(self.temporary)
            return (f"d={directory}; {{ [ -d \"$d\" ] || sudo -n {MKDIR} -p -- {directory}; }} && "
                    f"o=$(stat -c %u -- \"$d\") && {{ [ \"$o\" = 0 ] || {{ echo \"refusing to write into $d: it "
                    f"belongs to uid $o, not root\" >&2; exit 1; }}; }} && "
                    f"head -c {len(self.data)} | sudo -n {TEE} {tmp} >/dev/null && "
                    f"sudo -n {CHMOD} {self.mode} {tmp} && sudo -n {MV} -f -- {tmp} {path}")
        return (f"d={directory}; mkdir -p -- \"$d\" && o=$(stat -c %u -- \"$d\") && "
                f"{{ [ \"$o\" = 0 ] || [ \"$o\" = \"$(id -u)\" ] || {{ echo \"refusing to write into $d: it belongs "
                f"to uid $o, not root\" >&2; exit 1; }}; }} && t=$(mktemp -- \"$d/.orchestrator.XXXXXXXX\") && "
                f"{{ head -c {len(self.data)} > \"$t\" && chmod {self.mode} -- \"$t\" && mv -f -- \"$t\" {path} "
                f"|| {{ rm -f -- \"$t\"; exit 1; }}; }}")

    def rules(self) -> list[Rule]:
        return [(MKDIR, "-p", "--", self.directory), (TEE, self.temporary), (CHMOD, self.mode, self.temporary),
                (MV, "-f", "--", self.temporary, self.path)]

    def __str__(self) -> str:  # what --dry-run shows: never the content
        return f"write {self.path} ({len(self.data)} bytes, mode {self.mode}, content on standard input)"


@dataclass(frozen=True)
class RootScript:
    """A fix that is a small shell script (tuned's profile switch): run by a root shell only; under exact
    sudo rules it is refused, saying what to run by hand."""

    script: str
    by_hand: str  # what an operator runs instead

    def shell(self, sudo: bool = False) -> str:
        if sudo:
            raise OrchestratorError(f"this fix needs a root shell, which ssh.sudo_rules: commands does not give: "
                                    f"run `{self.by_hand}` on the host yourself, then tune again")
        return self.script

    def rules(self) -> list[Rule]:
        return []

    def __str__(self) -> str:
        return self.script


Action = RootCommand | KnobWrite | FileWrite | RootScript


def sudoers_word(arg: str) -> str:
    """One argument as a sudoers rule spells it: the characters sudoers reads specially are escaped
    (sysfs paths have colons; a literal `*` must not be a wildcard)."""
    return "".join("\\" + c if c in "\\,:=!*?[]" else c for c in arg)


def sudoers(user: str, rules: list[Rule], header: str) -> str:
    """The sudoers file allowing ``user`` exactly ``rules`` as root, without a password."""
    lines = [f"# {line}" if line else "#" for line in header.splitlines()]
    commands = [" ".join(sudoers_word(a) for a in rule) for rule in sorted(set(rules))]
    lines.append("Cmnd_Alias ORCHESTRATOR = " + ", \\\n    ".join(commands))
    lines.append(f"{user} ALL=(root) NOPASSWD: ORCHESTRATOR")
    return "\n".join(lines) + "\n"
