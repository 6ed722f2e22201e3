"""A SCRAM-authenticated data-listener connection lives no longer than its session: each
request first passes the gRPC listener's own session check
(``Authenticator.session_principal``), so the session's lifetime, a changed password and
a deleted user end it as they end a gRPC client's token.

Found by a security review: ``_scram_finish`` made the connection its principal for good
(the session ended at once), so after ``delete_user`` the connection kept fetching while
gRPC refused the user.  Runs ``DataListener.answer`` (the dispatch every request goes
through) with the node's real ``SessionStore`` and ``Authenticator`` on a manual clock;
the request is ``CLIENT_ID``, which needs nothing else of a broker.
"""
from __future__ import annotations

import itertools
import types
from typing import Any

from brokers.security.authn import Authenticator
from brokers.security.sessions import SessionStore
from brokers.server.data_listener import CLIENT_ID, SCRAM_FINISH, SCRAM_START, Caller, DataListener
from spark_log.clock import ManualClock
from spark_log.errors import ErrorCode
from spark_log.scram import ScramClient, ScramCredential, make_credential

LIFETIME_MS = 60_000


def _s(text: str) -> bytes:
    data = text.encode()
    return len(data).to_bytes(4, "little", signed=True) + data


def _answer(chunks: list[Any]) -> tuple[int, str, bytes]:
    data = b"".join(bytes(c) for c in chunks)
    code = int.from_bytes(data[:2], "little", signed=True)
    size = int.from_bytes(data[2:6], "little", signed=True)
    return code, data[6: 6 + size].decode(), data[6 + size:]


def _strings(data: bytes) -> list[str]:
    out = []
    while data:
        size = int.from_bytes(data[:4], "little", signed=True)
        out.append(data[4: 4 + size].decode())
        data = data[4 + size:]
    return out


class Node:
    """A data listener on a ``SASL_SSL`` node with the node's session store and authenticator."""

    def __init__(self) -> None:
        self.clock = ManualClock()
        self.users: dict[str, ScramCredential] = {"eve": make_credential("pw", b"a" * 16, 4096)}
        counter = itertools.count()
        self.sessions = SessionStore(clock=self.clock, lifetime_ms=LIFETIME_MS,
                                     token_bytes=lambda n: next(counter).to_bytes(n, "big"))
        self.authenticator = Authenticator(protocol="SASL_SSL", sessions=self.sessions, node_secret=None,
                                           users=lambda: self.users)
        self.listener = DataListener.__new__(DataListener)
        self.listener.manager = types.SimpleNamespace(image=types.SimpleNamespace(
            security=types.SimpleNamespace(users=self.users)))
        self.listener.security = types.SimpleNamespace(
            config=types.SimpleNamespace(security_protocol="SASL_SSL"), sessions=self.sessions,
            authenticator=self.authenticator, authorizer=None)

    def connect(self, password: str = "pw") -> Caller:
        caller = self.listener.new_caller("127.0.0.1")
        self.scram(caller, password)
        return caller

    def scram(self, caller: Caller, password: str = "pw") -> None:
        client = ScramClient("eve", password, "nonce")
        code, message, body = _answer(self.listener.answer(SCRAM_START, memoryview(_s(client.first())), caller=caller))
        assert code == 0, message
        exchange_id, server_first = _strings(body)
        code, message, body = _answer(self.listener.answer(
            SCRAM_FINISH, memoryview(_s(exchange_id) + _s(client.final(server_first))), caller=caller))
        assert code == 0, message
        server_final, principal = _strings(body)
        client.verify(server_final)
        assert principal == "User:eve" == caller.principal

    def request(self, caller: Caller) -> tuple[int, str]:
        code, message, _ = _answer(self.listener.answer(CLIENT_ID, memoryview(_s("app")), caller=caller))
        return code, message


def _ended(node: Node, caller: Caller) -> None:
    """The session's end as gRPC answers it: SESSION_EXPIRED (retriable: authenticate again),
    the connection no longer authenticated and closed after this answer; nothing is served
    on it afterwards."""
    code, message = node.request(caller)
    assert code == ErrorCode.SESSION_EXPIRED, message
    assert not caller.authenticated and caller.principal == "User:ANONYMOUS" and caller.closing
    assert node.request(caller)[0] == ErrorCode.AUTHENTICATION_FAILED
    assert node.sessions.session_count == 0


def test_a_connection_is_served_while_its_session_lives() -> None:
    node = Node()
    caller = node.connect()
    assert node.request(caller) == (0, "")
    node.clock.advance(LIFETIME_MS - 1)
    assert node.request(caller) == (0, "")
    assert caller.authenticated and not caller.closing


def test_the_session_lifetime_ends_the_connection() -> None:
    node = Node()
    caller = node.connect()
    node.clock.advance(LIFETIME_MS)
    _ended(node, caller)


def test_a_deleted_user_ends_the_connection() -> None:
    node = Node()
    caller = node.connect()
    del node.users["eve"]
    _ended(node, caller)


def test_a_changed_password_ends_the_connection() -> None:
    node = Node()
    caller = node.connect()
    node.users["eve"] = make_credential("new", b"b" * 16, 4096)
    _ended(node, caller)


def test_authenticating_again_replaces_the_session_and_closing_ends_it() -> None:
    node = Node()
    caller = node.connect()
    node.clock.advance(LIFETIME_MS // 2)
    node.scram(caller)  # a new session, from now
    assert node.sessions.session_count == 1
    node.clock.advance(LIFETIME_MS // 2 + 1)
    assert node.request(caller) == (0, "")
    node.listener.end_session(caller)  # what the connection's handler does when it closes
    assert node.sessions.session_count == 0 and caller.session_token is None
