"""What an operator reads when the endpoint is wrong: one sentence that says what is wrong and what to
do, against real servers on 127.0.0.1 (plain HTTP, TLS with a certificate nobody trusts, a web page,
nothing listening), through both clients; and a secret written inline."""

from __future__ import annotations

import http.server
import ssl
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.config.model import Inventory
from orchestrator.errors import ClusterError
from orchestrator.products import get

PAGE = b"<html>\n<head><title>Welcome to nginx!</title></head>\n<body>\n<h1>Welcome</h1>\n" + b"<p>x</p>\n" * 10


class Page(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(404)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(PAGE)))
        self.end_headers()
        self.wfile.write(PAGE)

    do_POST = do_PUT = do_GET

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    where = tmp_path_factory.mktemp("tls")
    cert, key = where / "c.pem", where / "k.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out",
                    str(cert), "-days", "2", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True)
    plain = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
    tls = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(str(cert), str(key))
    tls.socket = context.wrap_socket(tls.socket, server_side=True)
    for server in (plain, tls):
        threading.Thread(target=server.serve_forever, daemon=True).start()
    closed = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
    closed_port = closed.server_address[1]
    closed.server_close()  # a port nothing listens on
    try:
        yield {"plain": f"127.0.0.1:{plain.server_address[1]}", "tls": f"127.0.0.1:{tls.server_address[1]}",
               "closed": f"127.0.0.1:{closed_port}"}
    finally:
        for server in (plain, tls):
            server.shutdown()
            server.server_close()


def said(product: str, endpoint: str) -> str:
    inv = Inventory.model_validate({"cluster": {"name": "c", "product": product, "endpoints": [endpoint],
                                                "request_timeout_s": 5},
                                    "ssh": {"transport": "local"}, "nodes": [{"name": "a", "host": "h"}]})
    with pytest.raises(ClusterError) as err:
        get(product).connect(inv).health()  # type: ignore[attr-defined]
    return str(err.value)


@pytest.mark.parametrize("product", ["elasticsearch", "opensearch"])
def test_each_wrong_endpoint_says_what_is_wrong_and_what_to_do(product: str, servers: dict[str, str]) -> None:
    https_to_plain = said(product, f"https://{servers['plain']}")
    assert "does not answer in TLS: it looks like plain HTTP there. Write the endpoint as http://" in https_to_plain
    assert "not trusted" not in https_to_plain
    untrusted = said(product, f"https://{servers['tls']}")
    assert untrusted.startswith(f"the TLS certificate of https://{servers['tls']} is not trusted")
    assert "cluster.ca_file" in untrusted and "--ca-file" in untrusted and "SSLError(" not in untrusted
    page = said(product, f"http://{servers['plain']}")
    assert "a page that is not" in page and "'Welcome to nginx!'" in page and "<p>" not in page
    assert page.count("\n") == 0 and len(page) < 400
    nothing = said(product, f"http://{servers['closed']}")
    assert nothing.startswith(f"cannot connect to http://{servers['closed']}: [Errno 111] Connection refused")


def test_a_secret_written_inline_says_how_to_give_it(tmp_path: Path) -> None:
    from orchestrator.config.loader import load_model
    from orchestrator.errors import ConfigError

    path = tmp_path / "c.yaml"
    path.write_text("cluster: {name: c, endpoints: ['http://127.0.0.1:9'], username: u, password: hunter2}\n"
                    "ssh: {transport: local}\nnodes: [{name: a, host: h}]\n")
    with pytest.raises(ConfigError) as err:
        load_model(path, Inventory)
    text = str(err.value)
    assert "{env: VARIABLE}" in text and "{file: PATH}" in text and "hunter2" not in text
