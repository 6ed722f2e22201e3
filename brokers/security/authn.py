"""Who is calling: the principal of one RPC, from its TLS state and call metadata.

In this order (the first that applies decides):

1. ``spark-log-node`` metadata (``brokers.net.node_auth``): a valid inter-node token is
   ``Node:<id>``; an invalid one, or one where the node has no secret, is refused;
2. ``spark-log-session`` metadata: a live SCRAM session (``sessions.py``) whose user still
   has the credential it authenticated with is ``User:<name>``; otherwise
   ``SessionExpiredError`` (retriable: the client authenticates again).  Sessions are
   accepted on ``SASL_SSL`` listeners only.  The data listener asks the same
   (``session_principal``) before each request of a SCRAM connection;
3. a verified client certificate (listeners with ``ssl_client_auth = "required"``, where
   the TLS handshake already refused callers without one): ``User:<subject>``, the subject
   as gRPC's ``x509_subject`` writes it (RFC 2253: most specific RDN first, special
   characters escaped, e.g. ``User:CN=alice,O=acme,C=US``).  The data listener names a
   certificate with ``certificate_principal``, which writes the same string, so one ACL
   applies to both listeners;
4. nothing: ``User:ANONYMOUS`` on ``PLAINTEXT`` and ``SSL`` listeners, an
   ``AuthenticationError`` on ``SASL_SSL`` (authenticate with SCRAM or a certificate).

Errors never quote a token.  Thread-safety: stateless apart from the thread-safe stores.
"""
from __future__ import annotations

from typing import Callable, Mapping, Sequence

from brokers.net.node_auth import HEADER as NODE_HEADER
from brokers.net.node_auth import verify_node_token
from spark_log.errors import AuthenticationError, SessionExpiredError
from spark_log.scram import ScramCredential

from .principal import ANONYMOUS, node, user
from .sessions import SESSION_HEADER, SessionStore

__all__ = ["Authenticator", "CLIENT_ID_HEADER", "certificate_principal"]

CLIENT_ID_HEADER = "spark-log-client-id"
AuthContext = Mapping[str, Sequence[bytes]]
CallMetadata = Sequence[tuple[str, str | bytes]]

# The attribute types gRPC's x509_subject (BoringSSL's X509_NAME_print_ex with
# XN_FLAG_RFC2253) writes by a short name.  Only these are named: a type outside the table
# is written by gRPC either by another short name or as ``<oid>=#<DER hex>`` depending on
# the BoringSSL build, so ``certificate_principal`` refuses it rather than guess a name an
# ACL would not match.  tests/unit/brokers/security/test_certificate_principal.py checks
# every entry against the gRPC listener.
_SHORT_NAMES = {
    "2.5.4.3": "CN", "2.5.4.4": "SN", "2.5.4.5": "serialNumber", "2.5.4.6": "C", "2.5.4.7": "L",
    "2.5.4.8": "ST", "2.5.4.9": "street", "2.5.4.10": "O", "2.5.4.11": "OU", "2.5.4.12": "title",
    "2.5.4.13": "description", "2.5.4.15": "businessCategory", "2.5.4.17": "postalCode", "2.5.4.41": "name",
    "2.5.4.42": "GN", "2.5.4.43": "initials", "2.5.4.44": "generationQualifier", "2.5.4.46": "dnQualifier",
    "2.5.4.65": "pseudonym", "2.5.4.72": "role", "1.2.840.113549.1.9.1": "emailAddress",
    "0.9.2342.19200300.100.1.25": "DC", "0.9.2342.19200300.100.1.1": "UID",
}
# ASN.1 string tags whose characters BoringSSL converts to UTF-8 as cryptography decodes
# them (T61String is not among them: BoringSSL reads it as Latin-1, cryptography as UTF-8)
_STRING_TAGS = frozenset({12, 18, 19, 22, 26, 28, 30})  # UTF8, Numeric, Printable, IA5, Visible, Universal, BMP
_ESCAPED = frozenset(b',+"\\<>;')


def _rfc2253_value(value: str) -> str:
    """``value`` escaped as BoringSSL's RFC 2253 printing does: its UTF-8 bytes, with
    ``,+"\\<>;`` (and ``#`` or a space first, a space last) after a backslash, and control
    characters, DEL and every non-ASCII byte as ``\\XX``."""
    data = value.encode("utf-8")
    out = []
    last = len(data) - 1
    for i, b in enumerate(data):
        if b in _ESCAPED or (i == 0 and b in b"# ") or (i == last and b == 0x20):
            out.append("\\" + chr(b))
        elif b < 0x20 or b >= 0x7F:
            out.append(f"\\{b:02X}")
        else:
            out.append(chr(b))
    return "".join(out)


def certificate_principal(der: bytes) -> str:
    """``User:<subject>`` of a DER client certificate, the subject exactly as gRPC's
    ``auth_context()["x509_subject"]`` writes it (the gRPC listener's principal of the
    same certificate): every attribute, the last in the certificate first, ``+`` between
    the attributes of one RDN and ``,`` between RDNs, values escaped (``_rfc2253_value``).
    ``AuthenticationError`` for a subject it cannot write as gRPC does (an attribute type
    outside ``_SHORT_NAMES``, a value that is not one of ``_STRING_TAGS``): such a
    certificate authenticates on gRPC only."""
    from cryptography import x509

    try:
        name = x509.load_der_x509_certificate(der).subject
        rdns = list(name.rdns)
    except ValueError as exc:
        raise AuthenticationError(f"cannot read the client certificate's subject: {exc}") from None
    entries: list[tuple[int, str]] = []
    for index, rdn in enumerate(rdns):
        for attribute in rdn:
            oid = attribute.oid.dotted_string
            short = _SHORT_NAMES.get(oid)
            tag = getattr(attribute, "_type", None)
            if short is None or getattr(tag, "value", None) not in _STRING_TAGS or not isinstance(attribute.value, str):
                raise AuthenticationError(f"the client certificate's subject has an attribute ({oid}) this listener "
                                          "cannot name as the gRPC listener does; authenticate over gRPC or with "
                                          "SCRAM")
            entries.append((index, f"{short}={_rfc2253_value(attribute.value)}"))
    entries.reverse()
    out: list[str] = []
    for i, (index, text) in enumerate(entries):
        if i:
            out.append("+" if entries[i - 1][0] == index else ",")
        out.append(text)
    return user("".join(out))


class Authenticator:
    def __init__(self, *, protocol: str, sessions: SessionStore, node_secret: bytes | None,
                 users: Callable[[], Mapping[str, ScramCredential]]) -> None:
        self.protocol = protocol
        self.sessions = sessions
        self._secret = node_secret
        self._users = users

    def session_principal(self, token: str) -> str:
        """The principal of SCRAM session ``token`` if it is still live: known to this node
        and not expired (``SessionStore.lookup``), and its user still has the credential it
        authenticated with (same salt: not deleted, password not changed); else
        ``SessionExpiredError`` (the session is ended).  Asked on every gRPC call carrying a
        token, and before every request of a SCRAM-authenticated data-listener connection
        (which holds its session's token)."""
        if self.protocol != "SASL_SSL":
            raise AuthenticationError(f"SCRAM sessions need a SASL_SSL listener; this one is {self.protocol}")
        session = self.sessions.lookup(token)
        credential = self._users().get(session.username)
        if credential is None or credential.salt != session.salt:
            self.sessions.end(token)
            raise SessionExpiredError(f"the credentials of user {session.username!r} changed; authenticate again")
        return session.principal

    def authenticate(self, auth_context: AuthContext, metadata: CallMetadata) -> str:
        """The caller's principal (see the module docstring); raises ``AuthenticationError``."""
        node_token = session_token = None
        for key, value in metadata:
            if key == NODE_HEADER:
                node_token = value if isinstance(value, str) else value.decode(errors="replace")
            elif key == SESSION_HEADER:
                session_token = value if isinstance(value, str) else value.decode(errors="replace")
        if node_token is not None:
            node_id = verify_node_token(self._secret, node_token) if self._secret is not None else None
            if node_id is None:
                raise AuthenticationError("invalid inter-node token (is inter_node_secret_file the same on every node?)")
            return node(node_id)
        if session_token is not None:
            return self.session_principal(session_token)
        subject = auth_context.get("x509_subject")
        if subject:
            return user(subject[0].decode(errors="replace"))
        if self.protocol == "SASL_SSL":
            raise AuthenticationError("this listener needs authentication: SCRAM-SHA-256 (username and password) "
                                      "or a client certificate")
        return ANONYMOUS
