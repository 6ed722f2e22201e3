"""The broker's side of SCRAM-SHA-256 over gRPC, and the session tokens it hands out.

gRPC has no SASL, so the exchange (``spark_log.scram``) runs as two RPCs of the
``Security`` service:

1. ``ScramStart(client-first)``: the user's stored credential is looked up in the metadata
   image; the answer is the server-first message and an ``exchange_id`` naming this
   exchange (kept ``pending_ttl_ms``, at most ``max_pending`` at once);
2. ``ScramFinish(exchange_id, client-final)``: the proof is checked; the answer is the
   server-final message (the client checks the server's signature) and a session token:
   32 random bytes, valid ``lifetime_ms`` on this node only.

Later calls carry the token in the metadata ``spark-log-session``; ``lookup`` returns the
session or raises ``SessionExpiredError`` (unknown: e.g. the node restarted; expired).
Only a SHA-256 of each token is kept.  An unknown user is answered like a known one (a
salt derived from the node's secret, the minimum iteration count) and fails at the proof,
so the exchange does not reveal which users exist; both failures say "invalid
credentials".  Nothing here logs or returns a password or proof.

Time and randomness are injected (``clock``, ``token_bytes``).  Thread-safety: every
method may be called from any thread (one lock).
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Callable, Mapping

from spark_log.clock import Clock
from spark_log.errors import AuthenticationError, SessionExpiredError
from spark_log.scram import (
    MIN_ITERATIONS,
    ScramCredential,
    parse_client_first,
    server_first_message,
    verify_client_final,
)

from .principal import user

__all__ = ["Session", "SessionStore", "ScramResult", "SESSION_HEADER"]

SESSION_HEADER = "spark-log-session"


@dataclass(frozen=True, slots=True)
class Session:
    principal: str
    username: str
    salt: bytes  # of the credential it was opened with: a new password ends the session
    expires_ms: int


@dataclass(frozen=True, slots=True)
class ScramResult:
    server_final: str
    token: str
    lifetime_ms: int
    principal: str


@dataclass(frozen=True, slots=True)
class _Pending:
    username: str
    bare: str
    server_first: str
    nonce: str
    credential: ScramCredential | None  # None: unknown user (fails at the proof)
    expires_ms: int


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


class SessionStore:
    """See the module docstring."""

    def __init__(self, *, clock: Clock, lifetime_ms: int = 3_600_000, token_bytes: Callable[[int], bytes] | None = None,
                 max_sessions: int = 100_000, max_pending: int = 10_000, pending_ttl_ms: int = 30_000) -> None:
        self._clock = clock
        self.lifetime_ms = lifetime_ms
        self._random = token_bytes or secrets.token_bytes
        self._secret = self._random(32)  # derives the decoy salts of unknown users
        self._max_sessions = max_sessions
        self._max_pending = max_pending
        self._pending_ttl_ms = pending_ttl_ms
        self._lock = threading.Lock()
        self._pending: OrderedDict[str, _Pending] = OrderedDict()
        self._sessions: OrderedDict[bytes, Session] = OrderedDict()

    def _token(self) -> str:
        return base64.urlsafe_b64encode(self._random(32)).decode().rstrip("=")

    def start(self, client_first: str, users: Mapping[str, ScramCredential]) -> tuple[str, str]:
        """``(exchange_id, server-first message)``; ``AuthenticationError`` for a malformed message."""
        username, client_nonce, bare = parse_client_first(client_first)
        if len(client_nonce) > 256:
            raise AuthenticationError("SCRAM: client nonce too long")
        credential = users.get(username)
        if credential is not None:
            salt, iterations = credential.salt, credential.iterations
        else:
            salt = hmac.new(self._secret, username.encode(), hashlib.sha256).digest()[:16]
            iterations = MIN_ITERATIONS
        nonce = client_nonce + self._token()
        server_first = server_first_message(nonce, salt, iterations)
        now = self._clock.monotonic_ms()
        exchange_id = self._token()
        with self._lock:
            self._expire(now)
            while len(self._pending) >= self._max_pending:
                self._pending.popitem(last=False)
            self._pending[exchange_id] = _Pending(username, bare, server_first, nonce, credential,
                                                  now + self._pending_ttl_ms)
        return exchange_id, server_first

    def finish(self, exchange_id: str, client_final: str) -> ScramResult:
        """Check the proof; a new session on success.  ``AuthenticationError`` otherwise
        (unknown or expired exchange, wrong password, unknown user)."""
        now = self._clock.monotonic_ms()
        with self._lock:
            pending = self._pending.pop(exchange_id, None)
        if pending is None or pending.expires_ms < now:
            raise AuthenticationError("SCRAM: unknown or expired exchange; start again")
        failure = f"authentication failed for user {pending.username!r}: invalid credentials"
        if pending.credential is None:
            raise AuthenticationError(failure)
        try:
            server_final = verify_client_final(client_final, client_first_bare_message=pending.bare,
                                               server_first=pending.server_first, nonce=pending.nonce,
                                               credential=pending.credential)
        except AuthenticationError as exc:
            if exc.message == "SCRAM: invalid credentials":
                raise AuthenticationError(failure) from None
            raise
        token = self._token()
        session = Session(principal=user(pending.username), username=pending.username, salt=pending.credential.salt,
                          expires_ms=now + self.lifetime_ms)
        with self._lock:
            while len(self._sessions) >= self._max_sessions:
                self._sessions.popitem(last=False)
            self._sessions[_digest(token)] = session
        return ScramResult(server_final=server_final, token=token, lifetime_ms=self.lifetime_ms,
                           principal=session.principal)

    def lookup(self, token: str) -> Session:
        """The live session of ``token``; ``SessionExpiredError`` (retriable: authenticate again)."""
        key = _digest(token)
        now = self._clock.monotonic_ms()
        with self._lock:
            session = self._sessions.get(key)
            if session is not None and session.expires_ms <= now:
                del self._sessions[key]
                session = None
        if session is None:
            raise SessionExpiredError("the session is unknown to this broker or expired; authenticate again")
        return session

    def end(self, token: str) -> None:
        with self._lock:
            self._sessions.pop(_digest(token), None)

    def _expire(self, now: int) -> None:
        """Drop expired exchanges (caller holds the lock); sessions expire on lookup."""
        while self._pending:
            first = next(iter(self._pending.values()))
            if first.expires_ms >= now:
                break
            self._pending.popitem(last=False)

    @property
    def session_count(self) -> int:
        with self._lock:
            return len(self._sessions)
