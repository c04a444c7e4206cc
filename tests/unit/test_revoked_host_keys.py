"""A host key, or a certificate's authority, marked `@revoked` in known_hosts is refused before the tool
authenticates, as OpenSSH refuses it: the client's key is never offered to that host. Against an SSH server
of the test's own (paramiko's) on 127.0.0.1 that counts the authentications it is offered."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import paramiko
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat

from orchestrator.config.model import Inventory, NodeEntry
from orchestrator.errors import HostUnreachable
from orchestrator.hosts.transport import SshTransport

HOST_KEY = paramiko.RSAKey.generate(2048)
USER_KEY_TEXT = Ed25519PrivateKey.generate().private_bytes(Encoding.PEM, PrivateFormat.OpenSSH, NoEncryption())


class Server(paramiko.ServerInterface):
    def __init__(self) -> None:
        self.offered: list[str] = []

    def get_allowed_auths(self, username: str) -> str:
        return "publickey"

    def check_auth_publickey(self, username: str, key: paramiko.PKey) -> int:
        self.offered.append(key.get_base64())
        return paramiko.AUTH_FAILED


@pytest.fixture
def server() -> Iterator[tuple[int, Server]]:
    listening = socket.create_server(("127.0.0.1", 0))
    listening.settimeout(20)
    answering = Server()

    def serve() -> None:
        for _ in range(2):  # bounded: the tests connect at most twice
            try:
                conn, _ = listening.accept()
            except OSError:
                return
            transport = paramiko.Transport(conn)
            transport.add_server_key(HOST_KEY)
            try:
                transport.start_server(server=answering)
                transport.accept(2)
            except (paramiko.SSHException, EOFError, OSError):
                pass

    threading.Thread(target=serve, daemon=True).start()
    yield listening.getsockname()[1], answering
    listening.close()


def transport_with(tmp_path: Path, port: int, known: str) -> tuple[SshTransport, NodeEntry]:
    (tmp_path / "known_hosts").write_text(known)
    (tmp_path / "id").write_bytes(USER_KEY_TEXT)
    (tmp_path / "id").chmod(0o600)
    inv = Inventory.model_validate({
        "cluster": {"name": "c", "endpoints": ["http://127.0.0.1:9"]},
        "ssh": {"user": "root", "known_hosts": str(tmp_path / "known_hosts"), "key_file": str(tmp_path / "id"),
                "connect_timeout_s": 5, "port": port},
        "nodes": [{"name": "a", "host": "127.0.0.1"}]})
    return SshTransport(inv), inv.nodes[0]


@pytest.mark.parametrize("listed", [True, False])
def test_a_revoked_host_key_is_refused_before_authenticating(tmp_path: Path, server: tuple[int, Server],
                                                             listed: bool) -> None:
    port, answering = server
    name = f"[127.0.0.1]:{port}"
    lines = [f"@revoked * {HOST_KEY.get_name()} {HOST_KEY.get_base64()}"]
    if listed:  # listed as well, as a key someone added before it was revoked
        lines.append(f"{name} {HOST_KEY.get_name()} {HOST_KEY.get_base64()}")
    transport, node = transport_with(tmp_path, port, "\n".join(lines) + "\n")
    with pytest.raises(HostUnreachable, match=r"marked @revoked .* refused before authenticating"):
        transport.check(node)
    assert answering.offered == [], "the client's key was never offered to the revoked host"


def test_an_unrevoked_listed_key_is_accepted_and_then_authenticates(tmp_path: Path,
                                                                    server: tuple[int, Server]) -> None:
    port, answering = server
    transport, node = transport_with(tmp_path, port, f"[127.0.0.1]:{port} {HOST_KEY.get_name()} "
                                                     f"{HOST_KEY.get_base64()}\n")
    with pytest.raises(HostUnreachable, match="the SSH key was refused"):
        transport.check(node)
    user_key = paramiko.Ed25519Key.from_private_key_file(str(tmp_path / "id"))
    assert answering.offered == [user_key.get_base64()], "accepted, the host is offered the client's key"
