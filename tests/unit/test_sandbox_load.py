"""The sandbox's load generator reaches the nodes either each in turn (a node away shows as errors) or through
one pool, as an application's client does (a node away is left out and the request sent to another)."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from orchestrator.sandbox.load import LoadGenerator

# Enough of every answer the load reads: an index created, green health, a write, a search's hits.
ANSWER = json.dumps({"acknowledged": True, "status": "green", "number_of_nodes": 2, "result": "created",
                     "hits": {"total": {"value": 0}, "hits": []}}).encode()


class AnswersEverything(BaseHTTPRequestHandler):
    def _answer(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("X-elastic-product", "Elasticsearch")
        self.send_header("content-length", str(len(ANSWER)))
        self.end_headers()
        self.wfile.write(ANSWER)

    do_GET = do_PUT = do_POST = _answer

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def one_node_up_one_away() -> Iterator[list[str]]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), AnswersEverything)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    with socket.socket() as unused:  # a port nothing listens on: the node that is away
        unused.bind(("127.0.0.1", 0))
        away = unused.getsockname()[1]
    try:
        yield [f"http://127.0.0.1:{server.server_address[1]}", f"http://127.0.0.1:{away}"]
    finally:
        server.shutdown()
        server.server_close()


def searches_for_a_second(endpoints: list[str], through: str) -> dict[str, int]:
    load = LoadGenerator(endpoints, index="load", duration_s=1, max_docs=50, through=through)
    load.start()
    time.sleep(1.2)
    load.stop()
    stats = load.windows["before"]
    return {"ok": stats.search_ok, "failed": stats.search_errors}


def test_through_each_node_a_node_away_shows_as_failed_searches(one_node_up_one_away: list[str]) -> None:
    searches = searches_for_a_second(one_node_up_one_away, "each")
    assert searches["ok"] > 0 and searches["failed"] > 0, searches


def test_through_a_pool_as_clients_search_a_node_away_is_left_out_and_no_search_fails(
        one_node_up_one_away: list[str]) -> None:
    searches = searches_for_a_second(one_node_up_one_away, "pool")
    assert searches["ok"] > 10 and searches["failed"] == 0, searches


def test_an_unknown_way_to_the_nodes_is_refused() -> None:
    with pytest.raises(ValueError, match="through: one of each, pool"):
        LoadGenerator(["http://127.0.0.1:9"], through="balancer")


class KeepsConnections(AnswersEverything):
    """HTTP/1.1: each client connection stays open, served by its own thread, until the client closes it."""

    protocol_version = "HTTP/1.1"
    open_connections = 0
    lock = threading.Lock()

    def setup(self) -> None:
        super().setup()
        with self.lock:
            KeepsConnections.open_connections += 1

    def finish(self) -> None:
        with self.lock:
            KeepsConnections.open_connections -= 1
        super().finish()


def test_a_closed_load_closes_its_connections_which_a_stopped_one_keeps_for_the_read_back() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), KeepsConnections)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        load = LoadGenerator([url, url], index="load", duration_s=1, max_docs=50)
        load.start()
        time.sleep(0.5)
        load.stop()
        assert KeepsConnections.open_connections > 0  # kept: `missing_acknowledged` reads through them
        load.close()
        deadline = time.monotonic() + 5
        while KeepsConnections.open_connections and time.monotonic() < deadline:
            time.sleep(0.05)
        assert KeepsConnections.open_connections == 0
    finally:
        server.shutdown()
        server.server_close()
