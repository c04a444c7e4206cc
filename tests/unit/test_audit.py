"""The run's audit log: host commands, cluster requests and events as JSON lines, secrets masked."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from orchestrator.config.model import NodeEntry
from orchestrator.hosts.transport import LocalTransport
from orchestrator.restart.events import Event
from orchestrator.runs.audit import audit_log, redacted


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_commands_requests_and_events_are_written_as_json_lines(tmp_path: Path) -> None:
    journal: Any = SimpleNamespace(path=tmp_path / "r-1.json", run_id="r-1", cluster="c", product="elasticsearch")
    seen: list[Event] = []
    node = NodeEntry(name="a", host="127.0.0.1")
    with audit_log(journal, seen.append, "start") as emit:
        LocalTransport().run(node, "echo hi; exit 3")
        # What elasticsearch-py's transport logs for each request (its own format).
        logging.getLogger("elastic_transport.transport").info(
            "PUT http://10.0.0.1:9200/_cluster/settings [status:200 duration:0.012s]")
        emit(Event("step", "es-1: host tuning: fixed thp.enabled", node="a", batch=1, data={"changes": []}))
    logging.getLogger("orchestrator.hosts").info("after the run: not in its log")
    log = tmp_path / "r-1.log.jsonl"
    assert oct(log.stat().st_mode & 0o777) == "0o600"
    first, command, request, event = lines(log)
    assert first["kind"] == "invocation" and first["how"] == "start" and first["run_id"] == "r-1"
    assert command["kind"] == "command" and command["command"] == "echo hi; exit 3" and command["rc"] == 3
    assert command["host"] == "127.0.0.1" and command["duration_s"] >= 0
    assert request == {"at": request["at"], "kind": "request", "method": "PUT",
                       "url": "http://10.0.0.1:9200/_cluster/settings", "status": 200, "duration_s": 0.012}
    assert event["kind"] == "event" and event["event"] == "step" and event["node"] == "a" and event["batch"] == 1
    assert [e.message for e in seen] == ["es-1: host tuning: fixed thp.enabled"], "events still reach the caller"


def test_a_resume_appends_and_a_planted_link_is_refused(tmp_path: Path) -> None:
    journal: Any = SimpleNamespace(path=tmp_path / "r-2.json", run_id="r-2", cluster="c", product="elasticsearch")
    for how in ("start", "resume"):
        with audit_log(journal, lambda e: None, how):
            pass
    assert [line["how"] for line in lines(tmp_path / "r-2.log.jsonl")] == ["start", "resume"]
    target = tmp_path / "elsewhere"
    os.symlink(target, tmp_path / "r-3.log.jsonl")
    with pytest.raises(OSError), audit_log(SimpleNamespace(path=tmp_path / "r-3.json", run_id="r-3",  # type: ignore[arg-type]
                                                           cluster="c", product="riak"), lambda e: None, "start"):
        pass
    assert not target.exists()


@pytest.mark.parametrize(("text", "shown"), [
    ("curl https://elastic:s3cret@10.0.0.1:9200/", "curl https://elastic:***@10.0.0.1:9200/"),
    ("PASSWORD=hunter2 run", "PASSWORD=***"),
    ("api_key: 'abc def' and", "api_key: *** and"),
    ("Authorization: ApiKey xyz\nnext", "Authorization: ***\nnext"),
    ("systemctl stop elasticsearch", "systemctl stop elasticsearch"),
    # A long URL (a batch's node ids) is passed over fast, its secret still found; a text that is not ASCII is
    # scanned as the pattern ignores case (a long s is an s, a Kelvin sign a k).
    (f"http://elastic:s3cret@h:9200/_nodes/{'x' * 4000}/none", "http://elastic:***@h:9200/_nodes/xxx"),
    (f"GET /_nodes/{'x' * 4000}/none?tokEn=abc", f"GET /_nodes/{'x' * 4000}/none?tokEn=***"),
    ("pa\u017f\u017fword=hunter2 t\u00e9l\u00e9", "pa\u017f\u017fword=***"),
    ("api_\u212aey=abc", "api_\u212aey=***"),
])
def test_secrets_are_masked(text: str, shown: str) -> None:
    assert redacted(text).startswith(shown)
    assert "s3cret" not in redacted(text) and "hunter2" not in redacted(text)


def test_verbose_shows_each_host_command_as_it_runs(tmp_path: Path) -> None:
    import subprocess
    import sys

    from tests.helpers import REPO

    inv = tmp_path / "c.yaml"
    # Local transport, a check only: it reads this machine's knobs and changes nothing.
    inv.write_text("cluster: {name: c, endpoints: ['http://127.0.0.1:9']}\nssh: {transport: local}\n"
                   "tuning: {profile: elasticsearch}\nnodes: [{name: a, host: 127.0.0.1}]\n")
    proc = subprocess.run([sys.executable, "-m", "orchestrator", "-v", "tune", "--config", str(inv), "--json"],
                          capture_output=True, text=True, cwd=REPO, timeout=120)
    audit = [line for line in proc.stderr.splitlines() if " audit " in line]
    assert any("transparent_hugepage" in line for line in audit), proc.stderr[-2000:]
    quiet = subprocess.run([sys.executable, "-m", "orchestrator", "tune", "--config", str(inv), "--json"],
                           capture_output=True, text=True, cwd=REPO, timeout=120)
    assert " audit " not in quiet.stderr


def test_quiet_shows_only_problems_and_the_result(capsys: pytest.CaptureFixture[str]) -> None:
    from orchestrator.cli import output
    from orchestrator.cli.render import RunView

    output.terminal.quiet = True
    try:
        view = RunView(as_json=False, nodes=["a"])
        for e in (Event("batch", "batch 1/2: a"), Event("phase", "a: stopping", node="a", phase="stopping"),
                  Event("warning", "flush failed, going on"), Event("run", "run succeeded: all 2 batches",
                                                                    data={"result": "succeeded"})):
            view(e)
    finally:
        output.terminal.quiet = False
    shown = capsys.readouterr().err
    assert "flush failed" in shown and "run succeeded" in shown
    assert "batch 1/2" not in shown and "stopping" not in shown


def test_each_request_line_says_how_many_bytes_its_answer_had(tmp_path: Path) -> None:
    """What a batch reads is measured from the audit log (docs/benchmarks.md): elasticsearch-py's own line
    has no size, the client's node notes it (es/connect.py: MeasuredNode)."""
    from orchestrator.es.connect import ElasticsearchRest
    from orchestrator.shards.connection import Connection
    from orchestrator.testing.fake_es.model import FakeCluster
    from orchestrator.testing.fake_es.server import FakeEsServer

    journal: Any = SimpleNamespace(path=tmp_path / "r-4.json", run_id="r-4", cluster="c", product="elasticsearch")
    with FakeEsServer(FakeCluster.generate(5)) as server, audit_log(journal, lambda e: None, "start"):
        rest = ElasticsearchRest(Connection((server.url,)))
        rest.request("cluster health", "GET", "/_cluster/health")
        rest.request("list shards", "GET", "/_cat/shards", {"format": "json"})
        sizes = server.counts.as_json()["bytes"]
    requests = [line for line in lines(tmp_path / "r-4.log.jsonl") if line["kind"] == "request"]
    assert [r["bytes"] for r in requests] == [sizes["GET /_cluster/health"], sizes["GET /_cat/shards"]]




class Kept(logging.Handler):
    """What an application's own handler on the root logger receives (an Airflow task's log)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.mark.parametrize("product", ["elasticsearch", "opensearch"])
def test_the_clients_requests_reach_only_the_audit_log_and_a_failure_is_one_line(product: str, tmp_path: Path) -> None:
    """An Airflow task's log (a handler on the root logger at INFO) gets the client's warnings, each one line,
    and not its every request, which the run's audit log keeps; the loggers are as they were after the run."""
    import importlib

    from orchestrator import products
    from orchestrator.errors import ClusterUnreachable
    from orchestrator.shards.connection import Connection

    connect = importlib.import_module(f"orchestrator.{'es' if product == 'elasticsearch' else product}.connect")
    # Two endpoints that refuse: the client tries the second after the first, logging the first's failure.
    endpoints = ("http://127.0.0.1:9", "http://127.0.0.1:7")
    client = connect.make_client(Connection(endpoints=endpoints))
    journal: Any = SimpleNamespace(path=tmp_path / "r-4.json", run_id="r-4", cluster="c", product=product)
    loggers = [logging.getLogger(name) for name in ("orchestrator", *products.get(product).client_loggers)]
    before = [(lg.level, lg.propagate, list(lg.handlers)) for lg in loggers]
    root, task_log = logging.getLogger(), Kept()
    level = root.level
    root.setLevel(logging.INFO)
    root.addHandler(task_log)
    try:
        with audit_log(journal, lambda e: None, "start"):
            loggers[1].info("GET http://127.0.0.1:9/ [status:200 duration:0.001s]")  # as the client logs a request
            with pytest.raises(ClusterUnreachable), connect.translated("reading", endpoints):
                client.info()
    finally:
        root.removeHandler(task_log)
        root.setLevel(level)
    passed_on = [r for r in task_log.records if r.name.startswith(("elastic_transport", "opensearch"))]
    assert passed_on and all(r.levelno >= logging.WARNING for r in passed_on), "no request at INFO"
    assert all(r.exc_info is None and "\n" not in r.getMessage() for r in passed_on)
    assert any("ConnectionError" in r.getMessage() for r in passed_on), [r.getMessage() for r in passed_on]
    audit = lines(tmp_path / "r-4.log.jsonl")
    assert any(line["kind"] == "request" for line in audit), "the audit log keeps the request"
    assert [(lg.level, lg.propagate, list(lg.handlers)) for lg in loggers] == before
