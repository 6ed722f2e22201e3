"""A client's security settings: TLS, mutual TLS and SCRAM credentials (``ClientSecurity``).

    ClientSecurity(protocol="SASL_SSL", ca_file="ca.pem", username="alice", password="...")
    ClientSecurity.from_properties({"security.protocol": "SSL", "ssl.ca.location": "ca.pem",
                                    "ssl.certificate.location": "alice.pem", "ssl.key.location": "alice.key"})

``protocol`` takes Kafka's ``security.protocol`` values:

- ``PLAINTEXT``: no TLS, no credentials (the default);
- ``SSL``: TLS, the broker's certificate checked against ``ca_file``/``ca_pem`` (the system
  roots when neither is given) and its host name; with ``cert_file`` and ``key_file`` the
  client presents its own certificate (mutual TLS: the broker takes its subject as the
  principal, ``User:CN=...``);
- ``SASL_SSL``: TLS plus SCRAM-SHA-256 with ``username``/``password`` (a client
  certificate may be given too, when the listener requires one).

``SASL_PLAINTEXT`` is refused: a password never crosses a plaintext link.

``from_properties`` reads Kafka's and librdkafka's client property names (the Spark
connector passes its ``kafka.*`` options here without the prefix): ``security.protocol``;
``ssl.ca.location`` / ``ssl.truststore.location`` (PEM) / ``ssl.truststore.certificates``
(inline PEM); ``ssl.certificate.location`` / ``ssl.keystore.location`` (a PEM holding the
certificate chain, and the key unless ``ssl.key.location`` names it) /
``ssl.keystore.certificate.chain`` (inline); ``ssl.key.location`` / ``ssl.keystore.key``
(inline); ``ssl.key.password`` (an encrypted PKCS#8 key); ``ssl.truststore.type`` /
``ssl.keystore.type`` (PEM only); ``ssl.endpoint.identification.algorithm`` ("https": host
names are always checked); ``sasl.mechanism`` (SCRAM-SHA-256); ``sasl.jaas.config``
(``...ScramLoginModule required username="u" password="p";``) or ``sasl.username`` /
``sasl.password``.  Any other ``ssl.*``/``sasl.*`` name is refused by name.

Secrets: ``repr`` masks the password and key password, and no error message of this
module quotes a value it was given for them.  Files are read when a connection is made
(``tls_material``), so a renewed client certificate is used by the next client.
Immutable, hashable, picklable (it travels to Spark executors inside the connector's
options).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Mapping

from .errors import InvalidConfigError

__all__ = ["ClientSecurity", "TlsMaterial", "PROTOCOLS", "load_properties"]

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_SSL")
_MECHANISM = "SCRAM-SHA-256"
_JAAS = re.compile(r"""(\w+)\s*=\s*"((?:[^"\\]|\\.)*)\"""")


@dataclass(frozen=True, slots=True)
class TlsMaterial:
    """PEM bytes for one channel: roots (None: the system's), and a client key pair or None."""

    ca: bytes | None
    cert_chain: bytes | None
    private_key: bytes | None = field(repr=False)


def _text(value: object, key: str) -> str:
    if not isinstance(value, str):
        raise InvalidConfigError(f"'{key}' must be a string", key=key)
    return value


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientSecurity:
    """See the module docstring.  Validated at construction (``InvalidConfigError`` naming the key)."""

    protocol: str = "PLAINTEXT"
    ca_file: str | None = None
    ca_pem: bytes | None = None
    cert_file: str | None = None
    cert_pem: bytes | None = None
    key_file: str | None = None
    key_pem: bytes | None = field(default=None, repr=False)
    key_password: str | None = field(default=None, repr=False)
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    mechanism: str = _MECHANISM

    def __post_init__(self) -> None:
        if self.protocol not in PROTOCOLS:
            hint = " (a password never crosses a plaintext link: use SASL_SSL)" if self.protocol == "SASL_PLAINTEXT" else ""
            raise InvalidConfigError(f"security protocol must be one of {', '.join(PROTOCOLS)}, got "
                                     f"{self.protocol!r}{hint}", key="security.protocol")
        if self.mechanism != _MECHANISM:
            raise InvalidConfigError(f"SASL mechanism must be {_MECHANISM}, got {self.mechanism!r}",
                                     key="sasl.mechanism")
        has_cert = self.cert_file is not None or self.cert_pem is not None
        has_key = self.key_file is not None or self.key_pem is not None
        if self.protocol == "PLAINTEXT" and (has_cert or self.ca_file or self.ca_pem or self.username or self.password):
            raise InvalidConfigError("TLS or SASL settings need security.protocol SSL or SASL_SSL, not PLAINTEXT",
                                     key="security.protocol")
        if has_cert != has_key:
            raise InvalidConfigError("a client certificate needs its private key, and a key its certificate",
                                     key="ssl.key.location" if has_cert else "ssl.certificate.location")
        if self.protocol == "SASL_SSL":
            if not self.username or not self.password:
                raise InvalidConfigError("SASL_SSL needs a username and a password", key="sasl.jaas.config")
        elif self.username or self.password:
            raise InvalidConfigError("a username and password need security.protocol SASL_SSL",
                                     key="security.protocol")

    def __repr__(self) -> str:
        shown = [f"protocol={self.protocol!r}"]
        for name in ("ca_file", "cert_file", "key_file", "username"):
            value = getattr(self, name)
            if value is not None:
                shown.append(f"{name}={value!r}")
        for name in ("ca_pem", "cert_pem", "key_pem", "key_password", "password"):
            if getattr(self, name) is not None:
                shown.append(f"{name}=***")
        return f"ClientSecurity({', '.join(shown)})"

    __str__ = __repr__

    @property
    def tls(self) -> bool:
        return self.protocol != "PLAINTEXT"

    @property
    def scram(self) -> bool:
        return self.protocol == "SASL_SSL"

    def tls_material(self) -> TlsMaterial:
        """The PEM bytes to build a channel with (files read now; an encrypted key is
        decrypted in memory).  ``InvalidConfigError`` names the setting that cannot be read."""
        ca = self.ca_pem if self.ca_pem is not None else _read(self.ca_file, "ssl.ca.location")
        cert = self.cert_pem if self.cert_pem is not None else _read(self.cert_file, "ssl.certificate.location")
        key = self.key_pem if self.key_pem is not None else _read(self.key_file, "ssl.key.location")
        if key is not None and self.key_password is not None:
            key = _decrypt_key(key, self.key_password)
        return TlsMaterial(ca=ca, cert_chain=cert, private_key=key)

    @classmethod
    def from_properties(cls, properties: Mapping[str, str]) -> "ClientSecurity":
        """Kafka/librdkafka client properties (see the module docstring)."""
        values: dict[str, object] = {}
        key_from_keystore = False
        for raw_key, raw_value in properties.items():
            key = str(raw_key).strip().lower()
            value = _text(raw_value, key).strip()
            if key == "security.protocol":
                values["protocol"] = value.upper()
            elif key in ("ssl.ca.location", "ssl.truststore.location"):
                values["ca_file"] = value
            elif key == "ssl.truststore.certificates":
                values["ca_pem"] = value.encode()
            elif key in ("ssl.certificate.location", "ssl.keystore.location"):
                values["cert_file"] = value
                key_from_keystore = key_from_keystore or key == "ssl.keystore.location"
            elif key == "ssl.keystore.certificate.chain":
                values["cert_pem"] = value.encode()
            elif key == "ssl.key.location":
                values["key_file"] = value
            elif key == "ssl.keystore.key":
                values["key_pem"] = value.encode()
            elif key in ("ssl.key.password", "ssl.keystore.password"):
                values["key_password"] = raw_value
            elif key in ("ssl.truststore.type", "ssl.keystore.type"):
                if value.upper() != "PEM":
                    raise InvalidConfigError(f"'{key}' must be PEM (JKS and PKCS12 stores are not read), got {value!r}",
                                             key=key)
            elif key == "ssl.endpoint.identification.algorithm":
                if value.lower() != "https":
                    raise InvalidConfigError(f"'{key}' must be https: the broker's host name is always checked",
                                             key=key)
            elif key == "sasl.mechanism":
                values["mechanism"] = value.upper()
            elif key == "sasl.jaas.config":
                username, password = _parse_jaas(raw_value)
                values["username"], values["password"] = username, password
            elif key == "sasl.username":
                values["username"] = value
            elif key == "sasl.password":
                values["password"] = raw_value
            elif key.startswith(("ssl.", "sasl.", "security.")):
                raise InvalidConfigError(f"unknown security setting '{raw_key}'", key=str(raw_key))
        if key_from_keystore and "key_file" not in values and "key_pem" not in values:
            values["key_file"] = values["cert_file"]  # a PEM keystore holds the chain and the key
        return cls(**values)  # type: ignore[arg-type]  # validated in __post_init__

    @classmethod
    def from_file(cls, path: str | Path) -> "ClientSecurity":
        """A Kafka-style ``client.properties`` file (``key=value`` lines, ``#`` comments)."""
        return cls.from_properties(load_properties(path))

    def with_files_relative_to(self, base: Path) -> "ClientSecurity":
        """A copy whose relative file paths are taken relative to ``base``."""
        def fix(value: str | None) -> str | None:
            return str(base / value) if value is not None and not Path(value).is_absolute() else value
        return replace(self, ca_file=fix(self.ca_file), cert_file=fix(self.cert_file), key_file=fix(self.key_file))


def load_properties(path: str | Path) -> dict[str, str]:
    """``key=value`` (or ``key: value``) lines of a properties file; ``#``/``!`` comments."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise InvalidConfigError(f"cannot read client config {path}: {exc.strerror}") from None
    out: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped[0] in "#!":
            continue
        match = re.match(r"([^=:\s]+)\s*[=:]\s*(.*)$", stripped)
        if match is None:
            raise InvalidConfigError(f"{path}: line {number} is not key=value")
        out[match.group(1)] = match.group(2)
    return out


def _read(path: str | None, key: str) -> bytes | None:
    if path is None:
        return None
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise InvalidConfigError(f"cannot read '{key}' file {path}: {exc.strerror}", key=key) from None


def _parse_jaas(text: str) -> tuple[str, str]:
    """``username``/``password`` of a ScramLoginModule JAAS line (values never quoted back)."""
    if "ScramLoginModule" not in text:
        raise InvalidConfigError("sasl.jaas.config must use org.apache.kafka.common.security.scram.ScramLoginModule",
                                 key="sasl.jaas.config")
    found = {name: re.sub(r"\\(.)", r"\1", value) for name, value in _JAAS.findall(text)}
    if "username" not in found or "password" not in found:
        raise InvalidConfigError('sasl.jaas.config needs username="..." and password="..."', key="sasl.jaas.config")
    return found["username"], found["password"]


def _decrypt_key(pem: bytes, password: str) -> bytes:
    from cryptography.hazmat.primitives import serialization

    try:
        key = serialization.load_pem_private_key(pem, password=password.encode())
    except (ValueError, TypeError):
        raise InvalidConfigError("the client's private key cannot be decrypted with ssl.key.password",
                                 key="ssl.key.password") from None
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())
