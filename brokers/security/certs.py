"""A local certificate authority and certificates (``spark-log dev up --tls``, tests, bench).

    pki = LocalPki.create(directory)                 # ca.pem / ca.key, once
    node = pki.issue("spark-log-node-1")             # node-... .pem/.key: server and client use
    client = pki.issue("alice", server=False)        # a client certificate (principal User:CN=alice)

Keys are ECDSA P-256; every certificate is signed by the CA with SHA-256, carries the
subject alternative names ``localhost`` and ``127.0.0.1`` (server certificates), and is
valid from ``now - 5 min`` for ``days``.  Files are written atomically with mode 0600 for
keys.  ``issue`` may be called again with the same name to renew a certificate (a new key
and serial, the files replaced atomically: nodes pick it up without a restart).  The clock
(``now``) is injected for tests of expiry.  Not a production CA: its key sits next to the
certificates it signs.
"""
from __future__ import annotations

import datetime
import ipaddress
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from .authn import certificate_principal

__all__ = ["LocalPki", "Issued", "write_secret"]

Now = Callable[[], datetime.datetime]


def _utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


def _write(path: Path, data: bytes, *, private: bool = False) -> None:
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if private else 0o644)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    os.replace(tmp, path)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def write_secret(path: Path) -> Path:
    """A fresh inter-node secret (32 random bytes, hex) at ``path`` (mode 0600)."""
    _write(path, secrets.token_hex(32).encode() + b"\n", private=True)
    return path


@dataclass(frozen=True, slots=True)
class Issued:
    cert: Path
    key: Path
    subject: str  # as gRPC reports it: "CN=<name>"

    @property
    def principal(self) -> str:
        return f"User:{self.subject}"


class LocalPki:
    def __init__(self, directory: Path, key: ec.EllipticCurvePrivateKey, cert: x509.Certificate, now: Now) -> None:
        self.directory = directory
        self._key = key
        self._cert = cert
        self._now = now

    @property
    def ca_file(self) -> Path:
        return self.directory / "ca.pem"

    @classmethod
    def create(cls, directory: str | Path, *, name: str = "spark-log local CA", days: int = 365,
               now: Now = _utcnow) -> "LocalPki":
        """The CA in ``directory``: loaded if ``ca.pem``/``ca.key`` exist, else made."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        cert_path, key_path = directory / "ca.pem", directory / "ca.key"
        if cert_path.is_file() and key_path.is_file():
            key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
            assert isinstance(key, ec.EllipticCurvePrivateKey)
            return cls(directory, key, x509.load_pem_x509_certificate(cert_path.read_bytes()), now)
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        start = now() - datetime.timedelta(minutes=5)
        cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
                .serial_number(x509.random_serial_number()).not_valid_before(start)
                .not_valid_after(start + datetime.timedelta(days=days))
                .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
                .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                             content_commitment=False, key_encipherment=False,
                                             data_encipherment=False, key_agreement=False, encipher_only=False,
                                             decipher_only=False), critical=True)
                .sign(key, hashes.SHA256()))
        _write(key_path, _key_pem(key), private=True)
        _write(cert_path, cert.public_bytes(serialization.Encoding.PEM))
        return cls(directory, key, cert, now)

    def issue(self, common_name: str, *, server: bool = True, days: int = 30,
              file_stem: str | None = None, hosts: tuple[str, ...] = ("localhost", "127.0.0.1")) -> Issued:
        """A certificate for ``common_name`` signed by this CA, written as ``<stem>.pem`` and
        ``<stem>.key`` (stem: the name).  ``server``: also valid as a TLS server for ``hosts``."""
        key = ec.generate_private_key(ec.SECP256R1())
        start = self._now() - datetime.timedelta(minutes=5)
        usages = [ExtendedKeyUsageOID.CLIENT_AUTH] + ([ExtendedKeyUsageOID.SERVER_AUTH] if server else [])
        builder = (x509.CertificateBuilder()
                   .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
                   .issuer_name(self._cert.subject).public_key(key.public_key())
                   .serial_number(x509.random_serial_number()).not_valid_before(start)
                   .not_valid_after(start + datetime.timedelta(days=days))
                   .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                   .add_extension(x509.ExtendedKeyUsage(usages), critical=False))
        if server:
            names: list[x509.GeneralName] = []
            for host in hosts:
                try:
                    names.append(x509.IPAddress(ipaddress.ip_address(host)))
                except ValueError:
                    names.append(x509.DNSName(host))
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        cert = builder.sign(self._key, hashes.SHA256())
        stem = file_stem or common_name
        key_path, cert_path = self.directory / f"{stem}.key", self.directory / f"{stem}.pem"
        # key first, then the certificate: a reader that sees the new certificate finds its key
        _write(key_path, _key_pem(key), private=True)
        _write(cert_path, cert.public_bytes(serialization.Encoding.PEM))
        # the subject as gRPC (and the data listener) name it: escaped, not "CN=" + the name
        subject = certificate_principal(cert.public_bytes(serialization.Encoding.DER)).removeprefix("User:")
        return Issued(cert=cert_path, key=key_path, subject=subject)
