"""Where the sandbox keeps its files. One place, so the host side and the root side agree."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from orchestrator.paths import config_home, state_root


@dataclass(frozen=True)
class SandboxPaths:
    root: Path

    @classmethod
    def default(cls) -> SandboxPaths:
        return cls(state_root() / "sandbox")

    @property
    def state_file(self) -> Path:
        return self.root / "state.json"

    @property
    def inventory(self) -> Path:
        return self.root / "inventory.yaml"

    @property
    def published_inventory(self) -> Path:
        """Where `--cluster sandbox` finds it: the user's clusters, like any other cluster's inventory."""
        return config_home() / "clusters" / "sandbox.yaml"

    @property
    def ssh_dir(self) -> Path:
        return self.root / "ssh"

    @property
    def ssh_key(self) -> Path:
        return self.ssh_dir / "id_ed25519"

    @property
    def known_hosts(self) -> Path:
        return self.ssh_dir / "known_hosts"

    @property
    def authorized_keys(self) -> Path:
        return self.ssh_dir / "authorized_keys"

    @property
    def host_ca(self) -> Path:
        """The key that signs every test host's host key (an OpenSSH host certificate)."""
        return self.ssh_dir / "host_ca"

    @property
    def known_hosts_ca(self) -> Path:
        """A known_hosts file that lists no host, only the `@cert-authority` line for ``host_ca``."""
        return self.ssh_dir / "known_hosts_ca"

    @property
    def ssh_config(self) -> Path:
        return self.ssh_dir / "config"

    @property
    def tls_dir(self) -> Path:
        """The secured sandbox's CA (ca.crt is what clients trust; ca.key never leaves this machine)."""
        return self.root / "tls"

    @property
    def ca_cert(self) -> Path:
        return self.tls_dir / "ca.crt"

    @property
    def secrets_dir(self) -> Path:
        """Passwords and the API key of a secured sandbox, one per file, readable by root only."""
        return self.root / "secrets"

    def secret(self, name: str) -> Path:
        return self.secrets_dir / name

    def host(self, name: str) -> HostPaths:
        return HostPaths(self.root / "hosts" / name)


@dataclass(frozen=True)
class HostPaths:
    """One test host's private files. The host sees this directory at the same path (bound into it)."""

    root: Path

    @property
    def spec(self) -> Path:
        return self.root / "host.json"

    @property
    def knobs(self) -> Path:
        return self.root / "knobs"

    @property
    def rootfs_upper(self) -> Path:
        """What this host wrote over the shared Debian root file system (its own disk): files put here
        before the first boot are the host's own (sshd's settings, units, its name)."""
        return self.root / "rootfs"

    @property
    def rootfs_work(self) -> Path:
        return self.root / "rootfs.work"

    @property
    def rootfs_mount(self) -> Path:
        """Where the host's root is mounted, in its supervisor's mount namespace only."""
        return self.root / "rootfs.mount"

    @property
    def etc_upper(self) -> Path:
        return self.rootfs_upper / "etc"

    @property
    def bin_upper(self) -> Path:
        return self.rootfs_upper / "usr" / "local" / "bin"

    @property
    def sshd_dir(self) -> Path:
        return self.root / "sshd"

    @property
    def node_dir(self) -> Path:
        return self.root / "node"

    @property
    def units_dir(self) -> Path:
        """Unit files for local mode; in a netns host they live in its own /etc/systemd/system."""
        return self.root / "units"

    @property
    def run_dir(self) -> Path:
        return self.root / "run"

    @property
    def ready_flag(self) -> Path:
        return self.root / "init.ready"

    @property
    def init_log(self) -> Path:
        return self.root / "init.log"
