"""Unreachable endpoint, refused credentials, untrusted TLS certificate: each a clear error before any change.

Served by small servers on 127.0.0.1 that this test starts and stops; no sandbox needed.
"""

from __future__ import annotations

import datetime
import http.server
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.helpers import assert_no_traceback, orchestrate


class Refuse401(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b'{"error":{"type":"security_exception","reason":"unable to authenticate user"},"status":401}'
        self.send_response(401)
        self.send_header("Content-Type", "application/json")
        self.send_header("X-Elastic-Product", "Elasticsearch")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_POST = do_GET  # the plan's first request asks which privileges the user has

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[str]:
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Refuse401)
    scheme = "http"
    if request.param == "tls":
        key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "untrusted.test")])
        now = datetime.datetime.now(datetime.UTC)
        cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
                .serial_number(1).not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
                .sign(key, hashes.SHA256()))
        (tmp_path / "cert.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        (tmp_path / "key.pem").write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                                             serialization.PrivateFormat.PKCS8,
                                                             serialization.NoEncryption()))
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(tmp_path / "cert.pem", tmp_path / "key.pem")
        httpd.socket = ctx.wrap_socket(httpd.socket, server_side=True)
        scheme = "https"
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"{scheme}://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def inventory(tmp_path: Path, endpoint: str) -> Path:
    path = tmp_path / "inv.yaml"
    path.write_text(yaml.safe_dump({
        "cluster": {"name": "remote", "endpoints": [endpoint], "username": "u", "password": {"env": "ORCH_PW"},
                    "request_timeout_s": 5},
        "ssh": {"known_hosts": "/dev/null"}, "nodes": [{"name": "n1", "host": "127.0.0.1"}]}))
    return path


@pytest.mark.parametrize("server", ["http"], indirect=True)
def test_refused_credentials(server: str, tmp_path: Path) -> None:
    proc = orchestrate("plan", "--config", str(inventory(tmp_path, server)), env={"ORCH_PW": "wrong"})
    assert proc.returncode == 4 and "refused the credentials (HTTP 401)" in proc.stderr
    assert_no_traceback(proc)


@pytest.mark.parametrize("server", ["tls"], indirect=True)
def test_untrusted_tls_certificate(server: str, tmp_path: Path) -> None:
    proc = orchestrate("restart", "--config", str(inventory(tmp_path, server)), "--yes", env={"ORCH_PW": "x"})
    assert proc.returncode == 4 and "TLS certificate" in proc.stderr and "not trusted" in proc.stderr
    assert_no_traceback(proc)


def test_unreachable_endpoint(tmp_path: Path) -> None:
    proc = orchestrate("plan", "--config", str(inventory(tmp_path, "http://127.0.0.1:9")), env={"ORCH_PW": "x"})
    assert proc.returncode == 4 and "cannot connect to http://127.0.0.1:9" in proc.stderr
    assert_no_traceback(proc)
