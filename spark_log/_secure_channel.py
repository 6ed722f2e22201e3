"""A client's channel to one broker, secured as its ``ClientSecurity`` says.

``open_channel(address, security, client_id=..., options=...)``:

- ``PLAINTEXT`` (or no security): ``grpc.insecure_channel``;
- ``SSL``: a TLS channel (the broker's certificate checked against the CA and the host
  name; the client's certificate presented when one is configured);
- ``SASL_SSL``: TLS plus a SCRAM-SHA-256 session with that broker (``ScramSession``): the
  first call authenticates (``Security.ScramStart``/``ScramFinish``, RFC 5802 messages;
  the server's signature is checked, so a fake broker is noticed; a failure, whether
  refused credentials or an unreachable broker, fails the call as a ``grpc.RpcError`` that
  ``errors.from_rpc_error`` turns into the typed error, as if the broker had answered it,
  so callers handle it where they handle every failed call), every call carries the
  session token in the metadata ``spark-log-session``, the session is renewed before it
  expires, and a ``SESSION_EXPIRED`` answer (the broker restarted) drops it so the next
  call (the caller's retry) authenticates again.

A non-empty ``client_id`` travels in ``spark-log-client-id`` (quotas per client id).  The
password stays in the ``ClientSecurity`` object: it is never sent (only a proof is),
logged or put in an error message.  Thread-safety: channels and sessions are safe to
share between threads.
"""
from __future__ import annotations

import secrets
import threading
import time
from typing import Any, Callable, NamedTuple, Sequence

import grpc

from . import errors
from ._channel_spin import pin
from .errors import AuthenticationError, SparkLogError
from .proto import security_pb2 as spb
from .scram import ScramClient
from .security import ClientSecurity

__all__ = ["open_channel", "ScramSession", "SESSION_HEADER", "CLIENT_ID_HEADER"]

SESSION_HEADER = "spark-log-session"
CLIENT_ID_HEADER = "spark-log-client-id"
_SCRAM_METHODS = ("/spark_log.security.v1.Security/ScramStart", "/spark_log.security.v1.Security/ScramFinish")
_REFRESH_AT = 0.8  # renew a session once 80% of its lifetime has passed


class ScramSession:
    """One SCRAM session with one broker, over ``channel`` (see the module docstring)."""

    def __init__(self, channel: grpc.Channel, security: ClientSecurity, *, timeout_s: float,
                 monotonic: Callable[[], float] = time.monotonic, nonce: Callable[[], str] | None = None) -> None:
        self._start = channel.unary_unary(_SCRAM_METHODS[0], request_serializer=spb.ScramStartRequest.SerializeToString,
                                          response_deserializer=spb.ScramStartResponse.FromString)
        self._finish = channel.unary_unary(_SCRAM_METHODS[1],
                                           request_serializer=spb.ScramFinishRequest.SerializeToString,
                                           response_deserializer=spb.ScramFinishResponse.FromString)
        self._security = security
        self._timeout_s = timeout_s
        self._monotonic = monotonic
        self._nonce = nonce or (lambda: secrets.token_urlsafe(24))
        self._lock = threading.Lock()
        self._token: str | None = None
        self._refresh_at = 0.0
        self.principal: str | None = None

    def token(self) -> str:
        """A live session token, authenticating first when there is none or it is due."""
        with self._lock:
            if self._token is not None and self._monotonic() < self._refresh_at:
                return self._token
            return self._authenticate()

    def invalidate(self, token: str) -> None:
        """The broker said ``token`` is no longer valid: the next call authenticates again."""
        with self._lock:
            if self._token == token:
                self._token = None

    def _authenticate(self) -> str:
        """One SCRAM exchange (caller holds the lock)."""
        username, password = self._security.username, self._security.password
        assert username is not None and password is not None  # ClientSecurity checks SASL_SSL has both
        client = ScramClient(username, password, self._nonce())
        started = self._monotonic()
        try:
            first = self._start(spb.ScramStartRequest(client_first=client.first()), timeout=self._timeout_s)
            final = self._finish(spb.ScramFinishRequest(exchange_id=first.exchange_id,
                                                        client_final=client.final(first.server_first)),
                                 timeout=self._timeout_s)
        except grpc.RpcError as exc:
            raise errors.from_rpc_error(exc) from None
        client.verify(final.server_final)
        if not final.session_token:
            raise AuthenticationError("the broker answered SCRAM without a session")
        self._token = final.session_token
        self._refresh_at = started + final.lifetime_ms / 1000 * _REFRESH_AT
        self.principal = final.principal
        return self._token


class RefusedCall(grpc.RpcError):
    """A call that failed before it was sent (its SCRAM session could not be opened):
    carries ``error`` the way a broker's typed answer does (``errors.from_rpc_error``)."""

    def __init__(self, error: SparkLogError) -> None:
        super().__init__(error.message)
        self.error = error

    def code(self) -> grpc.StatusCode:
        status: grpc.StatusCode = errors.grpc_status_code(self.error)
        return status

    def details(self) -> str:
        return self.error.message

    def trailing_metadata(self) -> Any:
        return errors.trailing_metadata(self.error)


class _Details(NamedTuple):
    method: str
    timeout: float | None
    metadata: Sequence[tuple[str, str | bytes]] | None
    credentials: grpc.CallCredentials | None
    wait_for_ready: bool | None
    compression: grpc.Compression | None


class _Interceptor(grpc.UnaryUnaryClientInterceptor):
    """Adds the client id and the session token to every unary call."""

    def __init__(self, session: ScramSession | None, client_id: str) -> None:
        self._session = session
        self._fixed: tuple[tuple[str, str], ...] = ((CLIENT_ID_HEADER, client_id),) if client_id else ()

    def intercept_unary_unary(self, continuation: Callable[[Any, Any], Any], client_call_details: Any,
                              request: Any) -> Any:
        metadata = list(client_call_details.metadata or ()) + list(self._fixed)
        token = None
        if self._session is not None and client_call_details.method not in _SCRAM_METHODS:
            try:
                token = self._session.token()
            except SparkLogError as exc:
                raise RefusedCall(exc) from None
            metadata.append((SESSION_HEADER, token))
        details = _Details(client_call_details.method, client_call_details.timeout, metadata,
                           client_call_details.credentials, client_call_details.wait_for_ready,
                           getattr(client_call_details, "compression", None))
        outcome = continuation(details, request)
        if token is not None:
            session = self._session
            assert session is not None

            def expired(call: Any) -> None:
                if call.code() == grpc.StatusCode.UNAUTHENTICATED:
                    error = errors.from_rpc_error(call)
                    if isinstance(error, errors.SessionExpiredError):
                        session.invalidate(token)

            outcome.add_done_callback(expired)
        return outcome


def open_channel(address: str, security: ClientSecurity | None, *, client_id: str = "",
                 options: Sequence[tuple[str, Any]] = (), timeout_s: float = 30.0) -> grpc.Channel:
    """A channel to ``address`` secured by ``security`` (see the module docstring).
    ``InvalidConfigError`` when the TLS files cannot be read."""
    if security is None or not security.tls:
        channel = grpc.insecure_channel(address, options=list(options))
        pin(channel)
        return grpc.intercept_channel(channel, _Interceptor(None, client_id)) if client_id else channel
    material = security.tls_material()
    credentials = grpc.ssl_channel_credentials(root_certificates=material.ca, private_key=material.private_key,
                                               certificate_chain=material.cert_chain)
    channel = grpc.secure_channel(address, credentials, options=list(options))
    pin(channel)
    session = ScramSession(channel, security, timeout_s=timeout_s) if security.scram else None
    if session is None and not client_id:
        return channel
    return grpc.intercept_channel(channel, _Interceptor(session, client_id))


def authenticated_principal(channel: grpc.Channel, timeout_s: float) -> str:
    """The principal the broker behind ``channel`` sees (``Security.WhoAmI``)."""
    whoami = channel.unary_unary("/spark_log.security.v1.Security/WhoAmI",
                                 request_serializer=spb.WhoAmIRequest.SerializeToString,
                                 response_deserializer=spb.WhoAmIResponse.FromString)
    try:
        return str(whoami(spb.WhoAmIRequest(), timeout=timeout_s).principal)
    except grpc.RpcError as exc:
        raise errors.from_rpc_error(exc) from None
    except SparkLogError:
        raise
