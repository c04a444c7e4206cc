"""Assembling a runnable OpenSearch home from Maven Central artifacts, once, into the cache.

Simpler than Elasticsearch's: the server runs from the class path with `-E` settings and its own
Java agent (published). What the published jars lack is written here: the netty module's plugin
descriptor and security policy (without the policy's socket permission each node sees only itself).
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from pathlib import Path

from orchestrator.errors import SandboxError
from orchestrator.sandbox.assemble import AssembledHome, cached_home, nofile_shim_command, resolve_jars, run_build
from orchestrator.sandbox.java_home import find_java_home

LAYOUT_VERSION = "3"
MODULE_JARS = ("transport-netty4-client-", "opensearch-netty4-", "netty-")
JAVA_NEEDED = 21  # OpenSearch 3.x
# OpenSearch 2.x runs under the Java security manager, which Java 24 removed: a JDK 17 to 23.
JAVA_FOR_2X = (17, 24)
# log4j-core is not among the server's published dependencies: the version of its log4j-api.
LOG4J_CORE = {2: "2.21.0", 3: "2.25.4"}
AGENT_JAR = re.compile(r"(opensearch-agent-\d|opensearch-agent-bootstrap-|byte-buddy-)")  # not agent-policy

POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>orchestrator.sandbox</groupId><artifactId>opensearch-home</artifactId><version>1</version>
  <dependencies>
{dependencies}
  </dependencies>
</project>
"""


def pom(version: str) -> str:
    """What Maven resolves for ``version``: the server, the netty module, the plugin class loader,
    log4j-core, and (3.x) the Java agent."""
    wanted = [("org.opensearch", "opensearch", version), ("org.opensearch.plugin", "transport-netty4-client", version),
              ("org.opensearch", "opensearch-plugin-classloader", version),
              ("org.apache.logging.log4j", "log4j-core", LOG4J_CORE[major_of(version)])]
    if major_of(version) >= 3:
        wanted += [("org.opensearch", "opensearch-agent", version),
                   ("org.opensearch", "opensearch-agent-bootstrap", version)]
    return POM.replace("{dependencies}", "\n".join(
        f"    <dependency><groupId>{g}</groupId><artifactId>{a}</artifactId><version>{v}</version></dependency>"
        for g, a, v in wanted))


DESCRIPTOR = """description=Netty 4 transport and HTTP (assembled by orchestrator's sandbox)
version={v}
name=transport-netty4
classname=org.opensearch.transport.{plugin}
java.version={java}
opensearch.version={v}
"""

POLICY = """grant {
  permission java.net.SocketPermission "*", "accept,connect,resolve";
  permission java.lang.RuntimePermission "getClassLoader";
  // netty's shutdown sets its threads' class loader: without it a 2.x node takes 30 s more to stop
  permission java.lang.RuntimePermission "setContextClassLoader";
};
"""


class OpenSearchHome(AssembledHome):
    """An OpenSearch home: the published jars laid out as the distribution does, and (3.x) its own agent."""

    @property
    def agent_jar(self) -> Path | None:
        """3.x's Java agent (it replaced the security manager); None for 2.x."""
        return next((self.path / "agent").glob("opensearch-agent-[0-9]*.jar"), None)


def major_of(version: str) -> int:
    try:
        return int(version.split(".")[0])
    except ValueError:
        raise SandboxError(f"--os-version {version!r} is not a version like 3.8.0") from None


def ensure_opensearch_home(version: str, say: Callable[[str], None] | None = None) -> OpenSearchHome:
    """Return the cached home for ``version``, building it first if needed (seconds when Maven's cache is warm)."""
    major = major_of(version)
    if major not in LOG4J_CORE:
        raise SandboxError(f"the sandbox assembles OpenSearch 2.x and 3.x (3.8.0 and 2.19.1 are tested), not {version}")
    if major == 2:
        java_home = find_java_home(version, need=JAVA_FOR_2X[0], below=JAVA_FOR_2X[1], product="OpenSearch")
    else:
        java_home = find_java_home(version, need=JAVA_NEEDED, product="OpenSearch")

    def build(tmp: Path, staging: Path) -> None:
        _lay_out(staging, resolve_jars(version, tmp, pom(version), "OpenSearch"), version)
        (staging / "sandbox-launcher").mkdir()
        run_build([nofile_shim_command(staging / "sandbox-launcher")])

    home = cached_home(f"opensearch-{version}", LAYOUT_VERSION, build,
                       lambda where: say(f"assembling OpenSearch {version} from Maven Central into {where} (once)")
                       if say else None)
    return OpenSearchHome(version, home, java_home)


def _lay_out(home: Path, jars: list[Path], version: str) -> None:
    lib, agent, netty = home / "lib", home / "agent", home / "modules" / "transport-netty4"
    for d in (lib, agent, netty, home / "plugins", home / "bin"):
        d.mkdir(parents=True, exist_ok=True)
    for jar in jars:
        # The agent's folder holds what its manifest's Boot-Class-Path names. Netty goes in the module,
        # not on the class path: the module's policy grants sockets to the jars in its folder only, and
        # a node whose netty lacks them never reaches another node.
        if AGENT_JAR.match(jar.name):
            shutil.copy2(jar, agent / jar.name)
        elif jar.name.startswith(MODULE_JARS):
            shutil.copy2(jar, netty / jar.name)
        else:
            shutil.copy2(jar, lib / jar.name)
    # 2.x names the module's plugin class Netty4Plugin, 3.x Netty4ModulePlugin.
    plugin, java = ("Netty4ModulePlugin", JAVA_NEEDED) if major_of(version) >= 3 else ("Netty4Plugin", 11)
    (netty / "plugin-descriptor.properties").write_text(DESCRIPTOR.format(v=version, java=java, plugin=plugin))
    (netty / "plugin-security.policy").write_text(POLICY)
