"""Debian packages of the sandbox's Elasticsearch and OpenSearch versions, and the apt repository that
serves them to the test hosts (`sandbox up --packages`), so that `orchestrate upgrade` runs a real
`apt-get install elasticsearch=VERSION` (or `opensearch=VERSION`).

Each package is built from an assembled home (Maven Central's jars, the sandbox's launcher) in the
official layout, PRODUCT being `elasticsearch` or `opensearch`: the home in /usr/share/PRODUCT, the
configuration in /etc/PRODUCT (its files conffiles: an operator's change survives an upgrade), data in
/var/lib/PRODUCT, logs in /var/log/PRODUCT, the unit in /lib/systemd/system, the service account made
by its preinst.
"""

from __future__ import annotations

import hashlib
import shlex
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from orchestrator.errors import SandboxError
from orchestrator.sandbox.assemble import EsHome
from orchestrator.sandbox.host_setup import node_unit_text
from orchestrator.sandbox.node import jvm_command, log4j2_text, node_environment, opensearch_jvm_command
from orchestrator.sandbox.opensearch_home import OpenSearchHome

Home = EsHome | OpenSearchHome

DEB_LAYOUT = 2  # raise when what a package holds changes: packages are rebuilt
HEAP_VARIABLE = "SANDBOX_HEAP_MB"  # in /etc/default/PRODUCT, read by the unit (EnvironmentFile)
_NODE = Path("/sandbox-node-dir")  # stands for a node's directory while the command line is written


@dataclass(frozen=True)
class Layout:
    """Where a product's package puts things, as the official package does."""

    product: str  # the package's, the unit's and the service account's name

    @classmethod
    def of(cls, home: Home) -> Layout:
        return cls("opensearch" if isinstance(home, OpenSearchHome) else "elasticsearch")

    @property
    def home(self) -> str:
        return f"/usr/share/{self.product}"

    @property
    def conf(self) -> str:
        return f"/etc/{self.product}"

    @property
    def data(self) -> str:
        return f"/var/lib/{self.product}"

    @property
    def logs(self) -> str:
        return f"/var/log/{self.product}"

    @property
    def entrypoint(self) -> str:
        return f"{self.home}/bin/systemd-entrypoint"

    @property
    def label(self) -> str:
        return "OpenSearch" if self.product == "opensearch" else "Elasticsearch"


def preinst(layout: Layout) -> str:
    account = layout.product
    return f"""#!/bin/sh
set -e
# As the official package: the service account, made once.
getent group {account} >/dev/null || addgroup --quiet --system {account}
id {account} >/dev/null 2>&1 || adduser --quiet --system --no-create-home --home /nonexistent \\
    --ingroup {account} --disabled-password --shell /bin/false {account}
exit 0
"""


def postinst(layout: Layout) -> str:
    account = layout.product
    # As each official package: Elasticsearch's keeps its configuration root's, readable by the group;
    # OpenSearch's gives it to the account (the node writes its keystore there at start).
    conf_owner = f"chown root:{account} {layout.conf}\nchmod 2750 {layout.conf}" if account == "elasticsearch" \
        else f"chown -R {account}:{account} {layout.conf}"
    return f"""#!/bin/sh
set -e
chown -R {account}:{account} {layout.data} {layout.logs}
{conf_owner}
# As the official package: a running service is not restarted by an upgrade (the operator's tool does it).
if [ -d /run/systemd/system ]; then systemctl daemon-reload || true; fi
exit 0
"""


def prerm(layout: Layout) -> str:
    return f"""#!/bin/sh
set -e
if [ "$1" = remove ] && [ -d /run/systemd/system ]; then systemctl stop {layout.product}.service || true; fi
exit 0
"""


def entrypoint_text(home: Home) -> str:
    """The node's command line for the packaged layout (the sandbox's launcher stands in for the CLI)."""
    layout = Layout.of(home)
    swaps = [(f"{_NODE}/config", layout.conf), (f"{_NODE}/tmp", f"{layout.data}/tmp"), (str(_NODE), layout.data),
             (str(home.path), layout.home), ("-Xms1m", f"-Xms${{{HEAP_VARIABLE}}}m"),
             ("-Xmx1m", f"-Xmx${{{HEAP_VARIABLE}}}m")]

    def packaged(value: str) -> str:
        for old, new in swaps:
            value = value.replace(old, new)
        return value

    env = {k: packaged(v) for k, v in node_environment(home, _NODE).items()}
    jvm = opensearch_jvm_command(home, _NODE, 1) if isinstance(home, OpenSearchHome) else jvm_command(home, _NODE, 1)
    command = [packaged(c) for c in jvm]
    words = [f"{k}={shlex.quote(v)}" for k, v in env.items()] + [
        c if "${" in c else shlex.quote(c) for c in command]
    return "\n".join([
        "#!/bin/sh",
        f"# Starts {layout.label} {home.version} (sandbox package); heap from {HEAP_VARIABLE}.",
        f': "${{{HEAP_VARIABLE}:=256}}"',
        f"mkdir -p {layout.data}/tmp",
        "exec env -i " + " ".join(words), ""])


def control_text(layout: Layout, version: str, installed_kb: int) -> str:
    return "\n".join([
        f"Package: {layout.product}", f"Version: {version}", "Architecture: all",
        "Maintainer: orchestrator sandbox <sandbox@localhost>", f"Installed-Size: {installed_kb}",
        "Depends: adduser", "Section: database", "Priority: optional",
        f"Description: {layout.label} {version} (orchestrator sandbox package)",
        " Built by `orchestrate sandbox up --packages` from the jars on Maven Central, in the official",
        " package's layout.", ""])


def default_config(layout: Layout, version: str) -> str:
    return (f"# ======================== {layout.label} {version} configuration =========================\n"
            "# The sandbox writes each node's own settings over this file; an operator's change is kept\n"
            "# across upgrades (a conffile).\n")


def ensure_deb(home: Home, cache: Path) -> Path:
    """The package of ``home`` (built once, cached beside the homes)."""
    layout = Layout.of(home)
    # Keyed by the home's own layout too (its .complete marker): a home rebuilt differently is packaged again.
    marker = home.path / ".complete"
    built_from = marker.read_text().strip() if marker.is_file() else "0"
    where = (cache / "debs" / f"{home.path.name}-h{built_from}-v{DEB_LAYOUT}" /
             f"{layout.product}_{home.version}_all.deb")
    if where.exists():
        return where
    where.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=where.parent) as tmp:
        root = Path(tmp) / "root"
        shutil.copytree(home.path, root / layout.home.lstrip("/"), symlinks=True)
        entry = root / layout.entrypoint.lstrip("/")
        entry.parent.mkdir(parents=True, exist_ok=True)
        entry.write_text(entrypoint_text(home))
        entry.chmod(0o755)
        conf = root / layout.conf.lstrip("/")
        conf.mkdir(parents=True)
        (conf / f"{layout.product}.yml").write_text(default_config(layout, home.version))
        (conf / "log4j2.properties").write_text(log4j2_text(layout.product))
        for d in (layout.data, layout.logs):
            (root / d.lstrip("/")).mkdir(parents=True)
        unit = root / "lib" / "systemd" / "system" / f"{layout.product}.service"
        unit.parent.mkdir(parents=True)
        text = node_unit_text(layout.product, layout.entrypoint)
        unit.write_text(text.replace("[Service]\n", f"[Service]\nEnvironmentFile=-/etc/default/{layout.product}\n", 1))
        debian = root / "DEBIAN"
        debian.mkdir()
        size_kb = sum(f.stat().st_size for f in root.rglob("*") if f.is_file()) // 1024
        (debian / "control").write_text(control_text(layout, home.version, size_kb))
        (debian / "conffiles").write_text(f"{layout.conf}/{layout.product}.yml\n{layout.conf}/log4j2.properties\n")
        for name, script in (("preinst", preinst), ("postinst", postinst), ("prerm", prerm)):
            (debian / name).write_text(script(layout))
            (debian / name).chmod(0o755)
        built = Path(tmp) / where.name
        proc = subprocess.run(["dpkg-deb", "--root-owner-group", "-Zgzip", "-z1", "--build", str(root), str(built)],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            raise SandboxError(f"building the {layout.label} {home.version} package failed: {proc.stderr.strip()}")
        built.rename(where)
    return where


def write_repository(repo: Path, debs: list[Path]) -> None:
    """A flat apt repository (`deb [trusted=yes] file:REPO ./`): the packages and their index."""
    shutil.rmtree(repo, ignore_errors=True)
    repo.mkdir(parents=True)
    entries = []
    for deb in debs:
        local = repo / deb.name
        try:
            local.hardlink_to(deb)
        except OSError:
            shutil.copy2(deb, local)
        control = subprocess.run(["dpkg-deb", "--field", str(local)], capture_output=True, text=True, check=True).stdout
        data = local.read_bytes()
        entries.append(control.rstrip("\n") + f"\nFilename: ./{deb.name}\nSize: {len(data)}\n"
                       f"SHA256: {hashlib.sha256(data).hexdigest()}\n")
    (repo / "Packages").write_text("\n".join(entries))
