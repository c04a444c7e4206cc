"""Versions in a rolling upgrade of Elasticsearch or OpenSearch: which paths each supports, and what the
upgrade's preflight found (plugins, the newest snapshot, deprecations). Pure. The order nodes go in is
shards/upgrade_order.py.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, NamedTuple

from orchestrator.shards.plugins import plugin_problems

VERSION = re.compile(r"([0-9]{1,4})\.([0-9]{1,4})\.([0-9]{1,4})")  # ASCII digits: `\d` takes any script's


@dataclass(frozen=True)
class UpgradePaths:
    """A product's rolling-upgrade paths across majors: for each major (and its first minors), the oldest
    release of the previous major from which it is reached in one rolling upgrade."""

    product: str  # as messages name it
    first_minor_of_next: Mapping[int, Mapping[int, tuple[int, int]]]
    examples: str  # the paths, said

    def oldest_source(self, target: Version) -> tuple[int, int] | None:
        """The oldest major.minor of the previous major that can roll to ``target`` (None: a first major)."""
        rules = self.first_minor_of_next.get(target.major)
        if rules is None:  # unknown future majors: any minor of the previous one
            return (target.major - 1, 0) if target.major > max(self.first_minor_of_next) else None
        return rules[max(m for m in rules if m <= target.minor)]


# 7.17 -> 8.x; 8.18 -> 9.0; 8.19 -> 9.1 and later.
ELASTICSEARCH_PATHS = UpgradePaths("Elasticsearch", MappingProxyType({8: {0: (7, 17)}, 9: {0: (8, 18), 1: (8, 19)}}),
                                   "7.17 -> 8.x, 8.19 -> 9.x")
# 1.3 -> 2.x; 2.19 -> 3.x (OpenSearch's documented rolling-upgrade paths).
OPENSEARCH_PATHS = UpgradePaths("OpenSearch", MappingProxyType({2: {0: (1, 3)}, 3: {0: (2, 19)}}),
                                "1.3 -> 2.x, 2.19 -> 3.x")


class Version(NamedTuple):
    major: int
    minor: int
    patch: int

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}.{self.patch}"


def parse_version(text: str) -> Version | None:
    """'9.5.3' (a suffix such as -SNAPSHOT is ignored); None when it is no version."""
    m = VERSION.match(text.strip())
    return Version(*(int(g) for g in m.groups())) if m else None


def path_problems(versions: dict[str, str], target: Version, paths: UpgradePaths = ELASTICSEARCH_PATHS) -> list[str]:
    """Why the nodes (name -> version) cannot roll to ``target``: a downgrade, a skipped major, a start
    too old for the next major. Said before anything is changed."""
    problems = []
    parsed = {name: parse_version(v) for name, v in versions.items()}
    for name, v in parsed.items():
        if v is None:
            problems.append(f"{name}: cannot read its version {versions[name]!r}")
    known = {n: v for n, v in parsed.items() if v is not None}
    newer = sorted(n for n, v in known.items() if v > target)
    if newer:
        problems.append(f"{', '.join(newer[:5])} already run{'s' if len(newer) == 1 else ''} "
                        f"{known[newer[0]]}, newer than {target}: {paths.product} cannot be downgraded in place "
                        "(restore a snapshot into a cluster of the older version instead)")
    older = [v for v in known.values() if v.major < target.major]
    if older:
        oldest = min(older)
        source = paths.oldest_source(target)
        if target.major - oldest.major > 1:
            problems.append(f"{target} is more than one major version above {oldest}: upgrade to "
                            f"{oldest.major + 1}.x first (a rolling upgrade crosses one major at a time; "
                            f"{paths.examples})")
        elif source is not None and (oldest.major, oldest.minor) < source:
            problems.append(f"{target} can be reached from {source[0]}.{source[1]} or later of "
                            f"{oldest.major}.x, and the oldest node runs {oldest}: upgrade every node to "
                            f"{source[0]}.{source[1]} first")
    return problems


@dataclass(frozen=True)
class UpgradeFacts:
    """What an upgrade's plan reads besides the restart's snapshot (once, before any change)."""

    read_at_ms: int  # when: the snapshot's age is judged against it
    plugins: dict[str, tuple[str, ...]] = field(default_factory=dict)  # node name -> installed plugins
    newest_snapshot: str | None = None  # "repository:snapshot" of the newest successful one
    newest_snapshot_end_ms: int | None = None
    snapshot_error: str | None = None  # why the snapshots could not be read
    deprecations: tuple[str, ...] | None = ()  # critical items; None: the cluster has no deprecation API

    def to_json(self) -> dict[str, Any]:
        return {"read_at_ms": self.read_at_ms, "plugins": {k: list(v) for k, v in self.plugins.items()},
                "newest_snapshot": self.newest_snapshot, "newest_snapshot_end_ms": self.newest_snapshot_end_ms,
                "snapshot_error": self.snapshot_error,
                "deprecations": None if self.deprecations is None else list(self.deprecations)}

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> UpgradeFacts:
        deprecations = raw.get("deprecations", ())
        end = raw.get("newest_snapshot_end_ms")
        return cls(read_at_ms=int(raw["read_at_ms"]),
                   plugins={str(k): tuple(str(p) for p in v) for k, v in dict(raw.get("plugins", {})).items()},
                   newest_snapshot=None if raw.get("newest_snapshot") is None else str(raw["newest_snapshot"]),
                   newest_snapshot_end_ms=None if end is None else int(end),
                   snapshot_error=None if raw.get("snapshot_error") is None else str(raw["snapshot_error"]),
                   deprecations=None if deprecations is None else tuple(str(d) for d in deprecations))


def facts_findings(facts: UpgradeFacts, max_age_h: float, check_snapshot: bool,
                   allowed_plugins: frozenset[str] = frozenset()) -> tuple[list[str], list[str]]:
    """(problems, notes) of an upgrade's preflight: the newest snapshot, critical deprecations, plugins
    (a name the cluster reports that may not be installed as root is refused here, before any change)."""
    problems: list[str] = plugin_problems(facts.plugins, allowed_plugins)
    notes: list[str] = []
    if not check_snapshot:
        notes.append("WARNING: the recent-snapshot check is off (--no-snapshot-check; recorded in the run)")
    elif facts.snapshot_error is not None:
        problems.append(f"cannot tell whether a recent snapshot exists: {facts.snapshot_error} "
                        "(--no-snapshot-check goes on without one, recorded in the run)")
    elif facts.newest_snapshot is None or facts.newest_snapshot_end_ms is None:
        problems.append("no successful snapshot found in any repository: take one first (an upgraded node "
                        "cannot go back; a snapshot is the way back), or --no-snapshot-check")
    else:
        age_h = (facts.read_at_ms - facts.newest_snapshot_end_ms) / 3_600_000
        said = f"the newest successful snapshot, {facts.newest_snapshot}, is {age_h:.1f} h old"
        if age_h > max_age_h:
            problems.append(f"{said}, older than upgrade.snapshot_max_age_h ({max_age_h:g} h): take a new one "
                            "first, or --no-snapshot-check")
        else:
            notes.append(said)
    if facts.deprecations is None:
        notes.append("the cluster has no deprecation API (_migration/deprecations): its critical items are not "
                     "checked")
    elif facts.deprecations:
        problems.append(f"the deprecation API reports {len(facts.deprecations)} critical item(s) that the target "
                        f"version would refuse: {'; '.join(facts.deprecations[:5])}")
    with_plugins = {n: p for n, p in facts.plugins.items() if p}
    if with_plugins:
        names = sorted({p if p.isprintable() else repr(p) for ps in with_plugins.values() for p in ps})
        notes.append(f"plugins reinstalled at the new version on {len(with_plugins)} node(s): {', '.join(names)}")
    return problems, notes
