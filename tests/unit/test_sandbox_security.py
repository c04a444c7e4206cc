"""The secured sandbox's pieces that need no cluster: its CA and certificates, where its secrets go,
what its inventory and status say, and how the x-pack jars are split between the modules."""

from __future__ import annotations

import ipaddress
import os
import ssl
import threading
from pathlib import Path

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec

from orchestrator.errors import SandboxError
from orchestrator.sandbox import certs, security, state
from orchestrator.sandbox.assemble import artifact_name, without_security
from orchestrator.sandbox.inventory_writer import inventory_document
from orchestrator.sandbox.layout import SandboxPaths
from orchestrator.sandbox.node import security_settings
from orchestrator.sandbox.rest import access_of


def test_node_certificate_is_signed_by_the_ca_and_names_its_host_and_address(tmp_path: Path) -> None:
    ca = certs.make_ca(tmp_path / "ca")
    node = certs.issue(ca, tmp_path / "node", "node", "es-1", ["10.231.0.11", "10.231.0.11"])
    ca_cert = x509.load_pem_x509_certificate(ca.cert.read_bytes())
    cert = x509.load_pem_x509_certificate(node.cert.read_bytes())
    cert.verify_directly_issued_by(ca_cert)
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == ["es-1"]
    assert names.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("10.231.0.11")]
    assert ca_cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is True
    assert cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is False
    assert node.key.stat().st_mode & 0o777 == 0o600 and ca.key.stat().st_mode & 0o777 == 0o600
    assert isinstance(cert.public_key(), ec.EllipticCurvePublicKey)


def test_a_tls_client_trusting_the_ca_verifies_the_node_by_its_address(tmp_path: Path) -> None:
    """Python's own TLS stack (what curl-like scripts use) accepts the node's certificate for its IP
    and refuses it for another address: the host name check is real."""
    import socket

    ca = certs.make_ca(tmp_path / "ca")
    node = certs.issue(ca, tmp_path / "node", "node", "localhost", ["127.0.0.1"])
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(node.cert, node.key)
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def serve(n: int) -> None:
        for _ in range(n):
            conn, _addr = listener.accept()
            try:
                with server_ctx.wrap_socket(conn, server_side=True) as tls:
                    tls.recv(1)
            except (ssl.SSLError, OSError):
                pass

    thread = threading.Thread(target=serve, args=(2,), daemon=True)
    thread.start()
    client_ctx = ssl.create_default_context(cafile=str(ca.cert))
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw, \
            client_ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
        assert tls.version() is not None
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw, \
            pytest.raises(ssl.SSLCertVerificationError, match=r"IP address mismatch|doesn't match"):
        client_ctx.wrap_socket(raw, server_hostname="127.0.0.2")
    thread.join(timeout=5)
    listener.close()


def test_prepare_writes_a_fresh_ca_and_root_only_secrets(tmp_path: Path) -> None:
    paths = SandboxPaths(tmp_path)
    security.prepare(paths)
    first = paths.ca_cert.read_bytes()
    password = paths.secret(security.ELASTIC_PASSWORD)
    assert password.stat().st_mode & 0o777 == 0o600 and paths.secrets_dir.stat().st_mode & 0o777 == 0o700
    assert len(password.read_text().strip()) >= 20
    security.prepare(paths)
    assert paths.ca_cert.read_bytes() != first, "each `up` makes its own CA"
    node_dir = tmp_path / "hosts" / "es-1" / "node"
    security.install_node_files(paths, node_dir, "es-1", ["10.231.0.11"])
    assert (node_dir / "config" / "certs" / "ca.crt").read_bytes() == paths.ca_cert.read_bytes()
    boot = node_dir / "config" / "bootstrap-password"
    assert boot.read_text() == password.read_text() and boot.stat().st_mode & 0o777 == 0o600


def test_secured_inventory_and_status_name_files_never_secrets(tmp_path: Path) -> None:
    paths = SandboxPaths(tmp_path)
    security.prepare(paths)
    security.write_secret(paths.secret(security.TOOL_PASSWORD), "tool-secret-value")
    st = state.SandboxState(mode="netns", es_version="9.5.3", cluster_name="sandbox", zones=1, secured=True,
                            hosts=[state.HostRecord("es-1", "zone-1", "10.231.0.11", "https://10.231.0.11:9200")])
    doc = inventory_document(paths, st)
    assert doc["cluster"]["username"] == "orchestrator" and doc["cluster"]["ca_file"] == str(paths.ca_cert)
    assert doc["cluster"]["password"] == {"file": str(paths.secret(security.TOOL_PASSWORD))}
    text = yaml.safe_dump(doc)
    assert "tool-secret-value" not in text and paths.secret(security.ELASTIC_PASSWORD).read_text().strip() not in text
    fields = security.status_fields(paths, True)
    access = access_of({"ca_file": fields["ca_file"], "username": fields["username"],
                        "password_file": fields["password_file"]})
    assert access.password == paths.secret(security.ELASTIC_PASSWORD).read_text().strip()
    assert access.password not in repr(access)
    assert access_of({"ca_file": None}).ca_file is None
    assert security.status_fields(paths, False)["secured"] is False


def test_security_settings_turn_tls_on_both_layers_or_name_no_security_setting() -> None:
    on = security_settings(True)
    assert on["xpack.security.enabled"] is True
    for layer in ("http", "transport"):
        assert on[f"xpack.security.{layer}.ssl.enabled"] is True
        assert on[f"xpack.security.{layer}.ssl.certificate_authorities"] == ["certs/ca.crt"]
    assert on["xpack.security.transport.ssl.verification_mode"] == "full"
    assert security_settings(False) == {}


@pytest.mark.parametrize(("jar", "artifact"), [
    ("slf4j-api-2.0.18.jar", "slf4j-api"), ("slf4j-api-1.7.36.jar", "slf4j-api"),
    ("log4j-1.2-api-2.26.1.jar", "log4j-1.2-api"), ("jcip-annotations-1.0-1.jar", "jcip-annotations"),
    ("guava-32.0.1-jre.jar", "guava"), ("netty-codec-http-4.1.135.Final.jar", "netty-codec-http"),
    ("listenablefuture-9999.0-empty-to-avoid-conflict-with-guava.jar", "listenablefuture"),
    ("x-pack-core-9.5.3.jar", "x-pack-core"),
])
def test_jars_are_compared_by_artifact_so_one_library_is_never_there_twice(jar: str, artifact: str) -> None:
    # x-pack-security resolved alone picks slf4j 1.7 where x-pack-core has 2.0: the server refuses
    # a class found in two jars ("jar hell"), so the split compares artifacts, not file names.
    assert artifact_name(jar) == artifact


def test_an_insecure_home_is_the_same_files_without_the_security_modules(tmp_path: Path) -> None:
    home = tmp_path / "elasticsearch-9.5.3"
    for module in ("transport-netty4", "x-pack-core", "x-pack-security"):
        (home / "modules" / module).mkdir(parents=True)
        (home / "modules" / module / "m.jar").write_bytes(module.encode())
    (home / "lib").mkdir()
    (home / "lib" / "server.jar").write_bytes(b"server")
    (home / ".complete").write_text("3\n")
    lean = without_security(home)
    assert lean == tmp_path / "elasticsearch-9.5.3-insecure"
    assert sorted(p.name for p in (lean / "modules").iterdir()) == ["transport-netty4"]
    # Hard links: no second copy of several hundred MiB of jars.
    assert (lean / "lib" / "server.jar").stat().st_ino == (home / "lib" / "server.jar").stat().st_ino
    assert sorted(p.name for p in tmp_path.iterdir()) == ["elasticsearch-9.5.3", "elasticsearch-9.5.3-insecure"]
    (lean / "lib" / "left-by-hand.jar").write_bytes(b"x")
    assert without_security(home) == lean and (lean / "lib" / "left-by-hand.jar").exists()  # reused
    (home / ".complete").write_text("3\n")  # the full home rebuilt (a later marker): the insecure one follows
    os.utime(home / ".complete", ns=(0, (home / ".complete").stat().st_mtime_ns + 1_000_000_000))
    (home / "lib" / "server.jar").unlink()
    (home / "lib" / "server.jar").write_bytes(b"server 2")
    without_security(home)
    assert (lean / "lib" / "server.jar").read_bytes() == b"server 2"
    assert not (lean / "lib" / "left-by-hand.jar").exists()


class _SecurityIndexNotReady:
    """A cluster whose reserved realm answers 401 to `elastic` twice (the `.security` index being
    created), then accepts every write; or refuses with ``fail_with`` for good."""

    def __init__(self, fail_with: int = 401, failures: int = 2) -> None:
        self.fail_with, self.failures = fail_with, failures
        self.calls: list[str] = []

    def request(self, what: str, method: str, path: str, body: object = None) -> dict[str, str]:
        from orchestrator.shards.rest import HttpError

        self.calls.append(path)
        if self.failures:
            self.failures -= 1
            raise HttpError(f"{what}: refused (HTTP {self.fail_with})", self.fail_with)
        return {"encoded": "a2V5"}


def test_tool_user_waits_while_the_security_index_cannot_yet_authenticate_elastic(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    paths = SandboxPaths(tmp_path)
    security.prepare(paths)
    cluster = _SecurityIndexNotReady()
    monkeypatch.setattr(security, "rest_for", lambda *a, **k: cluster)
    security.create_tool_user(paths, ["https://10.231.0.11:9200"], timeout_s=30)
    assert cluster.calls[:3] == ["/_security/role/orchestrator"] * 3
    assert paths.secret(security.TOOL_API_KEY).read_text().strip() == "a2V5"


def test_tool_user_gives_up_at_once_on_a_refusal_that_waiting_cannot_cure(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    paths = SandboxPaths(tmp_path)
    security.prepare(paths)
    cluster = _SecurityIndexNotReady(fail_with=403, failures=5)
    monkeypatch.setattr(security, "rest_for", lambda *a, **k: cluster)
    with pytest.raises(SandboxError, match=r"setting up the sandbox's users failed: .*HTTP 403"):
        security.create_tool_user(paths, ["https://10.231.0.11:9200"], timeout_s=30)
    assert len(cluster.calls) == 1
