"""Which plugin names an upgrade may reinstall. Pure.

An upgrade reinstalls, as root on each host, the plugins that the cluster itself reports
(`GET _nodes/plugins`) with `elasticsearch-plugin install --batch NAME`. That CLI takes a URL, a
file path or an option in the same place as a name, so a name taken from the cluster is never
trusted as it is: only the official plugins each product's CLI installs by name, or names the
operator lists in the inventory (`upgrade.allowed_plugins`), and always a plain name.
"""

from __future__ import annotations

import re

from orchestrator.errors import UnsafeToProceed

# A plain plugin name: lower-case letters, digits and hyphens, starting with a letter or digit.
# No URL (":", "/"), no path ("." or "/"), no option (a leading "-"), no space or shell character.
PLUGIN_NAME = re.compile(r"[a-z0-9][a-z0-9-]{0,63}")

# The plugins that `elasticsearch-plugin install NAME` and `opensearch-plugin install NAME` fetch by
# name from the vendor's own download site (the products' "core plugins").
OFFICIAL_PLUGINS = frozenset({
    "analysis-icu", "analysis-kuromoji", "analysis-nori", "analysis-phonetic", "analysis-smartcn",
    "analysis-stempel", "analysis-ukrainian", "discovery-azure-classic", "discovery-ec2", "discovery-gce",
    "ingest-attachment", "mapper-annotated-text", "mapper-murmur3", "mapper-size", "repository-azure",
    "repository-gcs", "repository-hdfs", "repository-s3", "store-smb",
    # OpenSearch's core plugins beyond the shared ones.
    "cache-ehcache", "crypto-kms", "identity-shiro", "query-insights", "telemetry-otel", "transport-grpc",
    "transport-reactor-netty4",
})


def is_plain_name(name: str) -> bool:
    return PLUGIN_NAME.fullmatch(name) is not None


def name_problem(name: str, allowed: frozenset[str]) -> str | None:
    """Why ``name`` (as the cluster reported it) must not be installed; None when it may be."""
    shown = ascii(name[:80])
    if not is_plain_name(name):
        return (f"the cluster reports a plugin named {shown}, which is not a plain plugin name (a URL, a "
                "path or an option would be installed as root): refused")
    if name not in OFFICIAL_PLUGINS and name not in allowed:
        return (f"the cluster reports plugin {shown}, which is not an official plugin: it is reinstalled only "
                "when listed in the inventory's upgrade.allowed_plugins (its CLI must install it by that name)")
    return None


def plugin_problems(plugins: dict[str, tuple[str, ...]], allowed: frozenset[str]) -> list[str]:
    """One problem per refused name (with the nodes reporting it), for the upgrade's preflight."""
    nodes_of: dict[str, list[str]] = {}
    for node, names in plugins.items():
        for name in names:
            nodes_of.setdefault(name, []).append(node)
    problems = []
    for name in sorted(nodes_of):
        problem = name_problem(name, allowed)
        if problem is not None:
            nodes = sorted(nodes_of[name])
            problems.append(f"{problem} (on {', '.join(nodes[:5])}{' and more' if len(nodes) > 5 else ''})")
    return problems


def require_installable(name: str, allowed: frozenset[str]) -> None:
    """The step's own guard: a journal's plan is a file, and a name in it is checked again before use."""
    problem = name_problem(name, allowed)
    if problem is not None:
        raise UnsafeToProceed(problem)
