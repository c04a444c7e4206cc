"""Assembling a runnable Elasticsearch home from Maven Central artifacts, once, into a cache.

The official tarball cannot be downloaded here; Maven Central has the server, the netty transport,
the entitlement bridge and Elasticsearch's security (x-pack-core, x-pack-security). What it lacks
(the launcher, the entitlement agent, the ansi console, and the analysis the security index needs)
is replaced by tiny classes compiled from ``java/src`` on first use.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from orchestrator.errors import SandboxError
from orchestrator.sandbox.java_home import find_java_home

JAVA_SRC = Path(__file__).parent / "java" / "src"
LIBZSTD = Path("/usr/lib/x86_64-linux-gnu/libzstd.so.1")
MODULE_JAR_PREFIXES = ("netty-", "transport-netty4-", "elasticsearch-ssl-config-")
NOFILE_SHIM_SRC = Path(__file__).parent / "host_files" / "nofile_floor.c"
LAYOUT_VERSION = "3"

POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>orchestrator.sandbox</groupId><artifactId>es-home</artifactId><version>1</version>
  <dependencies>
    <dependency><groupId>org.elasticsearch</groupId><artifactId>elasticsearch</artifactId><version>{v}</version></dependency>
    <dependency><groupId>org.elasticsearch.plugin</groupId><artifactId>transport-netty4</artifactId><version>{v}</version></dependency>
    <dependency><groupId>org.elasticsearch</groupId><artifactId>elasticsearch-entitlement-bridge</artifactId><version>{v}</version></dependency>
  </dependencies>
</project>
"""

# x-pack-security's POM names artifacts Maven Central does not carry: OpenSAML 4.3 and Shibboleth's
# java-support (they live in Shibboleth's own repository), Elastic's patched OpenSAML security API,
# and, for 9.x, the x-pack-core templates. Security's module descriptor requires the OpenSAML
# modules, so they must be present: OpenSAML 4.0.1 (on Central) stands in; SAML itself is never
# configured in the sandbox. The server's own jars come from the server's POM.
XPACK_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>orchestrator.sandbox</groupId><artifactId>es-xpack</artifactId><version>1</version>
  <dependencies>
    <dependency><groupId>org.elasticsearch.plugin</groupId><artifactId>{artifact}</artifactId><version>{v}</version>
      <exclusions>
        <exclusion><groupId>org.opensaml</groupId><artifactId>*</artifactId></exclusion>
        <exclusion><groupId>net.shibboleth.utilities</groupId><artifactId>*</artifactId></exclusion>
        <exclusion><groupId>org.elasticsearch.plugin</groupId><artifactId>es-opensaml-security-api</artifactId></exclusion>
        <exclusion><groupId>org.elasticsearch.plugin</groupId><artifactId>x-pack-template-resources</artifactId></exclusion>
        <exclusion><groupId>org.elasticsearch</groupId><artifactId>elasticsearch</artifactId></exclusion>
      </exclusions>
    </dependency>
  </dependencies>
</project>
"""
OPENSAML_VERSION = "4.0.1"
OPENSAML_ARTIFACTS = ("core", "saml-api", "saml-impl", "messaging-api", "messaging-impl", "security-api",
                      "security-impl", "profile-api", "profile-impl", "xmlsec-api", "xmlsec-impl", "soap-api",
                      "soap-impl", "storage-api", "storage-impl")
# x-pack-template-resources is published for 8.x only; 9.x reads index templates the sandbox never uses.
TEMPLATES_FALLBACK_VERSION = "8.19.21"
# Jars that would put one module (or package) twice on a plugin's module path.
XPACK_SHADOWED = ("jakarta.activation-api-", "jcip-annotations-1.0.jar")


def _jars_only_pom(coordinates: list[tuple[str, str, str]]) -> str:
    """A POM that fetches exactly these jars, none of their dependencies."""
    deps = "".join(f"<dependency><groupId>{g}</groupId><artifactId>{a}</artifactId><version>{v}</version>"
                   "<exclusions><exclusion><groupId>*</groupId><artifactId>*</artifactId></exclusion></exclusions>"
                   "</dependency>" for g, a, v in coordinates)
    return ('<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
            "<groupId>orchestrator.sandbox</groupId><artifactId>es-extras</artifactId><version>1</version>"
            f"<dependencies>{deps}</dependencies></project>")


@dataclass(frozen=True)
class AssembledHome:
    """A ready product home in the cache, shared read-only by every node of one version."""

    version: str
    path: Path
    java_home: Path

    @property
    def launcher_dir(self) -> Path:
        return self.path / "sandbox-launcher"

    @property
    def nofile_shim(self) -> Path:
        return self.launcher_dir / "libnofile_floor.so"


class EsHome(AssembledHome):
    """An Elasticsearch home: its launcher, agent and console stand-ins are built into it."""

    @property
    def bridge_jar(self) -> Path:
        return next((self.path / "lib" / "entitlement-bridge").glob("*.jar"))


def cache_root() -> Path:
    """Where assembled homes live. As root, a system path: nodes run as `nobody`, who cannot enter /root."""
    explicit = os.environ.get("ORCHESTRATOR_CACHE")
    if explicit:
        return Path(explicit)
    if os.geteuid() == 0:
        return Path("/var/cache/orchestrator")
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "orchestrator"


def ensure_es_home(version: str, say: Callable[[str], None] | None = None, secured: bool = True) -> EsHome:
    """Return the cached home for ``version``, building it first if needed (about 15 s warm); without
    ``secured``, the same home without Elasticsearch's security modules (`without_security`)."""
    java_home = find_java_home(version)

    def build(tmp: Path, staging: Path) -> None:
        _lay_out(staging, resolve_jars(version, tmp))
        _lay_out_security(staging, version, tmp)
        _compile_helpers(staging, java_home, tmp / "classes", version)

    home = cached_home(f"elasticsearch-{version}", LAYOUT_VERSION, build,
                       lambda where: say(f"assembling Elasticsearch {version} from Maven Central into {where} (once)")
                       if say else None)
    return EsHome(version, home if secured else without_security(home), java_home)


SECURITY_MODULES = ("x-pack-core", "x-pack-security")


def without_security(home: Path) -> Path:
    """The home beside ``home`` whose modules/ lacks x-pack (an insecure sandbox's): x-pack loads even
    with security disabled, and costs about 5 s of every node's start. Its files are hard links to
    ``home``'s, so it takes no second copy on disk; it is rebuilt whenever ``home`` is."""
    lean = home.with_name(home.name + "-insecure")
    full_marker, marker = home / ".complete", lean / ".complete"
    stamp = f"{full_marker.read_text().strip()} {full_marker.stat().st_mtime_ns}"
    if marker.exists() and marker.read_text().strip() == stamp:
        return lean
    staging = Path(tempfile.mkdtemp(prefix=f".{lean.name}-", dir=home.parent)) / "home"
    try:
        shutil.copytree(home, staging, symlinks=True, copy_function=_link_or_copy,
                        ignore=lambda folder, names: [n for n in names if Path(folder) == home / "modules"
                                                      and n in SECURITY_MODULES] + [".complete"])
        if lean.exists():
            shutil.rmtree(lean)
        staging.rename(lean)
    finally:
        shutil.rmtree(staging.parent, ignore_errors=True)
    marker.write_text(stamp + "\n")
    return lean


def _link_or_copy(source: str, target: str) -> None:
    try:
        os.link(source, target)
    except OSError:  # a file system without hard links
        shutil.copy2(source, target)


def cached_home(name: str, layout_version: str, build: Callable[[Path, Path], None],
                announce: Callable[[Path], None]) -> Path:
    """The cache's folder ``name``, built first (``build(tmp, staging)`` lays it out in ``staging``)
    unless a complete one of ``layout_version`` is there; readable by the unprivileged node user."""
    home = cache_root() / name
    marker = home / ".complete"
    if marker.exists() and marker.read_text().strip() == layout_version:
        return home
    announce(home)
    with tempfile.TemporaryDirectory(prefix="orchestrator-home-") as tmp:
        staging = Path(tmp) / "home"
        staging.mkdir()
        build(Path(tmp), staging)
        if home.exists():
            shutil.rmtree(home)
        home.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(staging, home, symlinks=True)
    make_world_readable(home)
    marker.write_text(layout_version + "\n")
    return home


def resolve_jars(version: str, tmp: Path, pom: str = POM, product: str = "Elasticsearch") -> list[Path]:
    if shutil.which("mvn") is None:
        raise SandboxError(f"Maven (`mvn`) is needed to fetch {product} from Maven Central: apt-get install maven")
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "pom.xml").write_text(pom.replace("{v}", version))
    out = tmp / "jars"
    cmd = ["mvn", "-B", "-q", "-f", str(tmp / "pom.xml"), "dependency:copy-dependencies",
           "-DincludeScope=runtime", f"-DoutputDirectory={out}"]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    except subprocess.TimeoutExpired as exc:
        raise SandboxError("Maven did not finish within 15 minutes: is Maven Central reachable?") from exc
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-8:])
        unreachable = any(word in tail.lower() for word in ("resolve", "transfer", "unknownhost"))
        hint = "Maven Central is unreachable from this machine" if unreachable else "Maven failed"
        raise SandboxError(f"{hint} while fetching {product} {version}:\n{tail}")
    return sorted(out.glob("*.jar"))


def _lay_out(home: Path, jars: list[Path]) -> None:
    lib = home / "lib"
    netty = home / "modules" / "transport-netty4"
    for d in (lib / "entitlement-bridge", lib / "entitlement-agent", lib / "tools" / "ansi-console",
              lib / "platform" / "linux-x64", netty, home / "plugins", home / "bin"):
        d.mkdir(parents=True, exist_ok=True)
    for jar in jars:
        if jar.name.startswith("elasticsearch-entitlement-bridge-"):
            shutil.copy2(jar, lib / "entitlement-bridge" / jar.name)
        elif jar.name.startswith(MODULE_JAR_PREFIXES):
            shutil.copy2(jar, netty / jar.name)
        else:
            shutil.copy2(jar, lib / jar.name)
    _unpack_descriptor(netty, "transport-netty4")
    if LIBZSTD.exists():
        # Without native zstd, native access is off and best_compression indices turn the cluster red.
        shutil.copy2(LIBZSTD, lib / "platform" / "linux-x64" / "libzstd.so")


def _unpack_descriptor(module_dir: Path, name: str) -> None:
    """A module's descriptor and entitlement policy ship inside its jar; the server reads them beside it."""
    module_jar = next(module_dir.glob(f"{name}-*.jar"))
    with zipfile.ZipFile(module_jar) as zf:
        prefix = f"META-INF/es-plugins/{name}/"
        for entry in zf.namelist():
            if entry.startswith(prefix) and not entry.endswith("/"):
                (module_dir / entry[len(prefix):]).write_bytes(zf.read(entry))
    if not (module_dir / "plugin-descriptor.properties").exists():
        raise SandboxError(f"{module_jar.name} has no plugin descriptor: this Elasticsearch version is not supported")


def _lay_out_security(home: Path, version: str, tmp: Path) -> None:
    """modules/x-pack-core and modules/x-pack-security, as a distribution lays them out: each module's
    own jars, none the server (lib/) or the module it extends (x-pack-core) already has."""
    core = resolve_jars(version, tmp / "x-pack-core", XPACK_POM.replace("{artifact}", "x-pack-core"))
    security = resolve_jars(version, tmp / "x-pack-security", XPACK_POM.replace("{artifact}", "x-pack-security"))
    templates = TEMPLATES_FALLBACK_VERSION if int(version.split(".")[0]) >= 9 else version
    extras = resolve_jars(version, tmp / "x-pack-extras", _jars_only_pom(
        [("org.opensaml", f"opensaml-{a}", OPENSAML_VERSION) for a in OPENSAML_ARTIFACTS]
        + [("net.shibboleth.utilities", "java-support", "8.0.0"),
           ("org.elasticsearch.plugin", "x-pack-template-resources", templates)]))
    in_lib = {artifact_name(p.name) for p in (home / "lib").glob("*.jar")}
    core_dir, security_dir = home / "modules" / "x-pack-core", home / "modules" / "x-pack-security"
    core_dir.mkdir(parents=True)
    security_dir.mkdir(parents=True)
    in_core = {artifact_name(j.name) for j in core}
    for jar in core:
        if artifact_name(jar.name) not in in_lib:
            shutil.copy2(jar, core_dir / jar.name)
    for jar in [*security, *extras]:
        if jar.name.startswith("x-pack-template-resources-"):
            shutil.copy2(jar, core_dir / jar.name)
        elif artifact_name(jar.name) not in in_lib | in_core and not jar.name.startswith(XPACK_SHADOWED):
            # Resolved alone, security may pick another version of a library core has (slf4j): the
            # server refuses a class found twice, so the one core brings is the one.
            shutil.copy2(jar, security_dir / jar.name)
    _unpack_descriptor(core_dir, "x-pack-core")
    _unpack_descriptor(security_dir, "x-pack-security")


def artifact_name(jar_name: str) -> str:
    """A jar's artifact name without its version: slf4j-api-2.0.18.jar -> slf4j-api."""
    return re.sub(r"-\d+(\.\d+)+(\.Final|-jre|-\d+|-empty[\w-]*)?\.jar$", "", jar_name)


def _analysis_stand_in(home: Path, javac: str, jar: str, classes: Path, version: str) -> list[list[str]]:
    """The build steps of modules/sandbox-analysis (java/src/analysis): the security index's analyzer."""
    module = home / "modules" / "sandbox-analysis"
    module.mkdir(parents=True)
    (module / "plugin-descriptor.properties").write_text(
        "description=The analysis the security index needs (stands in for analysis-common)\n"
        f"version={version}\nname=sandbox-analysis\nclassname=SandboxAnalysisPlugin\n"
        f"java.version=17\nelasticsearch.version={version}\n")
    return [[javac, "-cp", f"{home / 'lib'}/*", "-d", str(classes / "analysis"),
             str(JAVA_SRC / "analysis" / "SandboxAnalysisPlugin.java")],
            [jar, "--create", "--file", str(module / "sandbox-analysis.jar"), "-C", str(classes / "analysis"), "."]]


def _compile_helpers(home: Path, java_home: Path, classes: Path, version: str) -> None:
    javac = str(java_home / "bin" / "javac")
    jar = str(java_home / "bin" / "jar")
    launcher = home / "sandbox-launcher"
    launcher.mkdir()
    steps = [
        [javac, "-d", str(classes / "launcher"), str(JAVA_SRC / "SandboxLauncher.java")],
        [jar, "--create", "--file", str(launcher / "sandbox-launcher.jar"), "-C", str(classes / "launcher"), "."],
        [javac, "-d", str(classes / "agent"), str(JAVA_SRC / "SandboxEntitlementAgent.java")],
        [javac, "-d", str(classes / "ansi"), str(JAVA_SRC / "ansi" / "AnsiConsoleLoader.java")],
        [jar, "--create", "--file", str(home / "lib" / "tools" / "ansi-console" / "sandbox-ansi-console.jar"),
         "-C", str(classes / "ansi"), "."],
    ]
    manifest = classes / "agent-manifest.txt"
    classes.mkdir(parents=True, exist_ok=True)
    manifest.write_text("Agent-Class: SandboxEntitlementAgent\nCan-Redefine-Classes: true\n"
                        "Can-Retransform-Classes: true\n")
    steps.append([jar, "--create", "--file", str(home / "lib" / "entitlement-agent" / "sandbox-entitlement-agent.jar"),
                  "--manifest", str(manifest), "-C", str(classes / "agent"), "."])
    steps.append(nofile_shim_command(launcher))
    steps += _analysis_stand_in(home, javac, jar, classes, version)
    run_build(steps)


def nofile_shim_command(launcher: Path) -> list[str]:
    """The gcc command that builds the file-limit shim (host_files/nofile_floor.c) into ``launcher``."""
    if shutil.which("gcc") is None:
        raise SandboxError("gcc is needed once to build the sandbox's file-limit shim: apt-get install gcc")
    return ["gcc", "-shared", "-fPIC", "-O2", "-o", str(launcher / "libnofile_floor.so"), str(NOFILE_SHIM_SRC), "-ldl"]


def run_build(steps: list[list[str]]) -> None:
    for cmd in steps:
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise SandboxError(f"building the sandbox launcher failed: {' '.join(cmd)}\n{proc.stderr.strip()}")


def make_world_readable(root: Path) -> None:
    """Nodes run as an unprivileged user: the shared home must be readable by all."""
    for path in [root, *root.rglob("*")]:
        mode = path.stat().st_mode
        path.chmod(mode | 0o444 | (0o111 if path.is_dir() else 0))
