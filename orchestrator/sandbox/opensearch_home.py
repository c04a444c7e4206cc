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

from orchestrator.sandbox.assemble import AssembledHome, cached_home, nofile_shim_command, resolve_jars, run_build
from orchestrator.sandbox.java_home import find_java_home

LAYOUT_VERSION = "2"
MODULE_JARS = ("transport-netty4-client-", "opensearch-netty4-", "netty-")
JAVA_NEEDED = 21  # OpenSearch 3.x
AGENT_JAR = re.compile(r"(opensearch-agent-\d|opensearch-agent-bootstrap-|byte-buddy-)")  # not agent-policy

POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>orchestrator.sandbox</groupId><artifactId>opensearch-home</artifactId><version>1</version>
  <dependencies>
    <dependency><groupId>org.opensearch</groupId><artifactId>opensearch</artifactId><version>{v}</version></dependency>
    <dependency><groupId>org.opensearch.plugin</groupId><artifactId>transport-netty4-client</artifactId><version>{v}</version></dependency>
    <dependency><groupId>org.opensearch</groupId><artifactId>opensearch-plugin-classloader</artifactId><version>{v}</version></dependency>
    <dependency><groupId>org.opensearch</groupId><artifactId>opensearch-agent</artifactId><version>{v}</version></dependency>
    <dependency><groupId>org.opensearch</groupId><artifactId>opensearch-agent-bootstrap</artifactId><version>{v}</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-core</artifactId><version>2.25.4</version></dependency>
  </dependencies>
</project>
"""

DESCRIPTOR = """description=Netty 4 transport and HTTP (assembled by orchestrator's sandbox)
version={v}
name=transport-netty4
classname=org.opensearch.transport.Netty4ModulePlugin
java.version={java}
opensearch.version={v}
"""

POLICY = """grant {
  permission java.net.SocketPermission "*", "accept,connect,resolve";
  permission java.lang.RuntimePermission "getClassLoader";
};
"""


class OpenSearchHome(AssembledHome):
    """An OpenSearch home: the published jars laid out as the distribution does, and its own agent."""

    @property
    def agent_jar(self) -> Path:
        return next((self.path / "agent").glob("opensearch-agent-[0-9]*.jar"))


def ensure_opensearch_home(version: str, say: Callable[[str], None] | None = None) -> OpenSearchHome:
    """Return the cached home for ``version``, building it first if needed (seconds when Maven's cache is warm)."""
    java_home = find_java_home(version, need=JAVA_NEEDED, product="OpenSearch")

    def build(tmp: Path, staging: Path) -> None:
        _lay_out(staging, resolve_jars(version, tmp, POM, "OpenSearch"), version)
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
    (netty / "plugin-descriptor.properties").write_text(DESCRIPTOR.format(v=version, java=JAVA_NEEDED))
    (netty / "plugin-security.policy").write_text(POLICY)
