"""The SSH transport against an in-process SSH server on loopback that misbehaves on purpose.

A link cut at the wrong moment leaves paramiko waiting, with no timeout of its own, for the server to
accept a command or to send its exit status. The transport must give up at its command timeout.
"""

from __future__ import annotations

import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import paramiko
import pytest

from orchestrator.config.model import Inventory
from orchestrator.errors import HostUnreachable
from orchestrator.hosts.transport import SshTransport


class SilentServer(paramiko.ServerInterface):
    """Accepts the key and the session, then never answers the command (as if the link went down)."""

    def __init__(self, answer_exec: bool) -> None:
        self.answer_exec = answer_exec
        self.released = threading.Event()

    def get_allowed_auths(self, username: str) -> str:
        return "publickey"

    def check_auth_publickey(self, username: str, key: paramiko.PKey) -> int:
        return paramiko.AUTH_SUCCESSFUL

    def check_channel_request(self, kind: str, chanid: int) -> int:
        return paramiko.OPEN_SUCCEEDED

    def check_channel_exec_request(self, channel: paramiko.Channel, command: bytes) -> bool:
        if not self.answer_exec:
            self.released.wait(60)  # holds the reply back; bounded so the server thread always ends
        return True  # accepted, but no output, no EOF and no exit status ever follow


@pytest.fixture(params=[False, True], ids=["exec-never-accepted", "exit-status-never-sent"])
def silent_server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[int, Path, Path]]:
    host_key = paramiko.Ed25519Key.from_private_key_file(str(make_key(tmp_path / "host")))
    server = SilentServer(answer_exec=request.param)
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    (tmp_path / "known_hosts").write_text(f"[127.0.0.1]:{port} {host_key.get_name()} {host_key.get_base64()}\n")
    transports: list[paramiko.Transport] = []

    def serve() -> None:
        conn, _ = listener.accept()
        transport = paramiko.Transport(conn)
        transport.add_server_key(host_key)
        transports.append(transport)
        transport.start_server(server=server)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield port, tmp_path / "known_hosts", make_key(tmp_path / "client")
    finally:
        server.released.set()
        for t in transports:
            t.close()
        listener.close()
        thread.join(10)


def make_key(path: Path) -> Path:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)
    return path


def test_a_command_whose_server_goes_silent_ends_at_its_timeout(silent_server: tuple[int, Path, Path]) -> None:
    port, known_hosts, key = silent_server
    inv = Inventory.model_validate({
        "cluster": {"name": "c", "endpoints": ["http://127.0.0.1:9"]},
        "ssh": {"user": "root", "port": port, "known_hosts": str(known_hosts), "key_file": str(key),
                "command_timeout_s": 2},
        "nodes": [{"name": "n1", "host": "127.0.0.1"}]})
    transport = SshTransport(inv)
    outcome: list[BaseException | str] = []

    def attempt() -> None:
        try:
            transport.run(inv.nodes[0], "true")
            outcome.append("returned")
        except BaseException as exc:  # the test inspects whatever came out
            outcome.append(exc)

    started = time.monotonic()
    worker = threading.Thread(target=attempt, daemon=True)
    worker.start()
    worker.join(30)
    took = time.monotonic() - started
    transport.close()
    assert not worker.is_alive(), "the command hung past its timeout"
    assert len(outcome) == 1 and isinstance(outcome[0], HostUnreachable), outcome
    assert "timed out after 2 s" in str(outcome[0])
    assert took < 15, f"gave up only after {took:.1f} s"
