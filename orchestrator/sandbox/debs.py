"""Debian packages of the sandbox's Elasticsearch versions, and the apt repository that serves them to
the test hosts (`sandbox up --packages`), so that `orchestrate upgrade` runs a real
`apt-get install elasticsearch=VERSION`.

Each package is built from an assembled home (Maven Central's jars, the sandbox's launcher) in the
official layout: the home in /usr/share/elasticsearch, the configuration in /etc/elasticsearch (its
files conffiles: an operator's change survives an upgrade), data in /var/lib/elasticsearch, logs in
/var/log/elasticsearch, the unit in /lib/systemd/system, the service account made by its preinst.
"""

from __future__ import annotations

import hashlib
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path

from orchestrator.errors import SandboxError
from orchestrator.sandbox.assemble import EsHome
from orchestrator.sandbox.hosts import node_unit_text
from orchestrator.sandbox.node import LOG4J2, jvm_command, node_environment

DEB_LAYOUT = 1  # raise when what a package holds changes: packages are rebuilt
PKG_HOME = "/usr/share/elasticsearch"
PKG_CONF = "/etc/elasticsearch"
PKG_DATA = "/var/lib/elasticsearch"
PKG_LOGS = "/var/log/elasticsearch"
ENTRYPOINT = f"{PKG_HOME}/bin/systemd-entrypoint"
HEAP_VARIABLE = "ES_HEAP_MB"  # in /etc/default/elasticsearch, read by the unit (EnvironmentFile)
_NODE = Path("/sandbox-node-dir")  # stands for a node's directory while the command line is written

PREINST = """#!/bin/sh
set -e
# As the official package: the service account, made once.
getent group elasticsearch >/dev/null || addgroup --quiet --system elasticsearch
id elasticsearch >/dev/null 2>&1 || adduser --quiet --system --no-create-home --home /nonexistent \\
    --ingroup elasticsearch --disabled-password --shell /bin/false elasticsearch
exit 0
"""
POSTINST = f"""#!/bin/sh
set -e
chown -R elasticsearch:elasticsearch {PKG_DATA} {PKG_LOGS}
chown root:elasticsearch {PKG_CONF}
chmod 2750 {PKG_CONF}
# As the official package: a running service is not restarted by an upgrade (the operator's tool does it).
if [ -d /run/systemd/system ]; then systemctl daemon-reload || true; fi
exit 0
"""
PRERM = """#!/bin/sh
set -e
if [ "$1" = remove ] && [ -d /run/systemd/system ]; then systemctl stop elasticsearch.service || true; fi
exit 0
"""


def entrypoint_text(home: EsHome) -> str:
    """The node's command line for the packaged layout (the sandbox's launcher stands in for the CLI)."""
    swaps = [(f"{_NODE}/config", PKG_CONF), (f"{_NODE}/tmp", f"{PKG_DATA}/tmp"), (str(_NODE), PKG_DATA),
             (str(home.path), PKG_HOME), ("-Xms1m", f"-Xms${{{HEAP_VARIABLE}}}m"),
             ("-Xmx1m", f"-Xmx${{{HEAP_VARIABLE}}}m")]

    def packaged(value: str) -> str:
        for old, new in swaps:
            value = value.replace(old, new)
        return value

    env = {k: packaged(v) for k, v in node_environment(home, _NODE).items()}
    command = [packaged(c) for c in jvm_command(home, _NODE, 1)]
    words = [f"{k}={shlex.quote(v)}" for k, v in env.items()] + [
        c if "${" in c else shlex.quote(c) for c in command]
    return "\n".join([
        "#!/bin/sh",
        f"# Starts Elasticsearch {home.version} (sandbox package); heap from {HEAP_VARIABLE}.",
        f': "${{{HEAP_VARIABLE}:=256}}"',
        f"mkdir -p {PKG_DATA}/tmp",
        "exec env -i " + " ".join(words), ""])


def control_text(version: str, installed_kb: int) -> str:
    return "\n".join([
        "Package: elasticsearch", f"Version: {version}", "Architecture: all",
        "Maintainer: orchestrator sandbox <sandbox@localhost>", f"Installed-Size: {installed_kb}",
        "Depends: adduser", "Section: database", "Priority: optional",
        f"Description: Elasticsearch {version} (orchestrator sandbox package)",
        " Built by `orchestrate sandbox up --packages` from the jars on Maven Central, in the official",
        " package's layout.", ""])


def default_config(version: str) -> str:
    return (f"# ======================== Elasticsearch {version} configuration =========================\n"
            "# The sandbox writes each node's own settings over this file; an operator's change is kept\n"
            "# across upgrades (a conffile).\n")


def ensure_deb(home: EsHome, cache: Path) -> Path:
    """The package of ``home`` (built once, cached beside the homes)."""
    where = cache / "debs" / f"{home.path.name}-v{DEB_LAYOUT}" / f"elasticsearch_{home.version}_all.deb"
    if where.exists():
        return where
    where.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=where.parent) as tmp:
        root = Path(tmp) / "root"
        shutil.copytree(home.path, root / PKG_HOME.lstrip("/"), symlinks=True)
        entry = root / ENTRYPOINT.lstrip("/")
        entry.parent.mkdir(parents=True, exist_ok=True)
        entry.write_text(entrypoint_text(home))
        entry.chmod(0o755)
        conf = root / PKG_CONF.lstrip("/")
        conf.mkdir(parents=True)
        (conf / "elasticsearch.yml").write_text(default_config(home.version))
        (conf / "log4j2.properties").write_text(LOG4J2)
        for d in (PKG_DATA, PKG_LOGS):
            (root / d.lstrip("/")).mkdir(parents=True)
        unit = root / "lib" / "systemd" / "system" / "elasticsearch.service"
        unit.parent.mkdir(parents=True)
        text = node_unit_text("elasticsearch", ENTRYPOINT)
        unit.write_text(text.replace("[Service]\n", "[Service]\nEnvironmentFile=-/etc/default/elasticsearch\n", 1))
        debian = root / "DEBIAN"
        debian.mkdir()
        size_kb = sum(f.stat().st_size for f in root.rglob("*") if f.is_file()) // 1024
        (debian / "control").write_text(control_text(home.version, size_kb))
        (debian / "conffiles").write_text(f"{PKG_CONF}/elasticsearch.yml\n{PKG_CONF}/log4j2.properties\n")
        for name, text in (("preinst", PREINST), ("postinst", POSTINST), ("prerm", PRERM)):
            (debian / name).write_text(text)
            (debian / name).chmod(0o755)
        built = Path(tmp) / where.name
        proc = subprocess.run(["dpkg-deb", "--root-owner-group", "-Zgzip", "-z1", "--build", str(root), str(built)],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            raise SandboxError(f"building the Elasticsearch {home.version} package failed: {proc.stderr.strip()}")
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
