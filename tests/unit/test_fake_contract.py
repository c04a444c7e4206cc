"""The fake Elasticsearch is held to what real nodes answer (issue 58): every request the shard adapter makes
of a plan, of each batch's gate and last look, of a recovery wait, of `status`, was sent to a real sandbox and
its answer captured (`scripts/capture_contract.py` writes `tests/fixtures/contract/`). Here the fake, built
with the captured layout (the same node names and roles, the same indices, shards and replicas), is asked the
same requests, node ids translated to its own; each answer must have the captured answer's shape: the same
keys where the keys are fields (a filter's effect included), the same types, `_nodes` counts where the real
one has them, an HTTP error where the real one gave one. Maps keyed by a node id, an index, a shard number or
a setting are compared by the shape of their values. Where the fake cannot match, `GAPS` says so and why."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from orchestrator.testing.fake_es.model import FakeCluster
from orchestrator.testing.fake_es.server import FakeEsServer

CAPTURES = sorted((Path(__file__).parents[1] / "fixtures" / "contract").glob("*.json"))
# Maps whose keys are data (node ids, index names, shard numbers, settings, attributes), not fields: by path.
DATA_MAPS = re.compile(r"nodes|indices|persistent|transient|defaults|(routing_nodes\.nodes)|(routing_table\.indices)"
                       r"|(.*\.shards)|(nodes\.\*\.indices\.shards\.\*)|(nodes\.\*\.(settings|attributes))")
# What the fake does not answer as real nodes do, and why that is accepted (a request's label -> why).
GAPS = {
    "POST /_security/X/_has_privileges": "the fake has no security: every user may do everything",
    "GET /_cluster/settings?include_defaults": "the fake's defaults are the few settings the tool reads, not "
                                               "Elasticsearch's thousand",
    "GET /_nodes/X": "`/_nodes/shutdown`: the fake has the node shutdown API (records, as a production cluster "
                     "answers); the sandbox's nodes do not (Maven Central has no such plugin), so they answer it "
                     "as node info of a node named `shutdown`",
}
# Fields the fake answers as Elasticsearch does, which another product's nodes answer otherwise; none of them
# is read by the tool (the fake stands for Elasticsearch; OpenSearch's own fields are its client's concern).
FIELD_GAPS = {
    "opensearch": {"discovered_cluster_manager", "discovered_master", "unassigned_primary_shards",
                   "routing_nodes.nodes.*[].relocation_failure_info", "routing_nodes.nodes.*[].searchOnly"},
}
SCALARS = {str: "text", int: "number", float: "number", bool: "bool", type(None): "null"}


def shape(value: Any, where: str = "", data_at_top: bool = False) -> Any:
    """``value``'s shape: types at the leaves (a set: a field may be text in one row and null in another),
    fields by name, data-keyed maps as ``{"*": the union of their values' shapes}``."""
    if isinstance(value, dict):
        if DATA_MAPS.fullmatch(where) or (data_at_top and not where):
            merged: Any = None
            for v in value.values():
                merged = union(merged, shape(v, where + ".*" if where else "*"))
            return {"*": merged} if value else {"*": None}
        return {k: shape(v, f"{where}.{k}" if where else k) for k, v in value.items()}
    if isinstance(value, list):
        merged_list: Any = None
        for v in value:
            merged_list = union(merged_list, shape(v, where))
        return [merged_list]
    return frozenset({SCALARS.get(type(value), type(value).__name__)})


def union(a: Any, b: Any) -> Any:
    if a is None:
        return b
    if b is None:
        return a
    if isinstance(a, dict) and isinstance(b, dict):
        return {k: union(a.get(k), b.get(k)) for k in {*a, *b}}
    if isinstance(a, list) and isinstance(b, list):
        return [union(a[0], b[0])]
    if isinstance(a, frozenset) and isinstance(b, frozenset):
        return a | b
    return a


def differences(real: Any, fake: Any, where: str = "") -> list[str]:
    """Where the fake's shape is not the real one's: a field one has and the other has not, a type the real
    answer never gives there. A data-keyed map or a list empty on either side has nothing to compare."""
    if real is None or fake is None:
        return []
    if isinstance(real, dict) and isinstance(fake, dict):
        out = []
        for key in sorted({*real, *fake}):
            here = f"{where}.{key}" if where else key
            if key not in fake:
                out.append(f"{here}: the real answer has it, the fake's has not")
            elif key not in real:
                out.append(f"{here}: the fake's answer has it, the real one has not")
            else:
                out += differences(real[key], fake[key], here)
        return out
    if isinstance(real, list) and isinstance(fake, list):
        return differences(real[0], fake[0], where + "[]")
    if isinstance(real, frozenset) and isinstance(fake, frozenset):
        return [] if fake <= real else [f"{where}: {'|'.join(sorted(fake))} in the fake's answer, "
                                        f"{'|'.join(sorted(real))} in the real one"]
    return [f"{where}: {type(fake).__name__} in the fake's answer, {type(real).__name__} in the real one"]


def layout_of(capture: dict[str, Any]) -> FakeCluster:
    cluster = FakeCluster(version=capture["version"])
    for node in capture["nodes"]:
        cluster.add_node(node["name"], node.get("zone"), tuple(node["roles"]))
    for index, body in sorted(capture["indices"].items()):
        cluster.create_index(index, body["shards"], body["replicas"], hidden=index.startswith("."))
    return cluster


def translated(text: str, ids: dict[str, str]) -> str:
    for real, fake in ids.items():
        text = text.replace(real, fake)
    return text


def ask(url: str, request: dict[str, Any], ids: dict[str, str]) -> tuple[int, Any]:
    params = urllib.parse.urlencode({k: translated(str(v), ids) for k, v in request["params"].items()})
    path = urllib.parse.quote(translated(request["path"], ids), safe="/,:*")
    data = json.dumps(request["body"]).encode() if request["body"] is not None else None
    call = urllib.request.Request(f"{url}{path}?{params}", data=data, method=request["method"],
                                  headers={"Content-Type": "application/json"} if data else {})
    try:
        with urllib.request.urlopen(call, timeout=30) as answer:  # 127.0.0.1: the test's own fake
            text = answer.read().decode()
            return answer.status, json.loads(text) if request["params"].get("format") != "txt" else text
    except urllib.error.HTTPError as exc:
        exc.close()
        return exc.code, None


def named(answer: Any, indices_at_top: bool, ids: dict[str, str]) -> set[str]:
    """The nodes (translated to the fake's ids) or the indices an answer is about."""
    if not isinstance(answer, dict):
        return set()
    if indices_at_top:
        return set(answer)
    nodes = answer.get("nodes")
    return {ids.get(n, n) for n in nodes} if isinstance(nodes, dict) else set()


def label(request: dict[str, Any]) -> str:
    path = re.sub(r"/[^/_][^/]*", "/X", request["path"])
    flag = "?include_defaults" if request["params"].get("include_defaults") == "true" else ""
    return f"{request['method']} {request['path'] if path == request['path'] else path}{flag}"


@pytest.fixture(params=CAPTURES, ids=[p.stem for p in CAPTURES])
def captured(request: pytest.FixtureRequest) -> Iterator[tuple[dict[str, Any], str, dict[str, str]]]:
    capture = json.loads(request.param.read_text())
    cluster = layout_of(capture)
    ids = {real: cluster.by_name[name].id for name, real in capture["node_ids"].items()}
    with FakeEsServer(cluster) as server:
        yield capture, server.url, ids


def test_there_are_captures_of_real_nodes() -> None:
    assert CAPTURES, "tests/fixtures/contract holds the answers of real nodes (scripts/capture_contract.py)"


def test_the_fake_answers_each_request_of_the_tool_in_the_shape_real_nodes_do(
        captured: tuple[dict[str, Any], str, dict[str, str]]) -> None:
    capture, url, ids = captured
    found: dict[str, list[str]] = {}
    for request in capture["requests"]:
        name = label(request)
        if name in GAPS:
            continue
        status, answer = ask(url, request, ids)
        if (status >= 300) != (request["status"] >= 300):
            found.setdefault(name, []).append(f"HTTP {status} from the fake, {request['status']} from real nodes")
            continue
        if request["params"].get("format") == "txt":
            real_columns = {len(line.split()) for line in request["answer"].splitlines() if line.strip()}
            fake_columns = {len(line.split()) for line in answer.splitlines() if line.strip()}
            if fake_columns - real_columns:
                found.setdefault(name, []).append(f"rows of {fake_columns} columns, real ones {real_columns}")
            continue
        top = "/_settings" in request["path"]
        accepted = FIELD_GAPS.get(capture["product"], set())
        said = [d for d in differences(shape(request.get("answer"), data_at_top=top), shape(answer, data_at_top=top))
                if d.split(":")[0] not in accepted]
        real_keys, fake_keys = named(request.get("answer"), top, ids), named(answer, top, {})
        if real_keys != fake_keys:  # which nodes or indices answer: the same as real nodes'
            said.append(f"it names {sorted(fake_keys)}, real nodes {sorted(real_keys)}")
        if said:
            found.setdefault(name, []).extend(said)
    assert not found, "the fake answers otherwise than real nodes:\n" + "\n".join(
        f"{name}: {'; '.join(dict.fromkeys(said))[:600]}" for name, said in sorted(found.items()))


def test_the_shape_comparison_sees_a_field_the_fake_would_lack() -> None:
    """The comparison itself: a field dropped, a type changed, a failed node counted: each is seen."""
    real = {"_nodes": {"total": 1, "successful": 1, "failed": 0}, "nodes": {"id1": {"name": "es-1", "roles": ["x"]}}}
    assert differences(shape(real), shape(real)) == []
    assert differences(shape(real), shape({"nodes": {"id9": {"name": "es-9", "roles": ["y"]}}})) == [
        "_nodes: the real answer has it, the fake's has not"]
    assert differences(shape(real), shape({**real, "nodes": {"id1": {"name": 7, "roles": []}}})) == [
        "nodes.*.name: number in the fake's answer, text in the real one"]
