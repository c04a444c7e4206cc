"""One sandbox Elasticsearch node: its directories, its configuration and its JVM command line."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from orchestrator.sandbox.assemble import EsHome
from orchestrator.sandbox.opensearch_home import OpenSearchHome

LOG4J2 = """status = error
appender.console.type = Console
appender.console.name = console
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d{ISO8601}][%-5p][%-25c{1.}] [%node_name]%marker %m%n
appender.file.type = File
appender.file.name = file
appender.file.fileName = ${sys:es.logs.base_path}${sys:file.separator}${sys:es.logs.cluster_name}.log
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d{ISO8601}][%-5p][%-25c{1.}] [%node_name]%marker %m%n
rootLogger.level = info
rootLogger.appenderRef.console.ref = console
rootLogger.appenderRef.file.ref = file
"""


@dataclass(frozen=True)
class NodeSpec:
    """Everything that makes one node: where it listens, which zone it is in, who its peers are."""

    name: str
    cluster_name: str
    bind_host: str
    http_port: int
    transport_port: int
    zone: str
    seed_hosts: tuple[str, ...]
    initial_masters: tuple[str, ...]
    heap_mb: int = 256
    extra_settings: dict[str, object] = field(default_factory=dict)


def node_settings(spec: NodeSpec, data_dir: Path, logs_dir: Path, zones: int,
                  product: str = "elasticsearch") -> dict[str, object]:
    settings: dict[str, object] = {
        "cluster.name": spec.cluster_name,
        "node.name": spec.name,
        "node.attr.zone": spec.zone,
        "network.host": spec.bind_host,
        "http.port": spec.http_port,
        "transport.port": spec.transport_port,
        "discovery.seed_hosts": list(spec.seed_hosts),
        # OpenSearch names the master role cluster_manager (the old key is deprecated there).
        ("cluster.initial_cluster_manager_nodes" if product == "opensearch" else "cluster.initial_master_nodes"):
            list(spec.initial_masters),
        "path.data": str(data_dir),
        "path.logs": str(logs_dir),
        "action.destructive_requires_name": True,
        # A small test disk must not trip the disk watermarks and block allocation.
        "cluster.routing.allocation.disk.threshold_enabled": False,
    }
    if zones > 1:
        settings["cluster.routing.allocation.awareness.attributes"] = "zone"
    settings.update(spec.extra_settings)
    return settings


def security_settings(secured: bool) -> dict[str, object]:
    """Elasticsearch's security: TLS on HTTP and transport with the sandbox CA's certificates (in each
    node's config/certs), users and API keys. None for `sandbox up --insecure`, whose home has no
    security modules at all (assemble.without_security): the setting would be unknown there."""
    if not secured:
        return {}
    settings: dict[str, object] = {"xpack.security.enabled": True}
    for layer in ("http", "transport"):
        settings[f"xpack.security.{layer}.ssl.enabled"] = True
        settings[f"xpack.security.{layer}.ssl.key"] = "certs/node.key"
        settings[f"xpack.security.{layer}.ssl.certificate"] = "certs/node.crt"
        settings[f"xpack.security.{layer}.ssl.certificate_authorities"] = ["certs/ca.crt"]
    # Nodes check each other's certificate and address, as a production cluster should.
    settings["xpack.security.transport.ssl.verification_mode"] = "full"
    return settings


def render_yaml(settings: dict[str, object]) -> str:
    import json

    # JSON scalars and lists are valid YAML and need no YAML library here.
    return "".join(f"{key}: {json.dumps(value)}\n" for key, value in settings.items())


def write_node_config(spec: NodeSpec, node_dir: Path, zones: int, product: str = "elasticsearch",
                      seen_at: Path | None = None) -> None:
    """Lay out config/, data/, logs/, tmp/ for one node (idempotent; data is kept). ``seen_at``: where the
    node sees its data/ and logs/ when not here (a packaged node: /var/lib/... and /var/log/...)."""
    for sub in ("config", "data", "logs", "tmp"):
        (node_dir / sub).mkdir(parents=True, exist_ok=True)
    data, logs = (node_dir / "data", node_dir / "logs") if seen_at is None else \
        (seen_at / "lib" / product, seen_at / "log" / product)
    settings = node_settings(spec, data, logs, zones, product)
    (node_dir / "config" / f"{product}.yml").write_text(render_yaml(settings))
    (node_dir / "config" / "log4j2.properties").write_text(log4j2_text(product))


def log4j2_text(product: str) -> str:
    # OpenSearch's system properties say opensearch.logs.* where Elasticsearch's say es.logs.*
    return LOG4J2.replace("sys:es.logs.", "sys:opensearch.logs.") if product == "opensearch" else LOG4J2


def common_jvm_options(java_home: Path, node_dir: Path, heap_mb: int) -> list[str]:
    # -XX:TieredStopAtLevel=1: the quick compiler only. A sandbox node's life is mostly its start-up,
    # and on two cores the optimising compiler's threads slowed every boot (`bench_sandbox_reads` and
    # the integration tests' durations show a node's start); steady-state speed does not matter here.
    # -XX:-BytecodeVerificationRemote: the classes are those of the home the sandbox assembled from Maven
    # Central, the same at every boot, and verifying them again each time was a part of every boot worth
    # cutting (docs/sandbox.md, `bench_boot`). Class data sharing, the usual cure, is off whenever java.base
    # is patched, as Elasticsearch's entitlement bridge patches it.
    return [
        str(java_home / "bin" / "java"),
        f"-Xms{heap_mb}m", f"-Xmx{heap_mb}m",
        "-XX:+UseG1GC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true", "-Dfile.encoding=UTF-8",
        "-XX:+UnlockDiagnosticVMOptions", "-XX:-BytecodeVerificationRemote",
        "-Djna.nosys=true", "-Dio.netty.noUnsafe=true", "-Dio.netty.noKeySetOptimization=true",
        "-Dlog4j.shutdownHookEnabled=false", "-Dlog4j2.disable.jmx=true",
        f"-Djava.io.tmpdir={node_dir / 'tmp'}",
        "-XX:-HeapDumpOnOutOfMemoryError", "-XX:-MaxFDLimit",
    ]


def opensearch_jvm_command(home: OpenSearchHome, node_dir: Path, heap_mb: int) -> list[str]:
    """OpenSearch runs from the class path (3.x with its own published Java agent); no launcher needed."""
    agent = [f"-javaagent:{home.agent_jar}"] if home.agent_jar else []
    return [
        *common_jvm_options(home.java_home, node_dir, heap_mb),
        "--add-modules=jdk.incubator.vector", "--enable-native-access=ALL-UNNAMED",
        *agent,
        f"-Dopensearch.path.home={home.path}", f"-Dopensearch.path.conf={node_dir / 'config'}",
        "-Dopensearch.distribution.type=tar",
        "-cp", f"{home.path / 'lib'}/*",
        "org.opensearch.bootstrap.OpenSearch",
    ]


def jvm_command(home: EsHome, node_dir: Path, heap_mb: int) -> list[str]:
    """The java command that runs the node; the launcher stands in for the unpublished CLI."""
    es = home.path
    major = int(home.version.split(".")[0])
    cmd = [
        *common_jvm_options(home.java_home, node_dir, heap_mb),
        f"-Des.path.home={es}", f"-Des.path.conf={node_dir / 'config'}",
        "-Des.distribution.type=tar",
        "-Dorg.elasticsearch.nativeaccess.enableVectorLibrary=false",
        "-Djdk.attach.allowAttachSelf=true", "-XX:+EnableDynamicAgentLoading",
        f"--module-path={es / 'lib'}", "--add-modules=ALL-MODULE-PATH",
        "--add-modules=jdk.incubator.vector",
        f"--patch-module=java.base={home.bridge_jar}",
        "--add-exports=java.base/org.elasticsearch.entitlement.bridge="
        "org.elasticsearch.entitlement,java.logging,java.net.http,java.naming,jdk.net",
        "--enable-native-access=org.elasticsearch.nativeaccess,org.elasticsearch.foreign,org.apache.lucene.core",
        "--add-opens=org.elasticsearch.server/org.elasticsearch.bootstrap=ALL-UNNAMED",
        # Read by the launcher when it exists (a secured sandbox): the `elastic` user's first password.
        f"-Dsandbox.bootstrap_password_file={bootstrap_password_file(node_dir)}",
        "-cp", str(home.launcher_dir / "sandbox-launcher.jar"),
        "SandboxLauncher",
    ]
    if major < 9:
        # 8.x has no foreign-adapter module names in --enable-native-access beyond what exists.
        cmd = [c for c in cmd if not c.startswith("--enable-native-access")]
        cmd.insert(-3, "--enable-native-access=ALL-UNNAMED")
    return cmd


def bootstrap_password_file(node_dir: Path) -> Path:
    return node_dir / "config" / "bootstrap-password"


def node_environment(home: EsHome | OpenSearchHome, node_dir: Path) -> dict[str, str]:
    return {
        # See host_files/nofile_floor.c: the bootstrap check's file limit, in containers that cap it.
        "LD_PRELOAD": str(home.nofile_shim),
        "LIBFFI_TMPDIR": str(node_dir / "tmp"),
        "ES_TMPDIR": str(node_dir / "tmp"),
        "OPENSEARCH_TMPDIR": str(node_dir / "tmp"),
        "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
        "HOME": str(node_dir),
        "LANG": "C.UTF-8",
    }
