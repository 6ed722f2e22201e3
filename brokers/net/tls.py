"""The node's TLS files, re-read when they change, and the listener's server credentials.

``TlsFiles(certfile=..., keyfile=..., cafile=...)`` holds the PEM bytes of the node's
certificate chain, private key and CA bundle.  ``current()`` looks at the files' stamps
(inode, size, modification time) at most once per ``check_interval_ms`` of the injected
clock; when one changed it reads all three again and, if the new certificate and key form
a pair (their public keys match), publishes them as a new ``generation``.  A set caught
half-written (a certificate renewed before its key) is not published: the previous
material stays in use and the next check tries again.  So a renewed certificate is taken
without a restart:

- by the listener: ``server_credentials`` are gRPC's dynamic SSL credentials, whose
  fetcher gRPC calls before every new TLS handshake;
- by the node's own connections to other nodes: ``brokers.net.channels.TlsChannels``
  opens a new channel with the new material on the next call (``reloading.py``).

Connections already established keep the certificate they were opened with (TLS does not
re-authenticate a live connection).  Thread-safety: ``current`` may be called from any
thread; it returns immutable ``TlsMaterial``.
"""
from __future__ import annotations

import logging
import os
import ssl
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

import grpc

from spark_log.clock import Clock, SystemClock
from spark_log.errors import InvalidConfigError

__all__ = ["TlsMaterial", "TlsFiles", "server_credentials"]

log = logging.getLogger(__name__)

_Stamp = tuple[tuple[int, int, int], ...]


@dataclass(frozen=True, slots=True)
class TlsMaterial:
    generation: int
    cert_chain: bytes
    private_key: bytes = field(repr=False)
    ca: bytes | None = None  # None: the system roots (verifying peers only)


def _stamp(paths: list[Path]) -> _Stamp:
    out = []
    for path in paths:
        st = path.stat()
        out.append((st.st_ino, st.st_size, st.st_mtime_ns))
    return tuple(out)


def _matching_pair(cert_chain: bytes, private_key: bytes) -> bool:
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    try:
        cert = x509.load_pem_x509_certificate(cert_chain)
        key = serialization.load_pem_private_key(private_key, password=None)
    except (ValueError, TypeError):
        return False
    fmt = (serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return bool(cert.public_key().public_bytes(*fmt) == key.public_key().public_bytes(*fmt))


class TlsFiles:
    """See the module docstring.  ``InvalidConfigError`` at construction when the files
    cannot be read or do not form a certificate/key pair."""

    def __init__(self, *, certfile: str | Path, keyfile: str | Path, cafile: str | Path | None = None,
                 check_interval_ms: int = 1000, clock: Clock | None = None) -> None:
        self._paths = [Path(certfile), Path(keyfile)] + ([Path(cafile)] if cafile else [])
        self._interval_ms = check_interval_ms
        self._clock = clock or SystemClock()
        self._lock = threading.Lock()
        try:
            stamp = _stamp(self._paths)
            material = self._read(generation=1)
        except OSError as exc:
            raise InvalidConfigError(f"cannot read TLS file {exc.filename}: {exc.strerror}",
                                     key="security.ssl_certfile") from None
        if material is None:
            raise InvalidConfigError(f"{self._paths[0]} and {self._paths[1]} are not a PEM certificate and its "
                                     f"private key", key="security.ssl_certfile")
        self._material = material
        self._stamp = stamp
        self._next_check_ms = self._clock.monotonic_ms() + check_interval_ms

    def _read(self, generation: int) -> TlsMaterial | None:
        cert, key = self._paths[0].read_bytes(), self._paths[1].read_bytes()
        ca = self._paths[2].read_bytes() if len(self._paths) > 2 else None
        if not _matching_pair(cert, key):
            return None
        return TlsMaterial(generation=generation, cert_chain=cert, private_key=key, ca=ca)

    def current(self) -> TlsMaterial:
        """The latest complete material (see the module docstring)."""
        now = self._clock.monotonic_ms()
        if now < self._next_check_ms:
            return self._material
        with self._lock:
            if now < self._next_check_ms:
                return self._material
            self._next_check_ms = now + self._interval_ms
            try:
                stamp = _stamp(self._paths)
                if stamp == self._stamp:
                    return self._material
                material = self._read(self._material.generation + 1)
            except OSError as exc:
                log.warning("TLS files: cannot read %s (%s); keeping the current certificate", exc.filename,
                            exc.strerror)
                return self._material
            if material is None:
                log.warning("TLS files changed but %s does not match %s yet; keeping the current certificate",
                            self._paths[0], self._paths[1])
                return self._material
            self._stamp, self._material = stamp, material
            log.info("TLS files reloaded (generation %d)", material.generation)
            return material


def server_credentials(files: TlsFiles, *, require_client_auth: bool) -> grpc.ServerCredentials:
    """The listener's credentials: gRPC's dynamic SSL credentials over ``files`` (each new
    handshake uses the current generation); client certificates verified against the CA and
    required when ``require_client_auth`` (gRPC offers no optional client certificate)."""
    initial = files.current()
    served = [initial.generation]

    def configuration(material: TlsMaterial) -> grpc.ServerCertificateConfiguration:
        return grpc.ssl_server_certificate_configuration([(material.private_key, material.cert_chain)],
                                                         root_certificates=material.ca)

    def fetch() -> grpc.ServerCertificateConfiguration | None:
        material = files.current()
        if material.generation == served[0]:
            return None
        served[0] = material.generation
        return configuration(material)

    # gRPC documents None from the fetcher as "no change"; the stubs do not say so
    return grpc.dynamic_ssl_server_credentials(configuration(initial), fetch,  # type: ignore[arg-type]
                                               require_client_authentication=require_client_auth)


def load_chain(context: ssl.SSLContext, material: TlsMaterial, *, prefix: str) -> None:
    """Load ``material``'s certificate chain and private key into ``context``.  ``ssl`` loads
    them from files only: a private folder (0700, the key file 0600), removed at once."""
    with tempfile.TemporaryDirectory(prefix=prefix) as folder:
        cert, key = Path(folder) / "cert.pem", Path(folder) / "key.pem"
        fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(material.private_key)
        cert.write_bytes(material.cert_chain)
        context.load_cert_chain(cert, key)
