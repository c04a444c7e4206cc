"""The SSH transport against an in-process SSH server on loopback that misbehaves on purpose.

A link cut at the wrong moment leaves paramiko waiting, with no timeout of its own, for the server to
accept a command or to send its exit status. The transport must give up at its command timeout.
"""

from __future__ import annotations

import contextlib
import json
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
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


@contextmanager
def serving(server: paramiko.ServerInterface, released: threading.Event, tmp_path: Path,
            connections: int = 1) -> Iterator[tuple[int, Path, Path, list[paramiko.Transport]]]:
    """``server`` on a loopback port for ``connections`` connections: the port, a known_hosts with its
    key, a client key, and the server's transports. ``released`` ends the server's held replies."""
    host_key = paramiko.Ed25519Key.from_private_key_file(str(make_key(tmp_path / "host")))
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    (tmp_path / "known_hosts").write_text(f"[127.0.0.1]:{port} {host_key.get_name()} {host_key.get_base64()}\n")
    transports: list[paramiko.Transport] = []

    def serve() -> None:
        for _ in range(connections):
            conn, _ = listener.accept()
            transport = paramiko.Transport(conn)
            transport.add_server_key(host_key)
            transports.append(transport)
            transport.start_server(server=server)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield port, tmp_path / "known_hosts", make_key(tmp_path / "client"), transports
    finally:
        released.set()
        for t in transports:
            t.close()
        listener.close()
        thread.join(10)


@pytest.fixture(params=[False, True], ids=["exec-never-accepted", "exit-status-never-sent"])
def silent_server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[int, Path, Path]]:
    server = SilentServer(answer_exec=request.param)
    with serving(server, server.released, tmp_path) as (port, known_hosts, key, _transports):
        yield port, known_hosts, key


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


class Answering(paramiko.ServerInterface):
    """Runs each command as a success with "ok" as its output. ``unanswered_sessions``: that many first
    openings of a session are never answered (as a server process wedged on that connection)."""

    def __init__(self, unanswered_sessions: int = 0) -> None:
        self.released = threading.Event()
        self.sessions_asked = 0
        self.unanswered_sessions = unanswered_sessions
        self.commands: list[bytes] = []

    def get_allowed_auths(self, username: str) -> str:
        return "publickey"

    def check_auth_publickey(self, username: str, key: paramiko.PKey) -> int:
        return paramiko.AUTH_SUCCESSFUL

    def check_channel_request(self, kind: str, chanid: int) -> int:
        self.sessions_asked += 1
        if self.sessions_asked <= self.unanswered_sessions:
            self.released.wait(60)  # bounded, so the server thread always ends
            return paramiko.OPEN_FAILED_ADMINISTRATIVELY_PROHIBITED
        return paramiko.OPEN_SUCCEEDED

    def check_channel_exec_request(self, channel: paramiko.Channel, command: bytes) -> bool:
        self.commands.append(command)

        def answer() -> None:
            # After the client's end of input, which it sends only once the command was accepted: an
            # exit status sent before the reply to the exec request would close the channel under it.
            channel.settimeout(10)
            while channel.recv(1024):
                pass
            channel.sendall(b"ok\n")
            channel.send_exit_status(0)
            channel.close()

        threading.Thread(target=answer, daemon=True).start()
        return True


def test_a_session_never_opened_is_tried_once_on_a_fresh_connection_and_the_command_runs_once(
        tmp_path: Path) -> None:
    server = Answering(unanswered_sessions=1)
    with serving(server, server.released, tmp_path, connections=2) as (port, known_hosts, key, transports):
        inv = Inventory.model_validate({
            "cluster": {"name": "c", "endpoints": ["http://127.0.0.1:9"]},
            "ssh": {"user": "root", "port": port, "known_hosts": str(known_hosts), "key_file": str(key),
                    "connect_timeout_s": 1, "command_timeout_s": 30},
            "nodes": [{"name": "n1", "host": "127.0.0.1"}]})
        ssh = SshTransport(inv)
        try:
            started = time.monotonic()
            result = ssh.run(inv.nodes[0], "echo ok")
            took = time.monotonic() - started
        finally:
            ssh.close()
    assert result.ok and result.stdout == "ok\n"
    assert server.commands == [b"echo ok"], "run exactly once, on the fresh connection"
    assert len(transports) == 2 and took < 10, f"{len(transports)} connections, {took:.1f} s"


def test_hosts_connect_in_parallel_so_a_host_slow_to_answer_holds_up_no_other(tmp_path: Path) -> None:
    """A host that accepts the connection and then says nothing (a wedged sshd) costs its own connect
    timeout, never the other hosts': a check of a fleet is as long as its slowest host, not their sum."""
    silent = socket.create_server(("127.0.0.1", 0))
    accepted = threading.Event()

    def accept_and_say_nothing() -> None:
        with contextlib.suppress(OSError):
            conn, _ = silent.accept()
            accepted.set()
            time.sleep(5)  # bounded: longer than the connect timeout below
            conn.close()

    threading.Thread(target=accept_and_say_nothing, daemon=True).start()
    server = Answering()
    with serving(server, server.released, tmp_path) as (port, known_hosts, key, _transports):
        inv = Inventory.model_validate({
            "cluster": {"name": "c", "endpoints": ["http://127.0.0.1:9"]},
            "ssh": {"user": "root", "known_hosts": str(known_hosts), "key_file": str(key), "connect_timeout_s": 3},
            "nodes": [{"name": "wedged", "host": "127.0.0.1", "ssh_port": silent.getsockname()[1]},
                      {"name": "fine", "host": "127.0.0.1", "ssh_port": port}]})
        ssh = SshTransport(inv)
        wedged_outcome: list[BaseException] = []

        def check_wedged() -> None:
            try:
                ssh.check(inv.nodes[0])
            except HostUnreachable as exc:
                wedged_outcome.append(exc)

        wedged = threading.Thread(target=check_wedged, daemon=True)
        try:
            wedged.start()
            assert accepted.wait(10), "the wedged host's connection was never made"
            started = time.monotonic()
            ssh.check(inv.nodes[1])
            took = time.monotonic() - started
            wedged.join(15)
        finally:
            ssh.close()
            silent.close()
    assert took < 1.5, f"the fine host waited {took:.1f} s for the wedged one's connection"
    assert len(wedged_outcome) == 1, "the wedged host still fails, at its own timeout"


@pytest.mark.parametrize("reset_after_s", [0, 0.3])  # before paramiko reads, and while it reads the banner
def test_a_connection_reset_by_a_rebooting_host_is_one_error_without_paramikos_traceback(tmp_path: Path,
                                                                                         reset_after_s: float) -> None:
    """A host whose sshd is going down accepts and resets: paramiko's own thread logs the failure with
    a traceback, which must not reach the operator's terminal (the tool says it in its own words).
    In a child process: pytest's log capture would hide what a real run prints."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)

    def reset_each() -> None:
        for _ in range(20):  # bounded: a connection or two per attempt
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            time.sleep(reset_after_s)
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            conn.close()

    threading.Thread(target=reset_each, daemon=True).start()
    (tmp_path / "known_hosts").write_text("")
    inv = {"cluster": {"name": "c", "endpoints": ["http://127.0.0.1:9"]},
           "ssh": {"user": "root", "port": listener.getsockname()[1], "known_hosts": str(tmp_path / "known_hosts"),
                   "key_file": str(make_key(tmp_path / "id")), "connect_timeout_s": 5},
           "nodes": [{"name": "n1", "host": "127.0.0.1"}]}
    script = ("import json, sys\nfrom orchestrator.config.model import Inventory\n"
              "from orchestrator.hosts.transport import SshTransport\n"
              "inv = Inventory.model_validate(json.loads(sys.argv[1]))\n"
              "try:\n    SshTransport(inv).run(inv.nodes[0], 'true')\n"
              "except Exception as exc:\n    print(type(exc).__name__, exc)\n")
    proc = subprocess.run([sys.executable, "-c", script, json.dumps(inv)], capture_output=True, text=True,
                          timeout=60, cwd=Path(__file__).resolve().parents[2])
    listener.close()
    assert proc.stdout.startswith("HostUnreachable"), (proc.stdout, proc.stderr)
    assert proc.stderr == "", proc.stderr


def test_a_command_run_on_this_machine_sees_a_small_base_environment_never_the_tools_secrets(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`ssh.transport: local` runs service commands and `where: host` hooks here: the cluster's password, a sudo
    password or a scheduler's secrets in the tool's environment must not reach them."""
    from orchestrator.config.model import NodeEntry
    from orchestrator.hosts.transport import LocalTransport

    monkeypatch.setenv("ES_PASSWORD", "s3cr3t-es")
    monkeypatch.setenv("SUDO_PASSWORD", "s3cr3t-sudo")
    monkeypatch.setenv("AIRFLOW_CONN_PROD", "elasticsearch://u:s3cr3t@h")
    said = LocalTransport().run(NodeEntry(name="a", host="localhost"), "env").stdout
    assert "s3cr3t" not in said and "PATH=" in said


def test_a_proxy_command_sees_the_base_environment_and_the_ssh_agent_never_the_tools_secrets(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """L3: a ProxyCommand inherited the tool's whole environment (the cluster and sudo passwords, Airflow's
    secrets). It runs with the base environment and the SSH agent's socket alone."""
    from orchestrator.config.model import Inventory, NodeEntry
    from orchestrator.hosts.ssh_config import Hop
    from orchestrator.hosts.transport import SshTransport

    monkeypatch.setenv("ES_PASSWORD", "s3cr3t-es")
    monkeypatch.setenv("AIRFLOW_CONN_PROD", "elasticsearch://u:s3cr3t@h")
    monkeypatch.setenv("SSH_AUTH_SOCK", "/run/agent.sock")
    seen, known = tmp_path / "env", tmp_path / "known_hosts"
    known.write_text("")
    transport = SshTransport(Inventory.model_validate({"cluster": {"name": "c", "endpoints": ["http://x:9200"]},
                                                       "ssh": {"known_hosts": str(known)},
                                                       "nodes": [{"name": "a", "host": "h"}]}))
    proxy = transport._proxy(Hop("h", "h", 22, "root", proxy_command=f"env > {seen}"), NodeEntry(name="a", host="h"))
    assert proxy is not None
    deadline = time.monotonic() + 10
    while proxy.process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    proxy.process.wait()  # it wrote what it saw and ended
    for pipe in (proxy.process.stdin, proxy.process.stdout, proxy.process.stderr):
        if pipe is not None:
            pipe.close()
    transport.close()
    said = seen.read_text()
    assert "s3cr3t" not in said and "SSH_AUTH_SOCK=/run/agent.sock" in said and "PATH=" in said
