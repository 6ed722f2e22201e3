"""Who is calling: the principal of one RPC, from its TLS state and call metadata.

In this order (the first that applies decides):

1. ``spark-log-node`` metadata (``brokers.net.node_auth``): a valid inter-node token is
   ``Node:<id>``; an invalid one, or one where the node has no secret, is refused;
2. ``spark-log-session`` metadata: a live SCRAM session (``sessions.py``) whose user still
   has the credential it authenticated with is ``User:<name>``; otherwise
   ``SessionExpiredError`` (retriable: the client authenticates again).  Sessions are
   accepted on ``SASL_SSL`` listeners only;
3. a verified client certificate (listeners with ``ssl_client_auth = "required"``, where
   the TLS handshake already refused callers without one): ``User:<subject>``;
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

__all__ = ["Authenticator", "CLIENT_ID_HEADER"]

CLIENT_ID_HEADER = "spark-log-client-id"
AuthContext = Mapping[str, Sequence[bytes]]
CallMetadata = Sequence[tuple[str, str | bytes]]


class Authenticator:
    def __init__(self, *, protocol: str, sessions: SessionStore, node_secret: bytes | None,
                 users: Callable[[], Mapping[str, ScramCredential]]) -> None:
        self.protocol = protocol
        self.sessions = sessions
        self._secret = node_secret
        self._users = users

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
            if self.protocol != "SASL_SSL":
                raise AuthenticationError(f"SCRAM sessions need a SASL_SSL listener; this one is {self.protocol}")
            session = self.sessions.lookup(session_token)
            credential = self._users().get(session.username)
            if credential is None or credential.salt != session.salt:
                self.sessions.end(session_token)
                raise SessionExpiredError(f"the credentials of user {session.username!r} changed; authenticate again")
            return session.principal
        subject = auth_context.get("x509_subject")
        if subject:
            return user(subject[0].decode(errors="replace"))
        if self.protocol == "SASL_SSL":
            raise AuthenticationError("this listener needs authentication: SCRAM-SHA-256 (username and password) "
                                      "or a client certificate")
        return ANONYMOUS
