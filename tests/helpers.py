"""Helpers shared by the test layers: running the CLI as a user would, receiving a hook's HTTP calls."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, TypeVar

REPO = Path(__file__).resolve().parents[1]

# The pause between a load's writes (its searches: four times it) in the integration tests that show a run under
# writes: no acknowledged write lost, never red. About 15 writes and 5 searches a second keep every phase of a
# restart under traffic. The load generator's own default (5 ms) is for a latency test, and it costs CPU the
# nodes' boots share on two cores: a node's restart took 21-25 s under it, 16-17 s under this and 13-19 s with
# none (2026-11-29, 3-node secured sandbox), and CI's time counts.
STEADY_LOAD_PAUSE_S = 0.05


def orchestrate(*args: str, timeout: float = 900, env: dict[str, str] | None = None,
                cwd: Path | None = None, input_text: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run `orchestrate ARGS` in a child process and return what it printed and its exit code."""
    return subprocess.run([sys.executable, "-m", "orchestrator", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})}, cwd=cwd or REPO, input=input_text)


Closable = TypeVar("Closable")

# What a test opened that holds sockets (clients, loads): closed at its teardown (tests/integration/conftest.py).
# Left to the garbage collector, an open socket is a ResourceWarning, an error under this suite's filters, in
# whichever test happens to run when the collector passes: not the one that left it.
OPENED: list[Any] = []


def closed_at_teardown(thing: Closable) -> Closable:
    OPENED.append(thing)
    return thing


def es_client(info: dict[str, Any], **options: Any) -> Any:
    """An elasticsearch-py client for the running sandbox (`sandbox status --json`), as its superuser
    over TLS when it is secured."""
    from elasticsearch import Elasticsearch

    from orchestrator.sandbox.rest import access_of

    access = access_of(info)
    if access.ca_file:
        options.update(ca_certs=access.ca_file, basic_auth=(access.username, access.password))
    return closed_at_teardown(Elasticsearch(info["endpoints"], **{"request_timeout": 30, **options}))


def json_lines(stdout: str) -> list[dict[str, Any]]:
    """The JSON lines of a command's output; each event line (`event` set) is checked against the
    published schema, docs/events.schema.json, so every integration test that reads them checks it."""
    import jsonschema

    schema = json.loads((REPO / "docs" / "events.schema.json").read_text())
    lines = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
    for line in lines:
        if "event" in line:
            jsonschema.validate(line, schema, cls=jsonschema.Draft202012Validator)
    return lines


def assert_no_traceback(proc: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stdout, proc.stdout


class Receiver:
    """An HTTP server on 127.0.0.1 that records each call; paths starting /fail answer 500, and
    /redirect?to=URL redirects there (302)."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self.answer: Any = {"silenceID": "sil-42"}  # what every call is answered with (bytes: as they are)
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_any(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length).decode() if length else ""
                receiver.calls.append({"method": self.command, "path": self.path, "body": body,
                                       "auth": self.headers.get("Authorization"),
                                       "content_type": self.headers.get("Content-Type")})
                if self.path.startswith("/redirect?to="):
                    self.send_response(302)
                    self.send_header("Location", urllib.parse.unquote(self.path.split("=", 1)[1]))
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                status = 500 if self.path.startswith("/fail") else 200
                answer = receiver.answer if isinstance(receiver.answer, bytes) else json.dumps(receiver.answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            do_GET = do_POST = do_PUT = do_DELETE = do_any

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def __enter__(self) -> Receiver:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)
