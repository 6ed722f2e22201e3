"""The broker's side of SCRAM over gRPC: exchanges, sessions, expiry, and what a failure says."""
from __future__ import annotations

import itertools

import pytest

from brokers.security.sessions import SessionStore
from spark_log.clock import ManualClock
from spark_log.errors import AuthenticationError, SessionExpiredError
from spark_log.scram import ScramClient, make_credential

USERS = {"alice": make_credential("wonderland", b"s" * 16, 4096)}


def store(clock: ManualClock, **kwargs: int) -> SessionStore:
    counter = itertools.count()
    return SessionStore(clock=clock, token_bytes=lambda n: next(counter).to_bytes(n, "big"), **kwargs)


def exchange(sessions: SessionStore, user: str, password: str) -> tuple[ScramClient, str]:
    client = ScramClient(user, password, "clientnonce")
    exchange_id, server_first = sessions.start(client.first(), USERS)
    result = sessions.finish(exchange_id, client.final(server_first))
    client.verify(result.server_final)
    return client, result.token


def test_a_good_password_opens_a_session_that_expires() -> None:
    clock = ManualClock()
    sessions = store(clock, lifetime_ms=60_000)
    _, token = exchange(sessions, "alice", "wonderland")
    assert sessions.lookup(token).principal == "User:alice"
    clock.advance(59_999)
    assert sessions.lookup(token).username == "alice"
    clock.advance(1)
    with pytest.raises(SessionExpiredError):
        sessions.lookup(token)
    with pytest.raises(SessionExpiredError):
        sessions.lookup("not-a-token")


def test_wrong_password_and_unknown_user_fail_alike() -> None:
    sessions = store(ManualClock())
    with pytest.raises(AuthenticationError) as wrong:
        exchange(sessions, "alice", "looking-glass")
    with pytest.raises(AuthenticationError) as unknown:
        exchange(sessions, "mallory", "anything")
    assert "invalid credentials" in str(wrong.value) and "invalid credentials" in str(unknown.value)
    assert "looking-glass" not in str(wrong.value)
    assert sessions.session_count == 0


def test_an_exchange_is_used_once_and_expires() -> None:
    clock = ManualClock()
    sessions = store(clock, pending_ttl_ms=1000)
    client = ScramClient("alice", "wonderland", "n1")
    exchange_id, server_first = sessions.start(client.first(), USERS)
    final = client.final(server_first)
    sessions.finish(exchange_id, final)
    with pytest.raises(AuthenticationError, match="unknown or expired exchange"):
        sessions.finish(exchange_id, final)  # a replayed client-final
    late = ScramClient("alice", "wonderland", "n2")
    exchange_id, server_first = sessions.start(late.first(), USERS)
    clock.advance(1001)
    with pytest.raises(AuthenticationError, match="unknown or expired exchange"):
        sessions.finish(exchange_id, late.final(server_first))


def test_bounded_memory() -> None:
    sessions = store(ManualClock(), max_sessions=2, max_pending=2)
    tokens = [exchange(sessions, "alice", "wonderland")[1] for _ in range(3)]
    assert sessions.session_count == 2
    with pytest.raises(SessionExpiredError):
        sessions.lookup(tokens[0])  # the oldest went
    assert sessions.lookup(tokens[2])
