"""How the fake finds the answer to a request: each API is a function registered with `api` (in
cluster_api.py, nodes_api.py, index_api.py), chosen by method and path; their answers are shaped as real
nodes shape them: tests/unit/test_fake_contract.py holds them to answers captured from the sandbox's real
nodes for every request the shard adapter makes (tests/fixtures/contract, scripts/capture_contract.py)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

from orchestrator.testing.fake_es.model import FakeCluster, FakeIndex

Answer = tuple[int, Any]


class ApiError(Exception):
    def __init__(self, status: int, body: Any) -> None:
        super().__init__(str(body))
        self.status, self.body = status, body


def error(status: int, kind: str, reason: str, **more: Any) -> ApiError:
    cause = {"type": kind, "reason": reason, **more}
    return ApiError(status, {"error": {"root_cause": [cause], **cause}, "status": status})


def no_such_index(name: str) -> ApiError:
    return error(404, "index_not_found_exception", f"no such index [{name}]", index=name, **{"resource.id": name})


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    params: dict[str, str]
    body: Any

    def flag(self, name: str, default: bool = False) -> bool:
        value = self.params.get(name)
        return default if value is None else value in ("", "true")


Handler = Callable[[FakeCluster, Request, re.Match[str]], Any]
ROUTES: list[tuple[str, re.Pattern[str], str, Handler]] = []


def api(method: str, pattern: str, label: str) -> Callable[[Handler], Handler]:
    def register(handler: Handler) -> Handler:
        ROUTES.append((method, re.compile(pattern + r"/?$"), label, handler))
        return handler
    return register


def route(cluster: FakeCluster, request: Request) -> tuple[str, Answer]:
    """(the endpoint's name, for counting; its answer)."""
    known = False
    for method, pattern, label, handler in ROUTES:
        found = pattern.match(request.path)
        if found is None:
            continue
        known = True
        if method != request.method:
            continue
        try:
            answer = handler(cluster, request, found)
        except ApiError as exc:
            return label, (exc.status, exc.body)
        return label, answer if isinstance(answer, tuple) else (200, answer)
    if known:
        return "?", (405, {"error": f"Incorrect HTTP method for uri [{request.path}] and method [{request.method}]"})
    return "?", (400, {"error": f"no handler found for uri [{request.path}] and method [{request.method}]"})


def index_names(cluster: FakeCluster, expression: str | None, request: Request,
                hidden_default: bool = False) -> list[FakeIndex]:
    """The indices an expression names (comma-separated, wildcards), as Elasticsearch resolves them: a
    name that is not an index is an error unless `ignore_unavailable`; hidden ones only when named or asked."""
    wildcards = request.params.get("expand_wildcards", "all" if hidden_default else "open")
    hidden = "hidden" in wildcards or "all" in wildcards
    if not expression or expression in ("_all", "*"):
        return [i for i in cluster.indices.values() if hidden or not i.hidden]
    out: dict[str, FakeIndex] = {}
    for term in expression.split(","):
        if "*" in term:
            out.update((n, i) for n, i in cluster.indices.items() if fnmatchcase(n, term) and (hidden or not i.hidden))
        elif term in cluster.indices:
            out[term] = cluster.indices[term]
        elif not request.flag("ignore_unavailable"):
            raise no_such_index(term)
    return list(out.values())




class Text(str):
    """An answer sent as text (`_cat` with `format=txt`), not as JSON."""


def cat(rows: list[dict[str, Any]], request: Request) -> list[dict[str, Any]] | Text:
    """A `_cat` answer: the columns `h` asks for, in its order; as JSON, or as Elasticsearch's text table
    (each column as wide as its widest value, a space between)."""
    columns = [c for c in request.params.get("h", "").split(",") if c] or list(rows[0] if rows else {})
    chosen = [{c: row.get(c) for c in columns} for row in rows]
    if request.params.get("format") == "json":
        return chosen
    if request.params.get("format") not in ("txt", None):
        raise ApiError(400, {"error": "the fake answers _cat requests as json or txt"})
    cells = [["" if v is None else str(v) for v in row.values()] for row in chosen]
    widths = [max((len(r[i]) for r in cells), default=0) for i in range(len(columns))]
    return Text("".join(" ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() + "\n" for r in cells))
