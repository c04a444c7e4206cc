"""OpenSSH host certificates: known_hosts `@cert-authority` lines, and whether the certificate a host
presents is one they vouch for, checked as OpenSSH checks it (a host certificate, signed by a listed
authority whose pattern matches the host, naming the host among its principals, valid now).

paramiko negotiates certificate host keys and checks the key exchange's signature with the key the
certificate carries, but reads no `@cert-authority` line and never checks the certificate itself:
that is done here, with `cryptography` (already a dependency), when the host is not listed by its own
key. Pure functions; the transport calls them from its host-key policy.
"""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    PublicFormat,
    SSHCertificate,
    SSHCertificateType,
    load_ssh_public_identity,
    load_ssh_public_key,
)


@dataclass(frozen=True)
class CertAuthority:
    """One `@cert-authority PATTERNS KEY` line: the authority's public key, in OpenSSH's one-line form."""

    patterns: tuple[str, ...]
    public_key: bytes  # b"ssh-ed25519 AAAA..."
    line: int

    @classmethod
    def parse(cls, rest: str, line: int) -> CertAuthority | None:
        """The line after its marker, or None when it names no usable key."""
        fields = rest.split()
        if len(fields) < 3:
            return None
        key = f"{fields[1]} {fields[2]}".encode()
        try:
            load_ssh_public_key(key)
        except (ValueError, TypeError):
            return None
        return cls(tuple(fields[0].split(",")), key, line)

    @property
    def blob(self) -> bytes:
        """The authority's key as the SSH wire carries it (what a `@revoked` line is compared with)."""
        return base64.b64decode(self.public_key.split()[1])

    def vouches_for(self, host: str) -> bool:
        """Whether the line's patterns take in ``host`` (`*`, `?`, and `!` to exclude, as OpenSSH reads them)."""
        if any(p.startswith("!") and _matches(host, p[1:]) for p in self.patterns):
            return False
        return any(not p.startswith("!") and _matches(host, p) for p in self.patterns)

    def signed(self, cert: SSHCertificate) -> bool:
        ours = load_ssh_public_key(self.public_key).public_bytes(Encoding.OpenSSH, PublicFormat.OpenSSH)
        theirs = cert.signature_key().public_bytes(Encoding.OpenSSH, PublicFormat.OpenSSH)
        return ours == theirs


def _matches(host: str, pattern: str) -> bool:
    """OpenSSH's patterns know only `*` and `?` (brackets are literal: `[host]:port`); case-insensitive."""
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, host, re.IGNORECASE) is not None


def host_key_name(hostname: str, port: int) -> str:
    """How known_hosts names a host: `name`, or `[name]:port` off port 22."""
    return hostname if port == 22 else f"[{hostname}]:{port}"


def certificate_problem(key_type: str, blob: bytes, authorities: list[CertAuthority], hostname: str, port: int,
                        now: float, revoked: frozenset[bytes] = frozenset()) -> str | None:
    """Why the certificate (``key_type`` and its ``blob``, as the host sent them) does not vouch for
    ``hostname``; None when it does. ``revoked``: keys (wire form) of `@revoked` lines: an authority
    among them vouches for nothing, as OpenSSH has it."""
    name = host_key_name(hostname, port)
    if any(a.blob in revoked for a in authorities if a.vouches_for(name)):
        return "the authority that would vouch for it is marked @revoked"
    trusted = [a for a in authorities if a.vouches_for(name)]
    if not trusted:
        return f"no @cert-authority line names {name}"
    try:
        cert = load_ssh_public_identity(f"{key_type} {base64.b64encode(blob).decode()}".encode())
    except (ValueError, TypeError) as exc:
        return f"the host's certificate cannot be read: {exc}"
    if not isinstance(cert, SSHCertificate):
        return "the host presented a plain key, not a certificate"
    if cert.type is not SSHCertificateType.HOST:
        return "the certificate is a user certificate, not a host certificate"
    if not any(a.signed(cert) for a in trusted):
        return f"the certificate is signed by an authority not listed for {name}"
    try:
        cert.verify_cert_signature()
    except InvalidSignature:
        return "the certificate's signature is not valid"
    if hostname.encode() not in cert.valid_principals:
        said = ", ".join(p.decode(errors="replace") for p in cert.valid_principals) or "none"
        return f"the certificate names {said}, not {hostname}"
    if not cert.valid_after <= now < cert.valid_before:
        return "the certificate is not valid now (outside its validity period)"
    return None
