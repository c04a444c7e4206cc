"""Elasticsearch's `filter_path`: only the parts of an answer that a dotted pattern names are kept.

Patterns are comma-separated; `*` matches within one key (`nodes.*.name`, `*.shards`), `**` any number of
levels; arrays are looked through (a pattern goes on into each element); a pattern that ends at an
object keeps all of it; a pattern with a leading `-` removes what it names from what the others keep.
An answer with nothing left is `{}`, as Elasticsearch sends it.
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import Any

_NOTHING = object()
WILDCARDS = frozenset("*?[")  # what makes a key, a node name or a pattern's part a pattern


def _matches(key: str, pattern: str) -> bool:
    """fnmatch's case-sensitive match, with the common patterns (a literal key, a lone `*`) decided without
    it: at 3,000 nodes a filtered answer asks this of millions of keys (`bench_window --fake`)."""
    if pattern == "*":
        return True
    if WILDCARDS.isdisjoint(pattern):
        return key == pattern
    return fnmatchcase(key, pattern)


def filtered(value: Any, filter_path: str) -> Any:
    patterns = [p.strip() for p in filter_path.split(",") if p.strip()]
    paths = [p.split(".") for p in patterns if not p.startswith("-")]
    kept = _keep(value, paths) if paths else value
    for excluded in (p[1:].split(".") for p in patterns if p.startswith("-")):
        _drop(kept, excluded)
    return {} if kept is _NOTHING else kept


def _drop(value: Any, path: list[str]) -> None:
    if isinstance(value, list):
        for item in value:
            _drop(item, path)
    elif isinstance(value, dict) and path:
        for key in [k for k in value if _matches(k, path[0])]:
            if len(path) == 1:
                del value[key]
            else:
                _drop(value[key], path[1:])


def _keep(value: Any, paths: list[list[str]]) -> Any:
    if any(not p for p in paths):
        return value  # a pattern ends here: all of it
    if isinstance(value, list):
        items = [k for k in (_keep(v, paths) for v in value) if k is not _NOTHING]
        return items if items else _NOTHING
    if not isinstance(value, dict):
        return _NOTHING
    out = {}
    heads = {p[0] for p in paths}
    if all(h == "*" or WILDCARDS.isdisjoint(h) for h in heads):  # literal keys and lone stars: looked up, not matched
        every = [p[1:] for p in paths if p[0] == "*"]
        by_key: dict[str, list[list[str]]] = {}
        for p in paths:
            if p[0] != "*":
                by_key.setdefault(p[0], []).append(p[1:])
        for key, item in value.items():
            following = every + by_key.get(key, []) if every else by_key.get(key)
            if following:
                kept = _keep(item, following)
                if kept is not _NOTHING:
                    out[key] = kept
        return out if out else _NOTHING
    for key, item in value.items():
        following = []
        for p in paths:
            if p[0] == "**":
                following.append(p)  # goes on matching deeper
                if len(p) > 1 and _matches(key, p[1]):
                    following.append(p[2:])
                elif len(p) == 1:
                    following.append([])
            elif _matches(key, p[0]):
                following.append(p[1:])
        if following:
            kept = _keep(item, following)
            if kept is not _NOTHING:
                out[key] = kept
    return out if out else _NOTHING
