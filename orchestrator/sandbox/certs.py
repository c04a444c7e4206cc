"""The secured sandbox's private CA and its nodes' certificates (PEM), as an operator's PKI would issue them.

One CA per `sandbox up`; each node's certificate names its host and its addresses, so clients verify
the server fully (host name included) and nodes verify each other on the transport layer.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALID_DAYS = 30  # a sandbox lives hours; a short life keeps a leaked test key worthless


@dataclass(frozen=True)
class Issued:
    cert: Path
    key: Path


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "orchestrator sandbox"),
                      x509.NameAttribute(NameOID.COMMON_NAME, common)])


def _write(where: Path, stem: str, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey) -> Issued:
    where.mkdir(parents=True, exist_ok=True)
    cert_file, key_file = where / f"{stem}.crt", where / f"{stem}.key"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    key_file.chmod(0o600)
    return Issued(cert_file, key_file)


def _validity(builder: x509.CertificateBuilder) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return builder.not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(
        now + datetime.timedelta(days=VALID_DAYS))


def make_ca(where: Path) -> Issued:
    key = ec.generate_private_key(ec.SECP256R1())
    name = _name("orchestrator sandbox CA")
    cert = (_validity(x509.CertificateBuilder()).subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
            .sign(key, hashes.SHA256()))
    return _write(where, "ca", cert, key)


def issue(ca: Issued, where: Path, stem: str, host_name: str, addresses: list[str]) -> Issued:
    """A server-and-client certificate for one node: DNS ``host_name`` and each IP of ``addresses``."""
    ca_key = serialization.load_pem_private_key(ca.key.read_bytes(), password=None)
    ca_cert = x509.load_pem_x509_certificate(ca.cert.read_bytes())
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    key = ec.generate_private_key(ec.SECP256R1())
    names: list[x509.GeneralName] = [x509.DNSName(host_name)]
    names += [x509.IPAddress(ipaddress.ip_address(a)) for a in dict.fromkeys(addresses)]
    cert = (_validity(x509.CertificateBuilder()).subject_name(_name(host_name)).issuer_name(ca_cert.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .add_extension(x509.SubjectAlternativeName(names), critical=False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
                           critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .sign(ca_key, hashes.SHA256()))
    return _write(where, stem, cert, key)
