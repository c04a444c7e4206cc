"""Where and how to reach a host over SSH, exactly as the operator's OpenSSH client resolves it.

The reader is OpenSSH itself: `ssh -G ALIAS` prints the configuration it would use, without connecting
(Host and Match blocks, Include, first value wins, patterns, tokens in HostName and known-hosts files,
trailing comments, ProxyJump URIs). What `ssh -G` leaves unexpanded, the %-tokens and ${VARIABLES} of
IdentityFile, is expanded here as ssh does at connection time; a token this reader does not know is
refused with its keyword. A jump host is resolved as ssh resolves it: its own settings, its own
ProxyJump (`ProxyJump a,b` reaches b through a). Nothing in a config runs a local command while it is
read unless the inventory allows it (`Match exec` would): such a config is refused first, naming its
line. A ProxyCommand (AWS SSM, Teleport, a corporate proxy) runs a local command too: refused unless the
inventory allows local commands; allowed, it is run exactly as ssh runs it (its %-tokens expanded, then
`exec` through the user's shell), for the first host of a route (a host reached through a jump host is
reached through that host, whatever its own ProxyCommand says, as with `ssh -J`).

Precedence, most specific first: the node's own `ssh_user`/`ssh_port` in the inventory, then what the
inventory's `ssh:` section sets explicitly (for the target; passed to ssh as `-l`/`-p` are), then the
SSH config, then OpenSSH's own defaults.
"""

from __future__ import annotations

import glob
import hashlib
import os
import re
import shutil
import socket
import subprocess
from dataclasses import dataclass, field, replace
from pathlib import Path

from orchestrator.config.loader import refuse_special_file
from orchestrator.config.model import NodeEntry, SshSection
from orchestrator.errors import ConfigError
from orchestrator.hosts.environment import proxy_environment

MAX_HOPS = 16  # jump hosts in one route; a longer chain is refused, not followed
MAX_INCLUDED_FILES = 256
READ_TIMEOUT_S = 10
MATCH = re.compile(r"\s*match[\s=]+(.*)", re.I)
EXEC = re.compile(r"(^|[\s=!])exec([\s=]|$)", re.I)
TOKEN = re.compile(r"%(.)|\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


@dataclass(frozen=True)
class Hop:
    """One SSH connection: the address to connect to, as whom, with which keys."""

    alias: str  # the name it was asked for (for messages)
    hostname: str
    port: int
    user: str
    key_files: tuple[str, ...] = ()
    proxy_command: str | None = None  # its ProxyCommand, tokens expanded: the connection is its stdin and stdout

    def describe(self) -> str:
        return f"{self.user}@{self.hostname}:{self.port}" + (" (ProxyCommand)" if self.proxy_command else "")


@dataclass(frozen=True)
class Route:
    target: Hop
    jumps: tuple[Hop, ...] = ()  # connected in this order, each through the one before
    known_hosts: tuple[str, ...] = ()  # the config's UserKnownHostsFile for this host, if it sets one

    def describe(self) -> str:
        via = f" via {' -> '.join(j.describe() for j in self.jumps)}" if self.jumps else ""
        return f"{self.target.describe()}{via}"


Resolved = dict[str, list[str]]  # ssh -G's keyword -> its values, in order


@dataclass
class SshConfig:
    """The OpenSSH client configuration the tool reads: a file (`ssh -F`), OpenSSH's own files (None:
    ~/.ssh/config and /etc/ssh/ssh_config), or none at all (``enabled`` false)."""

    path: Path | None = None
    enabled: bool = False
    allow_local_commands: bool = False
    _seen: dict[tuple[str, str | None, int | None], Resolved] = field(default_factory=dict, repr=False)
    _defaults: Resolved | None = field(default=None, repr=False)
    _checked: bool = field(default=False, repr=False)

    @property
    def source(self) -> str:
        return str(self.path) if self.path else "the OpenSSH client's configuration"

    @classmethod
    def load(cls, cfg: SshSection) -> SshConfig:
        """The inventory's `ssh.config_file`, or OpenSSH's own files (unless `read_config: false`)."""
        if not cfg.read_config:
            return cls()
        allow = cfg.allow_local_commands
        if cfg.config_file is not None:
            path = Path(cfg.config_file).expanduser()
            if not path.exists():
                raise ConfigError("inventory", [f"ssh.config_file: cannot read {path}: No such file or directory"])
            refuse_special_file(path, "ssh.config_file")  # a FIFO or a device would hang the reader or never end
            return cls(path, True, allow)
        if shutil.which("ssh") is None:
            if Path("~/.ssh/config").expanduser().exists():
                raise ConfigError("inventory", ["~/.ssh/config is read with the OpenSSH client (`ssh -G`), which is "
                                                "not installed: apt-get install openssh-client, or set "
                                                "ssh.read_config: false"])
            return cls()  # no client, no config of its: nothing to read
        return cls(None, True, allow)

    def resolve(self, alias: str, user: str | None = None, port: int | None = None) -> Resolved:
        """What `ssh -G [-l user] [-p port] alias` says (empty when no config is read)."""
        if not self.enabled:
            return {}
        if not self._checked:
            self._refuse_local_commands()
            self._checked = True
        key = (alias, user, port)
        if key not in self._seen:
            self._seen[key] = self._ask(alias, user, port)
        return self._seen[key]

    def defaults(self) -> Resolved:
        """OpenSSH's own defaults (what it says for a host no config names)."""
        if self._defaults is None:
            self._defaults = SshConfig(Path(os.devnull), True)._ask("orchestrator-default-probe", None, None)
        return self._defaults

    def _ask(self, alias: str, user: str | None, port: int | None) -> Resolved:
        if alias.startswith("-") or not alias or any(c.isspace() or c in "'\"\\" for c in alias):
            raise ConfigError(self.source, [f"{alias[:60]!a} is not a host name or alias"])
        cmd = ["ssh", "-G", *(["-F", str(self.path)] if self.path else []), *(["-l", user] if user else []),
               *(["-p", str(port)] if port else []), "--", alias]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=READ_TIMEOUT_S,
                                  stdin=subprocess.DEVNULL, errors="replace", env=proxy_environment())
        except FileNotFoundError:
            raise ConfigError(self.source, ["the OpenSSH client (`ssh`) reads the SSH config and is not "
                                            "installed: apt-get install openssh-client, or ssh.read_config: "
                                            "false"]) from None
        except subprocess.TimeoutExpired:
            raise ConfigError(self.source, [f"`ssh -G` did not finish reading it within {READ_TIMEOUT_S} s "
                                            "(an Include of a special file?)"]) from None
        if proc.returncode != 0:
            raise ConfigError(self.source, [refusal(proc.stderr)])
        found: Resolved = {}
        for line in proc.stdout.splitlines():
            keyword, _, value = line.partition(" ")
            found.setdefault(keyword, []).append(value)
        return found

    def _refuse_local_commands(self) -> None:
        if self.allow_local_commands:
            return
        for where, number, text in config_lines(self.path):
            match = MATCH.match(text)
            if match and EXEC.search(match.group(1)):
                raise ConfigError(str(where), [
                    f"line {number}: `Match exec` runs a local command while the config is read; refused. "
                    "Set ssh.allow_local_commands: true in the inventory to allow it"])


def refusal(stderr: str) -> str:
    """ssh's complaint about a config, without the offending text (a file that is no config, such as
    /etc/shadow, would otherwise be printed)."""
    for line in stderr.splitlines():
        m = re.match(r"(.+?):? line (\d+): ([A-Za-z ]+)", line)
        if m:
            return f"{m.group(1)}, line {m.group(2)}: the OpenSSH client refuses it ({m.group(3).strip()})"
    first = next((line for line in stderr.splitlines() if line.strip()), "no reason given")
    return f"the OpenSSH client cannot read it: {first[:200]!a}"


def config_lines(path: Path | None) -> list[tuple[Path, int, str]]:
    """Every line of the config and the files it includes (as OpenSSH finds them), for a look before
    OpenSSH reads them. Relative Includes are relative to ~/.ssh (user files) or /etc/ssh (system ones)."""
    home_ssh, system = Path("~/.ssh").expanduser(), Path("/etc/ssh")
    todo = [(path, home_ssh)] if path else [(home_ssh / "config", home_ssh), (system / "ssh_config", system)]
    seen: set[Path] = set()
    lines: list[tuple[Path, int, str]] = []
    while todo:
        where, base = todo.pop(0)
        if where in seen or not where.is_file():
            continue
        seen.add(where)
        if len(seen) > MAX_INCLUDED_FILES:
            raise ConfigError(str(path), [f"more than {MAX_INCLUDED_FILES} files included"])
        try:
            text = where.read_text(errors="replace")[:1_000_000]
        except OSError:
            continue
        for number, line in enumerate(text.splitlines(), start=1):
            lines.append((where, number, line))
            words = line.split()
            if words and words[0].lower().startswith("include"):
                for pattern in words[1:]:
                    pattern = str(Path(pattern).expanduser())
                    full = pattern if pattern.startswith("/") else str(base / pattern)
                    todo += [(Path(p), base) for p in sorted(glob.glob(full))]
    return lines


def expand(value: str, tokens: dict[str, str], keyword: str, alias: str) -> str:
    """%-tokens and ${VARIABLES} as ssh expands them in IdentityFile; an unknown one is refused."""

    def one(m: re.Match[str]) -> str:
        if m.group(2) is not None:
            if m.group(2) not in os.environ:
                raise ConfigError("ssh config", [f"Host {alias}: {keyword} uses ${{{m.group(2)}}}, which is not set"])
            return os.environ[m.group(2)]
        if m.group(1) not in tokens:
            raise ConfigError("ssh config", [f"Host {alias}: {keyword} uses the token %{m.group(1)}, which this "
                                             "reader does not expand"])
        return tokens[m.group(1)]

    return TOKEN.sub(one, value)


def identity_files(found: Resolved, defaults: Resolved, alias: str) -> tuple[str, ...]:
    """The hop's IdentityFiles in order, expanded; none when they are only OpenSSH's defaults (the tool
    then tries the agent and the default keys, as ssh does)."""
    files = found.get("identityfile", [])
    if not files or files == defaults.get("identityfile", []):
        return ()
    user, host, port = found["user"][0], found["hostname"][0], found["port"][0]
    local_host = socket.gethostname()
    jump = found.get("proxyjump", [""])[0]
    tokens = {"%": "%", "d": str(Path.home()), "h": host, "i": str(os.getuid()), "j": jump,
              "k": found.get("hostkeyalias", [alias])[0], "L": local_host.split(".")[0], "l": local_host,
              "n": alias, "p": port, "r": user, "u": os.environ.get("USER") or Path.home().name,
              "C": hashlib.sha1(f"{local_host}{host}{port}{user}{jump}".encode()).hexdigest()}
    return tuple(str(Path(expand(f, tokens, "IdentityFile", alias)).expanduser()) for f in files)


def parse_jump(spec: str) -> tuple[str | None, str, int | None]:
    """`[ssh://][user@]host[:port]` -> (user, host, port)."""
    spec = spec.removeprefix("ssh://")
    user, _, rest = spec.rpartition("@")
    host, port = rest, None
    if rest.startswith("["):  # [v6::addr]:port
        host, _, after = rest[1:].partition("]")
        port = int(after[1:]) if after.startswith(":") and after[1:].isdigit() else None
    elif rest.count(":") == 1:
        host, _, p = rest.partition(":")
        port = int(p) if p.isdigit() else None
    return user or None, host, port


def hop(config: SshConfig, cfg: SshSection, alias: str, user: str | None, port: int | None, found: Resolved) -> Hop:
    """One host of a route, from what `ssh -G` said of it (``found``: empty when no config is read)."""
    keys = (str(cfg.key_file),) if cfg.key_file else identity_files(found, config.defaults(), alias) if found else ()
    for key in keys:  # paramiko opens each: a FIFO would hang it, /dev/zero never end
        refuse_special_file(Path(key), "ssh.key_file" if cfg.key_file else f"Host {alias}: IdentityFile")
    return Hop(alias=alias, hostname=found.get("hostname", [alias])[0],
               port=port or int(found.get("port", [cfg.port])[0]), user=user or found.get("user", [cfg.user])[0],
               key_files=keys)


def jump_chain(config: SshConfig, cfg: SshSection, spec: str, depth: int = 0) -> list[Hop]:
    """The hops of a ProxyJump value, first connected first: the last host of `a,b` is reached through
    `a` (ssh -J a b), and a single host through its own config's ProxyJump. ``depth``: the hops already
    placed after these; the whole route holds at most MAX_HOPS."""
    parts = [p.strip() for p in spec.split(",") if p.strip()]
    if not parts or spec.strip().lower() == "none":
        return []
    if depth + len(parts) > MAX_HOPS:
        raise ConfigError(config.source, [f"ProxyJump chain longer than {MAX_HOPS} hops: refused"])
    user, host, port = parse_jump(parts[-1])
    found = config.resolve(host, user, port)
    before = ",".join(parts[:-1]) if len(parts) > 1 else found.get("proxyjump", ["none"])[0]
    first = hop(config, cfg, host, user, port, found)
    if len(parts) == 1:  # reached by its own means: its ProxyCommand, if it has one (else it has a ProxyJump)
        first = with_proxy_command(config, found, first)
    return [*jump_chain(config, cfg, before, depth + 1), first]  # one hop placed: `before` holds the others


def with_proxy_command(config: SshConfig, found: Resolved, to: Hop) -> Hop:
    """The hop with its ProxyCommand, if the config gives it one: only where the inventory allows local commands."""
    command = found.get("proxycommand", ["none"])[0]
    if command.lower() == "none":
        return to
    if not config.allow_local_commands:
        raise ConfigError(config.source, [f"Host {to.alias}: ProxyCommand runs a local command ({command[:100]!a}); "
                                          "refused. Set ssh.allow_local_commands: true in the inventory to allow "
                                          "it (or use ProxyJump)"])
    tokens = {"%": "%", "h": to.hostname, "n": to.alias, "p": str(to.port), "r": to.user}

    def one(m: re.Match[str]) -> str:
        if m.group(1) not in tokens:
            raise ConfigError(config.source, [f"Host {to.alias}: ProxyCommand uses the token %{m.group(1)}, which "
                                              "ssh does not expand there (it takes %%, %h, %n, %p and %r)"])
        return tokens[m.group(1)]

    return replace(to, proxy_command=re.sub(r"%(.)", one, command))


def proxy_argv(command: str) -> list[str]:
    """How ssh runs a ProxyCommand: `exec` by the user's shell, so no shell lingers between the two ends."""
    return [os.environ.get("SHELL") or "/bin/sh", "-c", f"exec {command}"]


def route(config: SshConfig, cfg: SshSection, node: NodeEntry) -> Route:
    """How to reach the node's host: the target and the jump hosts before it."""
    explicit = cfg.model_fields_set
    user = node.ssh_user or (cfg.user if "user" in explicit else None)
    port = node.ssh_port or (cfg.port if "port" in explicit else None)
    found = config.resolve(node.host, user, port)
    target = with_proxy_command(config, found, hop(config, cfg, node.host, user, port, found))
    if not found:  # no config read: the inventory alone
        return Route(target=target)
    jumps = jump_chain(config, cfg, found.get("proxyjump", ["none"])[0])
    known = tuple(found.get("userknownhostsfile", [""])[0].split())
    if known == tuple(config.defaults().get("userknownhostsfile", [""])[0].split()):
        known = ()  # OpenSSH's defaults: the inventory's known_hosts stands
    return Route(target=target, jumps=tuple(jumps), known_hosts=known)
