"""A secured local cluster (``spark-log dev up --tls [--mtls] [--sasl] [--authorizer]``).

``DevSecurity`` says what to turn on; ``prepare(data_dir, node_ids)`` makes what it needs
under ``<data_dir>/tls/`` once (kept across ``down``/``up``):

- ``ca.pem``/``ca.key``: a local CA (``brokers.security.certs``);
- ``node-<id>.pem``/``.key``: each node's certificate (``CN=spark-log-node-<id>``, for
  ``localhost`` and ``127.0.0.1``), used for its listener and its links to other nodes;
- ``admin.pem``/``.key``: a client certificate ``CN=spark-log-admin`` (a super user);
- ``inter-node.secret``: the cluster secret (when clients need no certificate);
- ``client.properties`` (mode 0600), next to the cluster's ``bootstrap`` file: what
  ``spark-log`` commands and clients without explicit settings use (Kafka property names).

Modes: ``--tls`` is ``SSL`` (clients connect with TLS; principal ``User:ANONYMOUS``);
``--mtls`` requires client certificates (principals from their subjects; nodes
authenticate by theirs); ``--sasl`` is ``SASL_SSL``: clients authenticate with SCRAM, and
``prepare_admin`` creates the SCRAM user ``admin`` with a random password written only to
the 0600 ``client.properties`` (the dev cluster's own admin credential, as a Kafka
quickstart's ``client.properties``; the cluster stores only its salted hash);
``--authorizer`` turns ACLs on, deny by default, with the admin and the nodes as super
users.  The launcher itself talks to the nodes as a node (it holds the secret or a node
certificate): ``channels()``.
"""
from __future__ import annotations

import json
import os
import secrets
from dataclasses import asdict, dataclass
from pathlib import Path

import grpc

from brokers.net.channels import PLAINTEXT, Channels, TlsChannels
from brokers.net.node_auth import HEADER, node_token, read_secret
from brokers.net.tls import TlsFiles
from brokers.security.certs import LocalPki, write_secret
from spark_log.errors import InvalidConfigError, SparkLogError
from spark_log import errors
from spark_log.proto import security_pb2 as pb
from spark_log.proto import security_pb2_grpc as pb_grpc
from spark_log.scram import MECHANISM, make_credential

__all__ = ["DevSecurity", "TLS_DIR", "prepare", "config_lines", "channels", "prepare_admin", "ADMIN_USER", "PLAINTEXT",
           "CLIENT_PROPERTIES", "upsert_user"]

TLS_DIR = "tls"
ADMIN_USER = "admin"
ADMIN_CN = "spark-log-admin"
CLIENT_PROPERTIES = "client.properties"


@dataclass(frozen=True, slots=True)
class DevSecurity:
    tls: bool = False
    mtls: bool = False
    sasl: bool = False
    authorizer: bool = False

    def __post_init__(self) -> None:
        if (self.mtls or self.sasl or self.authorizer) and not self.tls:
            raise InvalidConfigError("--mtls, --sasl and --authorizer need --tls")

    @property
    def protocol(self) -> str:
        return "SASL_SSL" if self.sasl else "SSL" if self.tls else "PLAINTEXT"

    @property
    def needs_secret(self) -> bool:
        return self.tls and not self.mtls and (self.sasl or self.authorizer)

    def to_json(self) -> dict[str, bool]:
        return asdict(self)

    @classmethod
    def from_json(cls, value: object) -> "DevSecurity":
        if not isinstance(value, dict):
            return cls()
        return cls(**{k: bool(v) for k, v in value.items() if k in ("tls", "mtls", "sasl", "authorizer")})


def _tls(data_dir: Path) -> Path:
    return data_dir / TLS_DIR


def prepare(data_dir: Path, security: DevSecurity, node_ids: list[int]) -> None:
    """Create the CA, certificates and secret the mode needs (existing ones are kept)."""
    if not security.tls:
        return
    directory = _tls(data_dir)
    pki = LocalPki.create(directory)
    for node_id in node_ids:
        if not (directory / f"node-{node_id}.pem").is_file():
            pki.issue(f"spark-log-node-{node_id}", file_stem=f"node-{node_id}")
    if not (directory / "admin.pem").is_file():
        pki.issue(ADMIN_CN, server=False, file_stem="admin")
    if security.needs_secret and not (directory / "inter-node.secret").is_file():
        write_secret(directory / "inter-node.secret")
    if not security.sasl:
        _write_client_properties(data_dir, security, password=None)


def config_lines(data_dir: Path, security: DevSecurity, node_id: int, node_ids: list[int]) -> list[str]:
    """The ``[security]`` table of node ``node_id``'s broker.toml."""
    if not security.tls:
        return []
    directory = _tls(data_dir)
    supers = [f"User:CN={ADMIN_CN}"] + [f"User:CN=spark-log-node-{i}" for i in node_ids]
    if security.sasl:
        supers.append(f"User:{ADMIN_USER}")
    values: dict[str, object] = {
        "security_protocol": security.protocol,
        "ssl_certfile": str(directory / f"node-{node_id}.pem"),
        "ssl_keyfile": str(directory / f"node-{node_id}.key"),
        "ssl_cafile": str(directory / "ca.pem"),
        "ssl_client_auth": "required" if security.mtls else "none",
        "authorizer_enabled": security.authorizer,
        "super_users": supers,
    }
    if security.needs_secret:
        values["inter_node_secret_file"] = str(directory / "inter-node.secret")
    return ["[security]"] + [f"{key} = {json.dumps(value)}" for key, value in values.items()]


def channels(data_dir: Path, security: DevSecurity) -> Channels:
    """How the launcher reaches the nodes: as node 0 (a node certificate, the secret)."""
    if not security.tls:
        return PLAINTEXT
    directory = _tls(data_dir)
    files = TlsFiles(certfile=directory / "node-1.pem", keyfile=directory / "node-1.key", cafile=directory / "ca.pem")
    metadata = ((HEADER, node_token(read_secret(directory / "inter-node.secret"), 0)),) if security.needs_secret else ()
    return TlsChannels(files, metadata=metadata)


def _write_client_properties(data_dir: Path, security: DevSecurity, *, password: str | None) -> Path:
    directory = _tls(data_dir)
    lines = [f"security.protocol={security.protocol}", f"ssl.ca.location={directory / 'ca.pem'}"]
    if security.mtls or not security.sasl:
        lines += [f"ssl.certificate.location={directory / 'admin.pem'}", f"ssl.key.location={directory / 'admin.key'}"]
    if password is not None:
        lines += ["sasl.mechanism=SCRAM-SHA-256", f"sasl.username={ADMIN_USER}", f"sasl.password={password}"]
    path = data_dir / CLIENT_PROPERTIES
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write("# spark-log dev cluster: the admin client's settings (keep private)\n" + "\n".join(lines) + "\n")
    os.replace(tmp, path)
    return path


def upsert_user(channel: grpc.Channel, name: str, password: str, *, timeout_s: float = 15.0) -> None:
    """Create or update SCRAM user ``name`` through ``channel`` (a node's: super user)."""
    credential = make_credential(password, os.urandom(16), 4096)
    request = pb.AlterUserScramCredentialsRequest(upsertions=[pb.ScramCredentialUpsertion(
        name=name, mechanism=MECHANISM, iterations=credential.iterations, salt=credential.salt,
        stored_key=credential.stored_key, server_key=credential.server_key)])
    try:
        pb_grpc.SecurityStub(channel).AlterUserScramCredentials(request, timeout=timeout_s)
    except grpc.RpcError as exc:
        raise errors.from_rpc_error(exc) from None


def prepare_admin(data_dir: Path, security: DevSecurity, address: str) -> None:
    """``--sasl``: the SCRAM user ``admin`` and ``client.properties``, once."""
    if not security.sasl or (data_dir / CLIENT_PROPERTIES).is_file():
        return
    password = secrets.token_urlsafe(24)
    channel = channels(data_dir, security).open(address)
    try:
        upsert_user(channel, ADMIN_USER, password)
    except SparkLogError as exc:
        raise RuntimeError(f"cannot create the dev cluster's admin user: {exc}") from None
    finally:
        channel.close()
    _write_client_properties(data_dir, security, password=password)
