"""The fake Elasticsearch's HTTP server, on 127.0.0.1 only: it answers as Elasticsearch does (its
product header included, so elasticsearch-py talks to it), counts requests and bytes answered per
endpoint, and takes the fake host transport's stops and starts at `/_fake/...` (not counted).

In a test: `with FakeEsServer(FakeCluster.generate(30)) as server: server.url`. In a process of its own
(so that a benchmark's CPU time is the tool's alone): `python -m orchestrator.testing.fake_es --nodes 3000`
prints one JSON line with its URL, then serves until it is ended (SIGTERM).
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

# The APIs register their routes when imported.
from orchestrator.testing.fake_es import cluster_api, index_api, merge_api, nodes_api  # noqa: F401
from orchestrator.testing.fake_es.filter_path import filtered
from orchestrator.testing.fake_es.model import FakeCluster
from orchestrator.testing.fake_es.routes import Request, Text, route


class Counts:
    """Requests and bytes answered, per endpoint (method and path pattern)."""

    def __init__(self) -> None:
        self.requests: Counter[str] = Counter()
        self.bytes: Counter[str] = Counter()
        self.lock = threading.Lock()

    def add(self, label: str, size: int) -> None:
        with self.lock:
            self.requests[label] += 1
            self.bytes[label] += size

    def as_json(self) -> dict[str, Any]:
        with self.lock:
            return {"requests": dict(self.requests), "bytes": dict(self.bytes)}

    def reset(self) -> None:
        with self.lock:
            self.requests.clear()
            self.bytes.clear()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the client's connection pool expects
    # Headers and body are two writes: with Nagle, each answer waited for the peer's delayed ACK.
    disable_nagle_algorithm = True
    server: FakeEsServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self.answer("GET")

    def do_PUT(self) -> None:
        self.answer("PUT")

    def do_POST(self) -> None:
        self.answer("POST")

    def do_DELETE(self) -> None:
        self.answer("DELETE")

    def do_HEAD(self) -> None:
        self.answer("HEAD")

    def answer(self, method: str) -> None:
        parts = urlsplit(self.path)
        path = unquote(parts.path)
        params = dict(parse_qsl(parts.query, keep_blank_values=True))
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        if "ndjson" in (self.headers.get("content-type") or ""):  # a bulk request: one document per line
            body: Any = [json.loads(line) for line in raw.splitlines() if line.strip()]
        else:
            body = json.loads(raw) if raw.strip() else None
        cluster = self.server.cluster
        if path.startswith("/_fake/"):
            status, answer = self.server.control(method, path.removeprefix("/_fake/"))
            label = ""
        else:
            with cluster.lock:
                label, (status, answer) = route(cluster, Request(method if method != "HEAD" else "GET", path,
                                                                 params, body))
                instead = self.server.tamper.get(label)
                replaced = instead(cluster) if instead is not None else None
            if "filter_path" in params and status < 300:
                answer = filtered(answer, params["filter_path"])
            if replaced is not None:  # a broken proxy's answer in the cluster's place
                status, answer = 200, replaced
            elif (forge := self.server.forge.get(label)) is not None and status < 300:
                answer = forge(answer)  # one field forged in the real answer (a node that lies about itself)
        text = isinstance(answer, Text | bytes)
        data = answer if isinstance(answer, bytes) else answer.encode() if isinstance(answer, Text) else \
            json.dumps(answer, separators=(",", ":")).encode()
        if label:
            self.server.counts.add(label, len(data))
        self.send_response(status)
        self.send_header("content-type", "text/plain; charset=UTF-8" if text else "application/json")
        self.send_header("X-elastic-product", "Elasticsearch")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        if method != "HEAD":
            self.wfile.write(data)


class FakeEsServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, cluster: FakeCluster, port: int = 0) -> None:
        super().__init__(("127.0.0.1", port), Handler)
        self.cluster = cluster
        self.counts = Counts()
        # endpoint -> what answers in the cluster's place (a broken proxy, say): a function of the cluster's
        # state giving a JSON value, or bytes sent as they are (JSON nested too deep to encode); None: the
        # cluster answers.
        self.tamper: dict[str, Callable[[FakeCluster], Any]] = {}
        self.forge: dict[str, Callable[[Any], Any]] = {}  # label -> the real answer (filtered) changed
        # (least, most) real seconds a started node takes to be back (drawn per start); None: at once.
        self.restart_s: tuple[float, float] | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def control(self, method: str, what: str) -> tuple[int, Any]:
        """What the fake host transport and a benchmark ask: stop/NAME, start/NAME, active/NAME, counts."""
        verb, _, name = what.partition("/")
        if verb == "start" and method == "POST" and name in self.cluster.by_name and self.restart_s is not None:
            with self.cluster.lock:
                after_s = self.cluster.random.uniform(*self.restart_s)
            timer = threading.Timer(after_s, self.cluster.start, [name])
            timer.daemon = True
            timer.start()
            return 200, {"ok": True, "back_in_s": after_s}
        if verb in ("stop", "start") and method == "POST" and name in self.cluster.by_name:
            (self.cluster.stop if verb == "stop" else self.cluster.start)(name)
            return 200, {"ok": True}
        if verb == "active" and name in self.cluster.by_name:
            return 200, {"active": self.cluster.by_name[name].up}
        if verb == "counts":  # DELETE: read and start again
            counted = self.counts.as_json()
            if method == "DELETE":
                self.counts.reset()
            return 200, counted
        return 404, {"error": f"no such fake control: {method} {what}"}

    def __enter__(self) -> FakeEsServer:
        self._thread = threading.Thread(target=self.serve_forever, name="fake-es", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.shutdown()
        self.server_close()
