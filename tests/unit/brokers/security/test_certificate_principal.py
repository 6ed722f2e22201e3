"""One client certificate, one principal: the data listener names a certificate exactly as
the gRPC listener does (``authn.certificate_principal`` against gRPC's ``x509_subject``),
so an ACL written for the gRPC name (a DENY in particular) holds on both.

Found by a security review: the data listener joined the subject's RDNs in certificate
order without escaping (``User:C=US,O=acme,CN=alice``; a CN ``alice,O=acme`` read as two
attributes), where gRPC writes RFC 2253 (``User:CN=alice,O=acme,C=US``,
``User:CN=alice\\,O=acme``).  Each case here runs both real listeners' TLS servers: the
node's gRPC ``server_credentials`` with the ``Authenticator``, and the data listener's
``tls_context`` with its connection handler.
"""
from __future__ import annotations

import datetime
import ipaddress
import socket
import ssl
import threading
import types
from concurrent import futures
from pathlib import Path
from typing import Any, Iterator

import grpc
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.name import _ASN1Type
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID, ObjectIdentifier

from brokers.metadata.security_image import SecurityImage
from brokers.net.tls import TlsFiles, server_credentials
from brokers.security.authn import _SHORT_NAMES, Authenticator, certificate_principal
from brokers.security.authorizer import Authorizer
from brokers.security.sessions import SessionStore
from brokers.server.data_listener import _REQUEST_HEAD, _U32, DataListener, _Server
from spark_log.acls import AclBinding, Operation, PatternType, Permission, Resource, ResourceType
from spark_log.clock import SystemClock

A = x509.NameAttribute
RDN = x509.RelativeDistinguishedName


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _pki(tmp: Path, client_subject: x509.Name) -> dict[str, Path]:
    """A CA, a server certificate for 127.0.0.1 and a client certificate of ``client_subject``."""
    start = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(minutes=5)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([A(NameOID.COMMON_NAME, "test CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(start)
          .not_valid_after(start + datetime.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .sign(ca_key, hashes.SHA256()))

    def issue(name: x509.Name, server: bool) -> tuple[bytes, bytes]:
        key = ec.generate_private_key(ec.SECP256R1())
        usages = [ExtendedKeyUsageOID.CLIENT_AUTH] + ([ExtendedKeyUsageOID.SERVER_AUTH] if server else [])
        builder = (x509.CertificateBuilder().subject_name(name).issuer_name(ca_name).public_key(key.public_key())
                   .serial_number(x509.random_serial_number()).not_valid_before(start)
                   .not_valid_after(start + datetime.timedelta(days=1))
                   .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                   .add_extension(x509.ExtendedKeyUsage(usages), critical=False))
        if server:
            builder = builder.add_extension(x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        return builder.sign(ca_key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM), _key_pem(key)

    files = {"ca.pem": ca.public_bytes(serialization.Encoding.PEM)}
    files["server.pem"], files["server.key"] = issue(x509.Name([A(NameOID.COMMON_NAME, "broker")]), True)
    files["client.pem"], files["client.key"] = issue(client_subject, False)
    for stem, data in files.items():
        (tmp / stem).write_bytes(data)
    return {stem: tmp / stem for stem in files}


def _tls_files(files: dict[str, Path]) -> TlsFiles:
    return TlsFiles(certfile=files["server.pem"], keyfile=files["server.key"], cafile=files["ca.pem"])


def grpc_principal(files: dict[str, Path]) -> str:
    """The principal the node's gRPC listener (``server_credentials``, ``Authenticator``)
    gives the client certificate."""
    authn = Authenticator(protocol="SSL", sessions=SessionStore(clock=SystemClock()), node_secret=None,
                          users=lambda: {})
    seen: list[str] = []

    def whoami(request: bytes, context: grpc.ServicerContext) -> bytes:
        seen.append(authn.authenticate(context.auth_context(), context.invocation_metadata()))
        return b""

    server = grpc.server(futures.ThreadPoolExecutor(2))
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("t.T", {
        "W": grpc.unary_unary_rpc_method_handler(whoami)}),))
    port = server.add_secure_port("127.0.0.1:0", server_credentials(_tls_files(files), require_client_auth=True))
    server.start()
    try:
        creds = grpc.ssl_channel_credentials(root_certificates=files["ca.pem"].read_bytes(),
                                             private_key=files["client.key"].read_bytes(),
                                             certificate_chain=files["client.pem"].read_bytes())
        with grpc.secure_channel(f"localhost:{port}", creds) as channel:
            channel.unary_unary("/t.T/W")(b"", timeout=30)
    finally:
        server.stop(None)
    return seen[0]


@pytest.fixture
def data_listener_principal() -> Iterator[Any]:
    """``principal(files)``: what the data listener's connection handler makes of the client
    certificate (the principal of its ``Caller``, or ``REFUSED: <why>`` when the connection
    is left unauthenticated), over its own ``tls_context``.  The listener answers every
    request with that instead of serving it."""
    servers: list[tuple[_Server, threading.Thread]] = []

    def principal(files: dict[str, Path]) -> str:
        listener = DataListener.__new__(DataListener)
        listener._tls = None
        listener.stopping = False
        listener._sockets = set()
        listener._lock = threading.Lock()
        listener.security = types.SimpleNamespace(
            files=_tls_files(files), config=types.SimpleNamespace(ssl_client_auth="required", security_protocol="SSL"))

        def answer(api: int, payload: memoryview, *, is_active: Any, caller: Any) -> list[bytes]:
            return [caller.principal.encode() if caller.authenticated else b"REFUSED: " + caller.refusal.encode()]

        listener.answer = answer  # type: ignore[method-assign]
        server = _Server(("127.0.0.1", 0), listener)
        thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        thread.start()
        servers.append((server, thread))
        context = ssl.create_default_context(cafile=str(files["ca.pem"]))
        context.load_cert_chain(files["client.pem"], files["client.key"])
        with socket.create_connection(server.server_address[:2], timeout=30) as raw:
            with context.wrap_socket(raw, server_hostname="localhost") as sock:
                request = _REQUEST_HEAD.pack(1, 7)
                sock.sendall(_U32.pack(len(request)) + request)
                reply = b""
                while len(reply) < 4 or len(reply) < 4 + _U32.unpack_from(reply)[0]:
                    chunk = sock.recv(65536)
                    assert chunk, "the data listener closed the connection"
                    reply += chunk
        assert _U32.unpack_from(reply, 4)[0] == 7  # the correlation id
        return reply[8:].decode()

    yield principal
    for server, thread in servers:
        server.shutdown()
        server.server_close()
        thread.join(10)


SUBJECTS = {
    # most specific RDN first (the reverse of the certificate's order)
    "org-then-cn": (x509.Name([A(NameOID.COUNTRY_NAME, "US"), A(NameOID.ORGANIZATION_NAME, "acme"),
                               A(NameOID.COMMON_NAME, "alice")]), "User:CN=alice,O=acme,C=US"),
    # a comma in a value is escaped: not the two attributes CN=alice and O=acme
    "comma-in-cn": (x509.Name([A(NameOID.COMMON_NAME, "alice,O=acme")]), "User:CN=alice\\,O=acme"),
    "specials": (x509.Name([A(NameOID.COMMON_NAME, 'a+b;c<d>e"f\\g=h/i')]), 'User:CN=a\\+b\\;c\\<d\\>e\\"f\\\\g=h/i'),
    "leading-hash-and-spaces": (x509.Name([A(NameOID.COMMON_NAME, "#x y ")]), "User:CN=\\#x y\\ "),
    "leading-space": (x509.Name([A(NameOID.COMMON_NAME, " x")]), "User:CN=\\ x"),
    "control-and-del": (x509.Name([A(NameOID.COMMON_NAME, "a\tb\x01\x00\x7f")]), "User:CN=a\\09b\\01\\00\\7F"),
    "utf8": (x509.Name([A(NameOID.COMMON_NAME, "zoë ☃ 😀")]), "User:CN=zo\\C3\\AB \\E2\\98\\83 \\F0\\9F\\98\\80"),
    "bmp-string": (x509.Name([A(NameOID.COMMON_NAME, "zoë", _ASN1Type.BMPString)]), "User:CN=zo\\C3\\AB"),
    "universal-string": (x509.Name([A(NameOID.COMMON_NAME, "é😀", _ASN1Type.UniversalString)]),
                         "User:CN=\\C3\\A9\\F0\\9F\\98\\80"),
    "multi-valued-rdn": (x509.Name([RDN([A(NameOID.COMMON_NAME, "alice"), A(NameOID.ORGANIZATIONAL_UNIT_NAME, "eng")]),
                                    RDN([A(NameOID.ORGANIZATION_NAME, "acme")])]), "User:O=acme,CN=alice+OU=eng"),
    "email-dc-uid": (x509.Name([A(NameOID.DOMAIN_COMPONENT, "com"), A(NameOID.USER_ID, "u1"),
                                A(NameOID.EMAIL_ADDRESS, "a@b.c"), A(NameOID.COMMON_NAME, "a")]),
                     "User:CN=a,emailAddress=a@b.c,UID=u1,DC=com"),
    "every-named-type": (x509.Name([A(ObjectIdentifier(oid), "US" if short == "C" else f"v-{short}")
                                    for oid, short in _SHORT_NAMES.items()]), None),
}


@pytest.mark.parametrize("kind", sorted(SUBJECTS))
def test_a_certificate_has_the_same_principal_on_both_listeners(tmp_path: Path, kind: str,
                                                                 data_listener_principal: Any) -> None:
    subject, expected = SUBJECTS[kind]
    files = _pki(tmp_path, subject)
    over_grpc = grpc_principal(files)
    if expected is not None:
        assert over_grpc == expected  # the gRPC form this test pins
    assert data_listener_principal(files) == over_grpc


def test_a_deny_for_the_grpc_principal_holds_on_the_data_listener(tmp_path: Path,
                                                                   data_listener_principal: Any) -> None:
    """Everyone may read 'payroll' except alice, denied by the name gRPC (and WhoAmI) gives
    her certificate: she is denied on the data listener too."""
    files = _pki(tmp_path, SUBJECTS["org-then-cn"][0])
    alice_grpc, alice_data = grpc_principal(files), data_listener_principal(files)
    image = SecurityImage(acls={
        "1": AclBinding(ResourceType.TOPIC, "payroll", PatternType.LITERAL, "User:*", "*", Operation.READ,
                        Permission.ALLOW),
        "2": AclBinding(ResourceType.TOPIC, "payroll", PatternType.LITERAL, alice_grpc, "*", Operation.READ,
                        Permission.DENY),
    })
    payroll = Resource(ResourceType.TOPIC, "payroll")
    authorizer = Authorizer()
    assert not authorizer.authorize(image, alice_grpc, "127.0.0.1", Operation.READ, payroll)
    assert not authorizer.authorize(image, alice_data, "127.0.0.1", Operation.READ, payroll), (
        f"denied as {alice_grpc!r} on gRPC but allowed as {alice_data!r} on the data listener")


def test_a_cn_holding_another_subject_is_not_that_subject(tmp_path: Path, data_listener_principal: Any) -> None:
    """A certificate whose CN is ``alice,O=acme`` does not get, on the data listener, the
    principal gRPC gives alice's certificate of organisation acme (``User:CN=alice,O=acme``)."""
    (tmp_path / "spoof").mkdir()
    (tmp_path / "real").mkdir()
    spoof = _pki(tmp_path / "spoof", x509.Name([A(NameOID.COMMON_NAME, "alice,O=acme")]))
    real = _pki(tmp_path / "real", x509.Name([A(NameOID.ORGANIZATION_NAME, "acme"), A(NameOID.COMMON_NAME, "alice")]))
    alice = grpc_principal(real)
    assert alice == "User:CN=alice,O=acme"
    assert data_listener_principal(real) == alice
    assert data_listener_principal(spoof) != alice


@pytest.mark.parametrize("subject", [
    x509.Name([A(ObjectIdentifier("2.5.4.97"), "VATFR-1"), A(NameOID.COMMON_NAME, "alice")]),  # organizationIdentifier
    x509.Name([A(ObjectIdentifier("1.2.3.4"), "x"), A(NameOID.COMMON_NAME, "alice")]),
    x509.Name([A(NameOID.COMMON_NAME, "zoé", _ASN1Type.T61String)]),
], ids=["organization-identifier", "private-oid", "t61-string"])
def test_a_subject_it_cannot_write_as_grpc_does_is_refused(tmp_path: Path, subject: x509.Name,
                                                           data_listener_principal: Any) -> None:
    """Attribute types and string types whose gRPC form is not pinned: the connection is
    refused rather than served as a principal no ACL written for the gRPC name matches."""
    files = _pki(tmp_path, subject)
    assert data_listener_principal(files).startswith("REFUSED: ")


def test_the_local_ca_names_an_issued_certificate_as_the_listeners_do(tmp_path: Path) -> None:
    """``LocalPki.issue``'s ``principal`` (what the dev tools write ACLs for) is the
    certificate's principal on both listeners, also for a common name that needs escaping."""
    from brokers.security.certs import LocalPki

    pki = LocalPki.create(tmp_path / "ca")
    for name in ("alice", "alice,O=acme", "bob+ops"):
        issued = pki.issue(name, server=False)
        der = x509.load_pem_x509_certificate(issued.cert.read_bytes()).public_bytes(serialization.Encoding.DER)
        assert issued.principal == certificate_principal(der)
    assert pki.issue("alice,O=acme", server=False, file_stem="escaped").principal == "User:CN=alice\\,O=acme"
