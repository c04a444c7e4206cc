"""Where and how to reach a host over SSH, as the operator's OpenSSH client config says (`~/.ssh/config`,
or `ssh.config_file`): Host aliases, HostName, User, Port, IdentityFile, UserKnownHostsFile and
ProxyJump (chained: `ProxyJump a,b` goes through a, then b). Pure: the config's text in, routes out.

Precedence, most specific first: the node's own `ssh_user`/`ssh_port` in the inventory, then what the
inventory's `ssh:` section sets explicitly, then the SSH config, then the inventory's defaults.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator.config.model import NodeEntry, SshSection
from orchestrator.errors import ConfigError


@dataclass(frozen=True)
class Hop:
    """One SSH connection: the address to connect to, as whom, with which keys."""

    alias: str  # the name it was asked for (for messages)
    hostname: str
    port: int
    user: str
    key_files: tuple[str, ...] = ()

    def describe(self) -> str:
        return f"{self.user}@{self.hostname}:{self.port}"


@dataclass(frozen=True)
class Route:
    target: Hop
    jumps: tuple[Hop, ...] = ()  # connected in this order, each through the one before
    known_hosts: tuple[str, ...] = ()  # the config's UserKnownHostsFile for this host, if any

    def describe(self) -> str:
        via = f" via {' -> '.join(j.describe() for j in self.jumps)}" if self.jumps else ""
        return f"{self.target.describe()}{via}"


@dataclass
class SshConfig:
    """A parsed client config (empty: no config)."""

    text: str = ""
    source: str = ""
    _parsed: Any = field(default=None, repr=False)

    @classmethod
    def load(cls, cfg: SshSection) -> SshConfig:
        """The inventory's `ssh.config_file`, or ~/.ssh/config when it exists (unless `read_config: false`)."""
        if not cfg.read_config:
            return cls()
        path = Path(cfg.config_file).expanduser() if cfg.config_file else Path("~/.ssh/config").expanduser()
        if cfg.config_file is None and not path.is_file():
            return cls()
        try:
            return cls(path.read_text(errors="replace"), str(path))
        except OSError as exc:
            raise ConfigError("inventory", [f"ssh.config_file: cannot read {path}: {exc.strerror}"]) from None

    def lookup(self, alias: str) -> dict[str, Any]:
        if not self.text:
            return {}
        import paramiko

        if self._parsed is None:
            self._parsed = paramiko.SSHConfig.from_text(self.text)
        found = dict(self._parsed.lookup(alias))
        return found if any(k != "hostname" for k in found) or found.get("hostname") != alias else {}


def parse_jump(spec: str) -> tuple[str | None, str, int | None]:
    """`[user@]host[:port]` -> (user, host, port)."""
    user, _, rest = spec.rpartition("@")
    host, port = rest, None
    if rest.startswith("["):  # [v6::addr]:port
        host, _, after = rest[1:].partition("]")
        port = int(after[1:]) if after.startswith(":") and after[1:].isdigit() else None
    elif rest.count(":") == 1:
        host, _, p = rest.partition(":")
        port = int(p) if p.isdigit() else None
    return user or None, host, port


def hop(config: SshConfig, cfg: SshSection, alias: str, user: str | None = None, port: int | None = None) -> Hop:
    found = config.lookup(alias)
    explicit = cfg.model_fields_set
    chosen_user = user or (cfg.user if "user" in explicit else found.get("user") or cfg.user)
    chosen_port = port or (cfg.port if "port" in explicit else int(found.get("port") or cfg.port))
    keys = (str(cfg.key_file),) if cfg.key_file else tuple(str(Path(k).expanduser())
                                                           for k in found.get("identityfile") or ())
    return Hop(alias=alias, hostname=str(found.get("hostname") or alias), port=chosen_port, user=chosen_user,
               key_files=keys)


def route(config: SshConfig, cfg: SshSection, node: NodeEntry) -> Route:
    """How to reach the node's host: the target and the jump hosts before it."""
    found = config.lookup(node.host)
    if "proxycommand" in found:
        raise ConfigError(config.source or "ssh config", [
            f"Host {node.host}: ProxyCommand is not supported; use ProxyJump"])
    target = hop(config, cfg, node.host, node.ssh_user, node.ssh_port)
    jumps: list[Hop] = []
    spec = str(found.get("proxyjump") or "")
    if spec and spec.lower() != "none":
        for part in spec.split(","):
            user, host, port = parse_jump(part.strip())
            jumps.append(hop(config, cfg, host, user, port))
    known = tuple(str(Path(p).expanduser()) for p in str(found.get("userknownhostsfile", "")).split() if p)
    return Route(target=target, jumps=tuple(jumps), known_hosts=known)
