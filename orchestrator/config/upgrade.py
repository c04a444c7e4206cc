"""The inventory's `upgrade:` section: how a node's new version is installed, and the upgrade's checks.

Each install method renders to shell commands run on the node's host while its service is stopped
(`restart/install.py`), each idempotent so that a resumed run may run them again. ``{version}`` is
the target version and ``{node}`` the node's inventory name, both shell-quoted where they are used.
"""

from __future__ import annotations

import re
import shlex
from typing import Annotated, Literal

from pydantic import Field

from orchestrator.config.model_base import ONE_LINE, Model

PLACEHOLDER = re.compile(r"\{(version|node)\}")


def fill(template: str, version: str, node: str) -> str:
    """The template with {version} and {node} replaced by shell-quoted values (nothing else is touched)."""
    return PLACEHOLDER.sub(lambda m: shlex.quote(version if m.group(1) == "version" else node), template)


def fill_path(template: str, version: str, node: str) -> str:
    """A path template, filled and then quoted as a whole (a path is one word)."""
    return shlex.quote(PLACEHOLDER.sub(lambda m: version if m.group(1) == "version" else node, template))


class PackageInstall(Model):
    """The distribution's package manager, at the exact version, keeping the node's existing configuration."""

    method: Literal["package"] = "package"
    manager: Literal["apt", "yum", "dnf"] = "apt"
    package: str = Field("elasticsearch", pattern=r"^[a-z0-9][a-z0-9+.-]{0,100}$")

    def check(self, version: str, node: str) -> str:
        v = shlex.quote(version)
        if self.manager == "apt":
            # A held package (apt-mark hold) is one apt-get refuses to change: said before any node stops.
            return (f"apt-cache show {self.package}={v} >/dev/null && {{ ! apt-mark showhold | grep -qx "
                    f"{self.package} || {{ echo '{self.package} is held (apt-mark hold): apt-get will not "
                    f"install another version; `apt-mark unhold {self.package}` first' >&2; exit 1; }}; }}")
        return f"{self.manager} -q list --showduplicates {self.package}-{v} >/dev/null"

    def commands(self, version: str, node: str) -> list[str]:
        v = shlex.quote(version)
        if self.manager == "apt":
            # confold: keep the node's elasticsearch.yml and jvm.options; a new default goes beside it.
            return [f"DEBIAN_FRONTEND=noninteractive apt-get install -y -q --allow-downgrades "
                    f"-o Dpkg::Options::=--force-confold {self.package}={v}"]
        # yum and dnf keep a changed config file and write the new default as .rpmnew.
        return [f"{self.manager} -y -q install {self.package}-{v}"]

    def describe(self, version: str = "", node: str = "") -> str:
        return f"{self.manager} package {self.package}"


class SwitchInstall(Model):
    """Versions side by side, the running one chosen by a symbolic link: unpack the new one next to the
    old (when ``unpack`` names an archive and the directory is not there yet), then move the link."""

    method: Literal["switch"] = "switch"
    target: ONE_LINE  # e.g. /opt/elasticsearch-{version}
    link: ONE_LINE  # e.g. /opt/elasticsearch (what the service runs)
    unpack: ONE_LINE | None = None  # e.g. /srv/dist/elasticsearch-{version}-linux-x86_64.tar.gz

    def check(self, version: str, node: str) -> str:
        target = fill_path(self.target, version, node)
        if self.unpack is None:
            return f"test -e {target}"
        return f"test -e {target} || test -r {fill_path(self.unpack, version, node)}"

    def commands(self, version: str, node: str) -> list[str]:
        target = fill_path(self.target, version, node)
        out = []
        if self.unpack is not None:
            archive = fill_path(self.unpack, version, node)
            out.append(f"test -e {target} || tar -xzf {archive} -C \"$(dirname {target})\"")
        # ln -sfn on a link to a directory replaces the link, never writes inside the old version.
        out.append(f"ln -sfn {target} {fill_path(self.link, version, node)}")
        return out

    def describe(self, version: str = "{version}", node: str = "{node}") -> str:
        """The link and its target, filled for a node and version when given."""
        def filled(t: str) -> str:
            return PLACEHOLDER.sub(lambda m: version if m.group(1) == "version" else node, t)

        return f"link {filled(self.link)} -> {filled(self.target)}"


class CommandsInstall(Model):
    """Commands of your own (a configuration-management run, a script); each must be idempotent."""

    method: Literal["commands"] = "commands"
    run: list[ONE_LINE] = Field(min_length=1, max_length=20)
    check: ONE_LINE | None = None  # run at preflight: exit 0 when the version can be installed

    def check_command(self, version: str, node: str) -> str | None:
        return fill(self.check, version, node) if self.check else None

    def commands(self, version: str, node: str) -> list[str]:
        return [fill(c, version, node) for c in self.run]

    def describe(self, version: str = "", node: str = "") -> str:
        return f"{len(self.run)} command(s) of the inventory"


InstallMethod = Annotated[PackageInstall | SwitchInstall | CommandsInstall, Field(discriminator="method")]


def check_command(method: PackageInstall | SwitchInstall | CommandsInstall, version: str, node: str) -> str | None:
    """The preflight command that shows the version can be installed on the node's host (None: none)."""
    if isinstance(method, CommandsInstall):
        return method.check_command(version, node)
    return method.check(version, node)


class UpgradeSection(Model):
    install: InstallMethod | None = None
    # Plugins are reinstalled at the new version with this command's `install --batch NAME`.
    plugin_cli: str = Field("/usr/share/elasticsearch/bin/elasticsearch-plugin", pattern=r"^/[^\x00\s]+$",
                            max_length=4001)
    # Plugins besides the official ones that an upgrade may reinstall by name (the cluster's own list of
    # plugins is never trusted alone: shards/plugins.py).
    allowed_plugins: tuple[Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9-]{0,63}$")], ...] = Field((), max_length=200)
    snapshot_max_age_h: float = Field(24, gt=0, le=24 * 365)  # the newest successful snapshot may be this old
    playbook: str | None = Field(None, pattern=r"^[A-Za-z0-9_./-]+$")  # None: the product's upgrade procedure
