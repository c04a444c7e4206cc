"""What Elasticsearch and OpenSearch nodes say of themselves for `orchestrate pending` (pending/verdict.py):
each node's version, process and start time, and the files it read at start, found from its own JVM
arguments and settings. Pure: the `_nodes` answer in, the running nodes out."""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from fnmatch import fnmatchcase
from typing import Any

from orchestrator.pending.verdict import RunningNode
from orchestrator.reading import plain_path
from orchestrator.shards.answers import Node, Nodes

# Settings that name a file the node reads at start: its TLS keys, certificates and stores (both
# products' spellings), relative to its configuration directory when not absolute.
# Where the JVM and its libraries extract native code (and delete it, on purpose).
TEMPORARY_ARGUMENTS = ("-Djava.io.tmpdir", "-Djna.tmpdir", "-Dio.netty.native.workdir")
FILE_SETTINGS = (".ssl.key", ".ssl.certificate", ".ssl.certificate_authorities", ".ssl.keystore.path",
                 ".ssl.truststore.path", "_filepath")


def running_nodes(answer: Nodes, product: str) -> list[RunningNode]:
    """``product``: `elasticsearch` or `opensearch`, the package's, the settings file's and the jar's name."""
    return [_running(node, product) for node in answer.nodes.values() if node.name]


def _argument(node: Node, names: tuple[str, ...]) -> str | None:
    """The value of the first JVM argument named one of ``names`` (`-Dx.path.conf` matches any `x`) that
    is a plain absolute path: a node's answer names where its host is read, and it may lie (see `_text`)."""
    for arg in node.jvm.input_arguments:
        key, _, value = arg.partition("=")
        if any(fnmatchcase(key, name) for name in names) and (path := plain_path(value)):
            return path
    return None


def _running(node: Node, product: str) -> RunningNode:
    # Each product passes its directories as system properties of its own prefix (es., opensearch.).
    home = _argument(node, ("-D*.path.home",)) or _text(node.settings.get("path.home"))
    conf = _argument(node, ("-D*.path.conf",)) or (f"/etc/{product}" if home is None else f"{home}/config")
    files = (f"{conf}/{product}.yml", f"{conf}/jvm.options", f"{conf}/jvm.options.d/", f"{conf}/log4j2.properties",
             f"{conf}/{product}.keystore", *named_files(node.settings, conf))
    started = node.jvm.start_time_in_millis
    return RunningNode(
        name=node.name, addresses=tuple(a for a in (node.ip, node.host) if a), version=node.version or None,
        pid=node.process.id or node.jvm.pid, started_s=started / 1000 if started else None, package=product,
        files=tuple(dict.fromkeys(files)), settings_file=f"{conf}/{product}.yml", settings=node.settings,
        version_jars=(f"{home}/lib", product) if home else None, command="java",
        written_at_start=(f"{conf}/{product}.keystore",),
        temporary=tuple(f"{path}/" for name in TEMPORARY_ARGUMENTS if (path := _argument(node, (name,)))))


MAX_NAMED_FILES = 200  # a node naming more (20,000 made the host's command too long to start) is read for these


def named_files(settings: Mapping[str, Any], conf: str) -> list[str]:
    """The files the node's settings name (TLS material), absolute, plain, at most MAX_NAMED_FILES of them."""
    out: list[str] = []
    for key, value in settings.items():
        if key.endswith(FILE_SETTINGS):
            for path in value if isinstance(value, list) else [value]:
                if isinstance(path, str) and (plain := plain_path(posixpath.normpath(posixpath.join(conf, path)))):
                    out.append(plain)
    return sorted(set(out))[:MAX_NAMED_FILES]


def _text(value: Any) -> str | None:
    """A path setting as a plain absolute path, or None: it goes into a host's shell command (quoted there
    too), and a node can say anything of itself (`path.home: /x/$(id)`)."""
    return plain_path(value)
