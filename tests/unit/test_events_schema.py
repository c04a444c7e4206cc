"""`--json` lines against the published schema (docs/events.schema.json): what is emitted validates,
every event kind the code emits is in it, and it is strict enough to catch a stray field."""

from __future__ import annotations

import ast
import io
import json
from contextlib import redirect_stdout
from typing import Any

import jsonschema
import pytest

from orchestrator.cli.render import RunView, summary_line
from orchestrator.restart.events import Event
from tests.helpers import REPO

SCHEMA = json.loads((REPO / "docs" / "events.schema.json").read_text())


def validate(line: dict[str, Any]) -> None:
    jsonschema.validate(line, SCHEMA, cls=jsonschema.Draft202012Validator)


def emitted(events: list[Event]) -> list[dict[str, Any]]:
    out = io.StringIO()
    with redirect_stdout(out):
        view = RunView(as_json=True)
        for e in events:
            view(e)
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_a_run_s_lines_validate_and_carry_the_run_id_once_known() -> None:
    lines = emitted([
        Event("warning", "before the run has an id"),
        Event("run", "run r-1 started: 3 batches", data={"run_id": "r-1", "journal": "/x.json"}),
        Event("batch", "batch 1/3: es-1 (es-1)", batch=1, eta_s=120.0),
        Event("phase", "es-1: stopping", node="es-1", batch=1, phase="stopping"),
        Event("wait", "batch 2 waits: yellow and not settled", batch=2),
    ])
    for line in lines:
        validate(line)
        assert "kind" not in line and line["schema"] == 1
    assert "run_id" not in lines[0] and all(line["run_id"] == "r-1" for line in lines[1:])
    assert [line["event"] for line in lines] == ["warning", "run", "batch", "phase", "wait"]
    validate(summary_line({"result": "succeeded", "exit_code": 0, "run_id": "r-1", "cluster": "c", "journal": "/x.json",
                           "batches": [], "nodes": [], "duration_s": 1.0, "options": {}}))
    validate(summary_line({"result": "partial", "exit_code": 10, "indices": [], "merged": 1}))


def test_every_event_kind_the_code_emits_is_in_the_schema() -> None:
    kinds = set()
    for path in (REPO / "orchestrator").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Event" and node.args:
                # A literal kind, or each literal of a conditional one ("skip" if ... else "refuse").
                kinds |= {c.value for c in ast.walk(node.args[0]) if isinstance(c, ast.Constant)
                          and isinstance(c.value, str)}
    assert kinds and kinds <= set(SCHEMA["$defs"]["event"]["properties"]["event"]["enum"]), kinds


@pytest.mark.parametrize("bad", [
    {"schema": 1, "event": "run", "kind": "run", "message": "m", "at": 1.0},  # the old doubled type
    {"schema": 2, "event": "run", "message": "m", "at": 1.0},
    {"schema": 1, "event": "gossip", "message": "m", "at": 1.0},
    {"schema": 1, "event": "summary", "result": "fine"},
])
def test_the_schema_refuses_what_it_should(bad: dict[str, Any]) -> None:
    with pytest.raises(jsonschema.ValidationError):
        validate(bad)


@pytest.mark.parametrize("args", [
    ("restart", "--cluster", "no-such-cluster", "--json"),  # a bad configuration: exit 2
    ("restart", "--cluster", "no-such-cluster", "--no-such-flag", "--json"),  # a usage error: exit 2
    ("plan", "--config", "/dev/zero", "--json"),  # a special file: exit 2
    ("status", "--config", "{inventory}", "--json"),  # a cluster that does not answer: exit 4
])
def test_every_failure_under_json_ends_with_one_summary_with_its_exit_code_error_and_hint(
        args: tuple[str, ...], tmp_path: Any) -> None:
    from tests.helpers import orchestrate

    inventory = tmp_path / "c.yaml"
    inventory.write_text("cluster: {name: c, endpoints: ['http://127.0.0.1:9'], request_timeout_s: 2}\n"
                         "ssh: {transport: local}\nnodes: [{name: a, host: h}]\n")
    proc = orchestrate(*(a.format(inventory=inventory) for a in args), timeout=120)
    assert proc.returncode in (2, 4), proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) == 1, proc.stdout
    last = json.loads(lines[0])
    validate(last)
    assert last["result"] == "error" and last["exit_code"] == proc.returncode and last["error"]
    if "no-such-cluster" in args and "--no-such-flag" not in args:
        assert last["hint"].startswith("orchestrate inventory discover --endpoint URL --name no-such-cluster")
