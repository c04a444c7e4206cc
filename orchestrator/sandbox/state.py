"""The sandbox's state file: what was started, so that `down` can stop exactly that, by PID."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal

from orchestrator.config.loader import read_bytes_of
from orchestrator.errors import ConfigError, SandboxError
from orchestrator.paths import existing_private_dir, write_atomically

STATE_VERSION = 1
SandboxMode = Literal["netns", "local"]  # each node in a test host of its own, or all on 127.0.0.1
SandboxProduct = Literal["elasticsearch", "opensearch", "riak"]


@dataclass
class HostRecord:
    name: str
    zone: str
    address: str
    http_url: str
    netns: str | None = None
    veth: str | None = None
    unshare_pid: int | None = None
    init_pid: int | None = None
    ssh_address: str | None = None  # where its sshd listens, when not `address` (behind the bastion)


@dataclass
class SandboxState:
    mode: SandboxMode
    es_version: str
    cluster_name: str
    zones: int
    hosts: list[HostRecord] = field(default_factory=list)
    started_at: float = 0.0
    ready: bool = False
    version: int = STATE_VERSION
    product: SandboxProduct = "elasticsearch"
    versions: list[str] = field(default_factory=list)  # Elasticsearch versions each host can switch to
    bastion: HostRecord | None = None  # `up --bastion`: the only way SSH reaches the node hosts
    secured: bool = False  # Elasticsearch's security on: TLS with the sandbox CA, users, an API key
    packages: bool = False  # Elasticsearch installed on each host from the sandbox's apt repository (debs.py)
    host_cpus: float = 0.0  # each test host's CPU quota (`up --host-cpus`), 0: none

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)

    @classmethod
    def from_json(cls, text: str) -> SandboxState:
        raw = json.loads(text)
        if raw.get("version") != STATE_VERSION:
            raise SandboxError(f"sandbox state has format version {raw.get('version')}, this tool reads "
                               f"{STATE_VERSION}: run `orchestrate sandbox down` with the tool that started it")
        raw["hosts"] = [HostRecord(**h) for h in raw["hosts"]]
        raw["bastion"] = HostRecord(**raw["bastion"]) if raw.get("bastion") else None
        return cls(**raw)


def load(path: Path) -> SandboxState | None:
    """The state `up` saved: this user's own file in a directory only this user can change, since `down`
    signals the PIDs it lists (a planted one would have root end any process)."""
    if existing_private_dir(path.parent) is None or not path.exists():
        return None
    try:
        return SandboxState.from_json(read_bytes_of(path, private=True).decode())
    except ConfigError as exc:
        raise SandboxError(f"sandbox state {path}: {'; '.join(exc.problems)}") from None
    except (ValueError, TypeError, KeyError) as exc:
        raise SandboxError(f"sandbox state {path} is unreadable ({exc}); remove it after checking "
                           "that no sandbox processes are left") from exc


def save(path: Path, state: SandboxState) -> None:
    write_atomically(path, state.to_json())
