"""Running commands on a node's host. SSH through paramiko (host keys verified), or locally.

Commands are strings for a POSIX shell; every value put into one must be quoted by the
caller with ``shlex.quote`` (see ``service.py`` and ``tuning``).
"""

from __future__ import annotations

import logging
import shlex
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from orchestrator.config.loader import read_bytes_of
from orchestrator.config.model import Inventory, NodeEntry, SecretSource
from orchestrator.errors import ConfigError, HostError, HostUnreachable
from orchestrator.hosts.environment import base_environment, proxy_environment
from orchestrator.hosts.host_certs import CertAuthority, certificate_problem, host_key_name
from orchestrator.hosts.ssh_config import Hop, Route, SshConfig, proxy_argv, route

MAX_OUTPUT_BYTES = 16 * 2**20  # of one command's output: what the tool reads of a host (the rest is refused)
MAX_KNOWN_HOSTS_BYTES = 50_000_000  # a known_hosts file of a large fleet, with its comments

# Every command run on a host, for the run's audit log (runs/audit.py): host, command, exit code, time.
log = logging.getLogger("orchestrator.hosts")
# paramiko's own thread logs a failed connection with a traceback (a rebooting host's sshd resets it,
# say); the tool says each failure in its own words, so paramiko's log reaches no terminal.
logging.getLogger("paramiko").addHandler(logging.NullHandler())


def audited(node: NodeEntry, command: str, started: float, rc: int | None, error: str | None = None) -> None:
    log.info("%s: %s -> %s", node.name, " ".join(command.split())[:300], rc if error is None else error,
             extra={"audit": {"kind": "command", "node": node.name, "host": node.host, "command": command,
                              "rc": rc, "error": error, "duration_s": round(time.monotonic() - started, 3)}})


if TYPE_CHECKING:  # imported when SSH is first used: `plan` and `--help` do not pay for it
    import paramiko


@dataclass(frozen=True)
class CommandResult:
    rc: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.rc == 0


class Transport(Protocol):
    def run(self, node: NodeEntry, command: str, timeout_s: float | None = None,
            stdin: bytes | None = None) -> CommandResult:
        """Run ``command``; ``stdin`` (file contents, say) is sent on its standard input, never in its argv."""
        ...

    def check(self, node: NodeEntry) -> None: ...

    def exact_sudo(self, node: NodeEntry) -> bool:
        """Whether root's actions on ``node`` must be exact `sudo -n` calls (hosts/actions.py) rather than
        a command run as root as a whole."""
        ...

    def close(self) -> None: ...


class LocalTransport:
    """Runs commands on this machine (sandbox local mode, or a tool run on the node itself), each with
    ``env`` as its whole environment (by default the base one, `BASE_ENVIRONMENT`)."""

    def __init__(self, default_timeout_s: float = 300, env: dict[str, str] | None = None) -> None:
        self.default_timeout_s = default_timeout_s
        self.env = base_environment() if env is None else env

    def run(self, node: NodeEntry, command: str, timeout_s: float | None = None,
            stdin: bytes | None = None) -> CommandResult:
        started = time.monotonic()
        try:
            proc = subprocess.run(["/bin/sh", "-c", command], capture_output=True, input=stdin or b"",
                                  timeout=timeout_s or self.default_timeout_s, env=self.env)
        except subprocess.TimeoutExpired as exc:
            audited(node, command, started, None, f"timed out after {exc.timeout:.0f} s")
            raise HostError(f"{node.name}: command did not finish in {exc.timeout:.0f} s: {command[:300]}") from exc
        audited(node, command, started, proc.returncode)
        return CommandResult(proc.returncode, proc.stdout.decode(errors="replace"),
                             proc.stderr.decode(errors="replace"))

    def check(self, node: NodeEntry) -> None:
        self.run(node, "true", 10)

    def exact_sudo(self, node: NodeEntry) -> bool:
        return False

    def close(self) -> None:
        pass


@dataclass
class KnownHosts:
    """known_hosts as OpenSSH reads it. paramiko cannot read marker lines (it fails on the whole file),
    so they are taken apart here: `@revoked` keys are refused, `@cert-authority` lines vouch for the
    hosts they name that present a host certificate (hosts/host_certs.py)."""

    keys: paramiko.HostKeys
    revoked: list[paramiko.PKey]
    cert_authorities: list[CertAuthority]
    unreadable: list[int]  # line numbers of lines that are not host keys

    @classmethod
    def load(cls, path: Path) -> KnownHosts:
        import paramiko

        keys, revoked, authorities, unreadable = paramiko.HostKeys(), [], [], []
        try:  # opened once, then checked: a FIFO or a device is refused without reading it, never waited on
            text = read_bytes_of(path, MAX_KNOWN_HOSTS_BYTES).decode(errors="replace")
        except ConfigError as exc:
            raise ConfigError("inventory", [f"ssh.known_hosts: {path}: {'; '.join(exc.problems)}; unknown host keys "
                                            "are refused, so the hosts' keys must be listed there"]) from None
        for number, line in enumerate(text.splitlines(), start=1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            marker = line.split(None, 1)[0] if line.startswith("@") else None
            if marker == "@cert-authority":
                authority = CertAuthority.parse(line.split(None, 1)[1] if " " in line else "", number)
                if authority is None:
                    unreadable.append(number)
                else:
                    authorities.append(authority)
                continue
            try:
                entry = paramiko.hostkeys.HostKeyEntry.from_line(line.split(None, 1)[1] if marker else line, number)
            except (paramiko.SSHException, paramiko.hostkeys.InvalidHostKey, ValueError, IndexError, TypeError):
                entry = None  # not a key this tool can use; counted, never fatal
            if entry is None:
                unreadable.append(number)
            elif marker == "@revoked":
                revoked.append(entry.key)
            elif marker is None:
                for name in entry.hostnames:
                    keys.add(name, entry.key.get_name(), entry.key)
            else:
                unreadable.append(number)
        return cls(keys, revoked, authorities, unreadable)


SUDO_REFUSED = "orchestrator: sudo refused the password"
SUDO_REFUSED_RC = 125


def with_sudo(command: str, stdin: bytes | None, password: str | None) -> tuple[str, bytes | None]:
    """``command`` run as root through sudo, and the standard input to send with it.

    Without a password: ``sudo -n`` (sudo must not ask). With one, the password is the first line of
    standard input, never an argument (`ps` shows those) or part of the command (logged): the remote
    shell reads exactly that line (a shell's `read` takes no byte past the newline, so file contents
    that follow stay for the command), gives it to `sudo -v` through its builtin `printf`, and runs the
    command with ``sudo -n`` under the ticket sudo has just recorded for this shell."""
    as_root = "sudo -n /bin/sh -c " + shlex.quote(command)
    if password is None:
        return as_root, stdin
    # The command is not the shell's last, so the shell does not exec it: its sudo is then the shell's
    # child, as `sudo -v` was, and finds the ticket (recorded per parent process when there is no tty).
    wrapper = (f"IFS= read -r p; printf '%s\\n' \"$p\" | sudo -S -p '' -v || {{ echo '{SUDO_REFUSED}' >&2; "
               f"exit {SUDO_REFUSED_RC}; }}; p=; {as_root}; exit $?")
    return wrapper, password.encode() + b"\n" + (stdin or b"")


CERT_REFUSED = "host certificate refused"


def _certificates_first(sock: Any, **options: Any) -> paramiko.Transport:
    """A paramiko transport that asks the host for its certificate before its plain key."""
    import paramiko

    transport = paramiko.Transport(sock, **options)
    security = transport.get_security_options()
    plain = list(security.key_types)
    security.key_types = [f"{k}-cert-v01@openssh.com" for k in plain if "-cert-" not in k] + plain
    return transport


REVOKED = "host key marked @revoked"


def _checked_policy(authorities: list[CertAuthority], hop: Hop,
                    revoked: frozenset[bytes]) -> paramiko.MissingHostKeyPolicy:
    """What paramiko asks, before authenticating, of a host key not listed (or listed but revoked, which is
    not given to paramiko as known): a `@revoked` key is refused; a host not listed is accepted only with a
    certificate the authorities vouch for (hosts/host_certs.py); anything else is refused."""
    import paramiko

    class CheckedPolicy(paramiko.MissingHostKeyPolicy):
        def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey) -> None:
            if key.asbytes() in revoked:
                raise paramiko.SSHException(REVOKED)
            blob = key.public_blob
            if blob is None or not authorities:
                raise paramiko.SSHException(f"Server {hostname!r} not found in known_hosts")
            problem = certificate_problem(blob.key_type, blob.key_blob, authorities, hop.hostname, hop.port,
                                          time.time(), revoked)
            if problem is not None:
                raise paramiko.SSHException(f"{CERT_REFUSED}: {problem}")

    return CheckedPolicy()


class SshTransport:
    """One SSH connection per host, reused. Unknown or changed host keys are refused."""

    def __init__(self, inv: Inventory, passphrase: str | None = None, sudo_password: str | None = None) -> None:
        self.cfg = inv.ssh
        if self.cfg.known_hosts is None:
            raise ConfigError("inventory", ["ssh.known_hosts: not given; unknown host keys are refused, so the hosts' "
                                            "keys must be listed in a file it names"])
        self.passphrase = passphrase
        self.sudo_password = sudo_password
        self.known = KnownHosts.load(Path(self.cfg.known_hosts).expanduser())
        self._clients: dict[str, paramiko.SSHClient] = {}
        self._jumps: dict[tuple[str, ...], paramiko.SSHClient] = {}  # jump connections, shared by nodes
        self._extra_known: dict[str, KnownHosts] = {}  # UserKnownHostsFile of the SSH config
        self.ssh_config = SshConfig.load(self.cfg)
        self._lock = threading.Lock()  # the tables above; held for moments, never over the network
        # One lock per node while its connection opens (two threads asking for one host open one
        # connection), and one for the shared jump connections: hosts connect in parallel, so a host
        # that is slow to answer holds up no other.
        self._connecting: dict[str, threading.Lock] = {}
        self._jumps_lock = threading.Lock()

    def _user(self, node: NodeEntry) -> str:
        return route(self.ssh_config, self.cfg, node).target.user

    def _connect(self, node: NodeEntry) -> paramiko.SSHClient:
        with self._lock:
            connecting = self._connecting.setdefault(node.name, threading.Lock())
        with connecting:
            with self._lock:
                client = self._clients.get(node.name)
            transport = client.get_transport() if client else None
            if client is not None and transport is not None and transport.is_active():
                return client
            way = route(self.ssh_config, self.cfg, node)
            if way.jumps:
                with self._jumps_lock:
                    sock: Any = self._tunnel(way, node)
            else:
                sock = self._proxy(way.target, node)
            client = self._open(way.target, node, sock, way.known_hosts)
            with self._lock:
                self._clients[node.name] = client
            return client

    def _tunnel(self, way: Route, node: NodeEntry) -> paramiko.Channel:
        """A channel to the target through the route's jump hosts (ProxyJump), each connection reused."""
        previous: paramiko.SSHClient | None = None
        for i, jump in enumerate(way.jumps):
            key = tuple(j.describe() for j in way.jumps[:i + 1])
            client = self._jumps.get(key)
            transport = client.get_transport() if client else None
            if client is None or transport is None or not transport.is_active():
                sock = self._channel(previous, jump, node) if previous is not None else self._proxy(jump, node)
                client = self._open(jump, node, sock, way.known_hosts)
                self._jumps[key] = client
            previous = client
        assert previous is not None
        return self._channel(previous, way.target, node)

    def _proxy(self, hop: Hop, node: NodeEntry) -> paramiko.ProxyCommand | None:
        """The hop's ProxyCommand started (the connection runs over its stdin and stdout); None: none."""
        if hop.proxy_command is None:
            return None
        import shlex

        import paramiko

        try:
            return paramiko.ProxyCommand(shlex.join(["env", "-i", *(f"{k}={v}" for k, v in proxy_environment().items()),
                                                     *proxy_argv(hop.proxy_command)]))
        except paramiko.ProxyCommandFailure as exc:
            raise HostUnreachable(f"{node.name}: its ProxyCommand did not start: {exc}") from exc

    def _channel(self, through: paramiko.SSHClient, to: Hop, node: NodeEntry) -> paramiko.Channel:
        import paramiko

        transport = through.get_transport()
        try:
            assert transport is not None
            return transport.open_channel("direct-tcpip", (to.hostname, to.port), ("127.0.0.1", 0),
                                          timeout=self.cfg.connect_timeout_s)
        except (paramiko.SSHException, OSError, AssertionError) as exc:
            raise HostUnreachable(f"{node.name}: the jump host cannot reach {to.describe()}: "
                                  f"{exc or type(exc).__name__}") from exc

    def _known_keys(self, extra_files: tuple[str, ...]) -> list[KnownHosts]:
        found = [self.known]
        with self._lock:  # hosts connect in parallel: each file read once
            for path in extra_files:
                if path not in self._extra_known and Path(path).is_file():
                    self._extra_known[path] = KnownHosts.load(Path(path))
                if path in self._extra_known:
                    found.append(self._extra_known[path])
        return found

    def _open(self, hop: Hop, node: NodeEntry, sock: paramiko.Channel | paramiko.ProxyCommand | None,
              known_files: tuple[str, ...]) -> paramiko.SSHClient:
        """One verified SSH connection to ``hop`` (directly, or over ``sock`` from a jump host)."""
        import paramiko

        client = paramiko.SSHClient()
        known = self._known_keys(known_files)
        # A key listed and also `@revoked` is not given to paramiko as known: the policy, asked before any
        # authentication (as OpenSSH refuses it), says it is revoked.
        revoked = frozenset(key.asbytes() for table in known for key in table.revoked)
        for table in known:
            for host, by_type in table.keys.items():
                for key in by_type.values():
                    if key.asbytes() not in revoked:
                        client.get_host_keys().add(host, key.get_name(), key)
        name = host_key_name(hop.hostname, hop.port)
        authorities = [a for table in known for a in table.cert_authorities if a.vouches_for(name)]
        client.set_missing_host_key_policy(_checked_policy(authorities, hop, revoked))
        # Not listed by its own key, vouched for by an authority: ask for its certificate first.
        factory = _certificates_first if client.get_host_keys().lookup(name) is None and authorities else None
        jump = "" if hop.alias in (node.host, hop.hostname) else f", jump host {hop.alias}"
        where = f"{hop.describe()} ({node.name}{jump})"
        keys: Any = list(hop.key_files) or None  # paramiko takes one path or a list of them
        try:
            client.connect(hop.hostname, port=hop.port, username=hop.user, key_filename=keys,
                           passphrase=self.passphrase, timeout=self.cfg.connect_timeout_s, sock=sock,
                           banner_timeout=self.cfg.connect_timeout_s, auth_timeout=self.cfg.connect_timeout_s,
                           allow_agent=not hop.key_files, look_for_keys=not hop.key_files,
                           transport_factory=factory)
        except paramiko.BadHostKeyException as exc:
            if exc.key.asbytes() in revoked:
                raise HostUnreachable(f"{where}: the host key is marked @revoked in {self.cfg.known_hosts}; "
                                      "refused before authenticating") from exc
            raise HostUnreachable(f"{where}: the host key does not match {self.cfg.known_hosts}. It may have "
                                  "been reinstalled, or someone is in the middle; check it, then update "
                                  "known_hosts.") from exc
        except paramiko.AuthenticationException as exc:
            raise HostUnreachable(f"{where}: the SSH key was refused (check ssh.key_file or the SSH config's "
                                  "IdentityFile, and the host's authorized_keys)") from exc
        except paramiko.SSHException as exc:
            if "not found in known_hosts" in str(exc):
                raise HostUnreachable(f"{where}: host key unknown; it is not in {self.cfg.known_hosts}, and no "
                                      "@cert-authority line there vouches for it. Add it after checking its "
                                      "fingerprint (unknown keys are refused).") from exc
            if str(exc) == REVOKED:
                raise HostUnreachable(f"{where}: the host key is marked @revoked in {self.cfg.known_hosts}; "
                                      "refused before authenticating") from exc
            if str(exc).startswith(CERT_REFUSED):
                raise HostUnreachable(f"{where}: {exc}; the connection is refused") from exc
            raise HostUnreachable(f"{where}: SSH failed: {exc}") from exc
        except (TimeoutError, OSError) as exc:
            raise HostUnreachable(f"{where}: cannot connect: {exc}") from exc
        except EOFError as exc:  # accepted, then closed before a word (an sshd going down)
            raise HostUnreachable(f"{where}: cannot connect: the host closed the connection") from exc
        return client

    def run(self, node: NodeEntry, command: str, timeout_s: float | None = None,
            stdin: bytes | None = None) -> CommandResult:
        import paramiko

        if self._sudo_rules(node) == "shell":
            command, stdin = with_sudo(command, stdin, self.sudo_password)
        timeout = timeout_s or self.cfg.command_timeout_s
        started = time.monotonic()
        try:
            client, channel = self._session(node)
        except HostUnreachable as exc:
            audited(node, command, started, None, f"opening a session: {exc}")
            raise
        # paramiko bounds only the channel's opening and each read: the wait for the server to accept
        # the command and the wait for its exit status have no timeout, so a link cut at the wrong
        # moment hangs forever. At the deadline the watchdog closes the connection, which ends those
        # waits with an error.
        watchdog = threading.Timer(timeout, client.close)
        watchdog.daemon = True
        watchdog.start()
        stage = "starting it"
        try:
            channel.settimeout(timeout)
            channel.exec_command(command)
            to_command, stdout, stderr = (channel.makefile_stdin("wb"), channel.makefile("r"),
                                          channel.makefile_stderr("r"))
            stage = "sending its input"
            if stdin:
                to_command.write(stdin)
            to_command.channel.shutdown_write()  # end of input: a command reading it never waits
            stage = "reading its output"
            out_bytes = stdout.read(MAX_OUTPUT_BYTES + 1)
            if len(out_bytes) > MAX_OUTPUT_BYTES:  # no host makes the tool read (and keep) without end
                self._drop(node)
                audited(node, command, started, None, f"answered more than {MAX_OUTPUT_BYTES} bytes")
                raise HostError(f"{node.name}: the command answered more than {MAX_OUTPUT_BYTES // 2**20} MiB; the "
                                f"rest was not read: {command[:200]}")
            out = out_bytes.decode(errors="replace")
            err = stderr.read(MAX_OUTPUT_BYTES).decode(errors="replace")
            stage = "waiting for its exit status"
            rc = stdout.channel.recv_exit_status()
            if watchdog.finished.is_set():
                raise TimeoutError("the command did not end in time; the connection was closed")
        except (TimeoutError, EOFError, paramiko.SSHException, OSError) as exc:
            self._drop(node)
            audited(node, command, started, None, f"{stage}: {exc or type(exc).__name__}")
            raise HostUnreachable(f"{node.name} ({node.host}): SSH command failed or timed out after "
                                  f"{timeout:.0f} s ({stage}): {exc or type(exc).__name__}") from exc
        finally:
            watchdog.cancel()
        audited(node, command, started, rc)
        if rc == SUDO_REFUSED_RC and err.rstrip().endswith(SUDO_REFUSED):
            source = self.cfg.sudo_password.describe() if self.cfg.sudo_password else "ssh.sudo_password"
            said = " ".join(err.rstrip()[:-len(SUDO_REFUSED)].split()) or "nothing"
            raise HostError(f"{node.name}: sudo did not accept the password of {self._user(node)} (from {source}); "
                            f"sudo said: {said}")
        return CommandResult(rc, out, err)

    def _session(self, node: NodeEntry) -> tuple[paramiko.SSHClient, paramiko.Channel]:
        """A session on the node's connection. A connection that opens none within connect_timeout_s
        (a link a firewall dropped silently, a server process wedged on it) is dropped and one fresh
        connection tried: no command has started on it, so nothing can run twice."""
        import paramiko

        for attempt in (1, 2):
            client = self._connect(node)
            try:
                transport = client.get_transport()
                if transport is None:
                    raise EOFError("the connection is closed")
                return client, transport.open_session(timeout=self.cfg.connect_timeout_s)
            except (paramiko.SSHException, EOFError, OSError) as exc:
                self._drop(node)
                if attempt == 2:
                    raise HostUnreachable(f"{node.name} ({node.host}): no SSH session could be opened within "
                                          f"{self.cfg.connect_timeout_s:.0f} s, on a fresh connection either: "
                                          f"{exc or type(exc).__name__}") from exc
        raise AssertionError("not reached")

    def _sudo_rules(self, node: NodeEntry) -> str | None:
        """How root's actions reach root on ``node``: None when the SSH user is root or sudo is off."""
        return self.cfg.sudo_rules if self.cfg.sudo and self._user(node) != "root" else None

    def exact_sudo(self, node: NodeEntry) -> bool:
        return self._sudo_rules(node) == "commands"

    def _drop(self, node: NodeEntry) -> None:
        with self._lock:
            client = self._clients.pop(node.name, None)
        if client is not None:
            client.close()

    def check(self, node: NodeEntry) -> None:
        result = self.run(node, "true", self.cfg.connect_timeout_s)
        if not result.ok:
            raise HostError(f"{node.name}: a test command failed on the host: {result.stderr.strip()}")

    def close(self) -> None:
        with self._lock:
            clients, self._clients = list(self._clients.values()), {}
            jumps, self._jumps = list(self._jumps.values()), {}
        for c in [*clients, *reversed(jumps)]:
            c.close()


def make_transport(inv: Inventory) -> Transport:
    if inv.ssh.transport == "local":
        return LocalTransport(inv.ssh.command_timeout_s)
    return SshTransport(inv, _secret(inv.ssh.key_passphrase, "ssh.key_passphrase"),
                        _secret(inv.ssh.sudo_password, "ssh.sudo_password"))


def _secret(source: SecretSource | None, label: str) -> str | None:
    try:
        return source.resolve() if source is not None else None
    except ValueError as exc:
        raise ConfigError("inventory", [f"{label}: {exc}"]) from None
