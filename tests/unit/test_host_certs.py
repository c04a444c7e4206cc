"""OpenSSH host certificates checked as OpenSSH checks them, on certificates made by the real
`ssh-keygen`: the authority, the host's name among the principals, a host (not user) certificate,
the validity period, and the @cert-authority line's patterns. The transport over real sshd hosts
with certificates: tests/integration/test_ssh_route.py."""

from __future__ import annotations

import base64
import subprocess
import time
from pathlib import Path

import pytest

from orchestrator.hosts.host_certs import CertAuthority, certificate_problem
from orchestrator.hosts.transport import KnownHosts

HOST = "10.0.0.5"


def keygen(path: Path) -> Path:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)
    return path


def certificate(tmp_path: Path, ca: Path, *options: str) -> tuple[str, bytes]:
    """A certificate for a fresh host key signed by ``ca``: (its key type, its blob)."""
    host_key = keygen(tmp_path / f"host{len(list(tmp_path.glob('host*')))}")
    subprocess.run(["ssh-keygen", "-q", "-s", str(ca), "-I", "test", *options, str(host_key) + ".pub"], check=True)
    kind, blob, *_ = Path(str(host_key) + "-cert.pub").read_text().split()
    return kind, base64.b64decode(blob)


def authority(ca: Path, patterns: str = "10.0.0.*") -> CertAuthority:
    kind, key, *_ = Path(str(ca) + ".pub").read_text().split()
    parsed = CertAuthority.parse(f"{patterns} {kind} {key} ca-comment", 1)
    assert parsed is not None
    return parsed


@pytest.fixture
def ca(tmp_path: Path) -> Path:
    return keygen(tmp_path / "ca")


def test_a_host_certificate_from_a_listed_authority_naming_the_host_is_accepted(tmp_path: Path, ca: Path) -> None:
    kind, blob = certificate(tmp_path, ca, "-h", "-n", f"{HOST},es-1", "-V", "-5m:+1d")
    assert kind == "ssh-ed25519-cert-v01@openssh.com"
    assert certificate_problem(kind, blob, [authority(ca)], HOST, 22, time.time()) is None


@pytest.mark.parametrize(("options", "host", "port", "patterns", "problem"), [
    (("-h", "-n", "10.0.0.6"), HOST, 22, "10.0.0.*", "names 10.0.0.6, not 10.0.0.5"),
    (("-h", "-n", HOST, "-V", "20200101:20200102"), HOST, 22, "10.0.0.*", "not valid now"),
    (("-n", HOST), HOST, 22, "10.0.0.*", "a user certificate, not a host certificate"),
    (("-h", "-n", HOST), HOST, 22, "10.1.0.*", "no @cert-authority line names 10.0.0.5"),
    (("-h", "-n", HOST), HOST, 22, "!10.0.0.5,10.0.0.*", "no @cert-authority line names"),
    (("-h", "-n", HOST), HOST, 2222, "10.0.0.*", "no @cert-authority line names [10.0.0.5]:2222"),
])
def test_a_certificate_that_does_not_vouch_for_the_host_is_refused_saying_why(
        tmp_path: Path, ca: Path, options: tuple[str, ...], host: str, port: int, patterns: str, problem: str) -> None:
    kind, blob = certificate(tmp_path, ca, *options)
    said = certificate_problem(kind, blob, [authority(ca, patterns)], host, port, time.time())
    assert said is not None and problem in said, said


def test_a_certificate_signed_by_another_authority_is_refused(tmp_path: Path, ca: Path) -> None:
    other = keygen(tmp_path / "other-ca")
    kind, blob = certificate(tmp_path, other, "-h", "-n", HOST)
    said = certificate_problem(kind, blob, [authority(ca)], HOST, 22, time.time())
    assert said == "the certificate is signed by an authority not listed for 10.0.0.5"
    assert certificate_problem(kind, blob, [authority(ca), authority(other)], HOST, 22, time.time()) is None
    plain = base64.b64decode(Path(tmp_path / "host0.pub").read_text().split()[1])
    assert "plain key" in (certificate_problem("ssh-ed25519", plain, [authority(ca)], HOST, 22, time.time()) or "")


def test_known_hosts_keeps_the_authorities_and_counts_an_unusable_line(tmp_path: Path, ca: Path) -> None:
    kind, key, *_ = Path(str(ca) + ".pub").read_text().split()
    (tmp_path / "known_hosts").write_text(f"@cert-authority 10.0.0.*,[10.0.0.5]:2222 {kind} {key}\n"
                                          "@cert-authority *.example ssh-ed25519 AAAA\n")
    known = KnownHosts.load(tmp_path / "known_hosts")
    assert [a.patterns for a in known.cert_authorities] == [("10.0.0.*", "[10.0.0.5]:2222")]
    assert known.unreadable == [2]
    assert known.cert_authorities[0].vouches_for("[10.0.0.5]:2222")


def test_a_certificate_whose_authority_is_revoked_is_refused(tmp_path: Path, ca: Path) -> None:
    """OpenSSH refuses a certificate signed by an authority whose key a `@revoked` line names: so does the
    tool's policy, before it authenticates (tests/unit/test_revoked_host_keys.py for the host key itself)."""
    kind, blob = certificate(tmp_path, ca, "-h", "-n", HOST)
    listed = authority(ca)
    assert certificate_problem(kind, blob, [listed], HOST, 22, time.time()) is None
    said = certificate_problem(kind, blob, [listed], HOST, 22, time.time(), frozenset({listed.blob}))
    assert said == "the authority that would vouch for it is marked @revoked"
