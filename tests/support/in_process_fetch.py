"""A follower's data-listener client (``brokers.replica.data_fetch.DataFetchClient``) whose
requests the leader's ``DataListener`` answers in this process, without a socket; the api
of every request is recorded in ``apis``."""
from __future__ import annotations

import socket
import threading

from brokers.replica import data_fetch
from brokers.replica.replica_wire import ReplicaWanted
from brokers.server.data_listener import Caller, DataListener
from spark_log.errors import from_code

__all__ = ["InProcessFetchClient"]


class InProcessFetchClient(data_fetch.DataFetchClient):
    def __init__(self, listener: DataListener) -> None:  # no socket
        self._closed = False
        self._lock = threading.Lock()
        self._sock = socket.socket()  # never connected: only closed
        self._sent: dict[tuple[str, int], ReplicaWanted] = {}
        self.listener, self.caller = listener, Caller(principal="Node:2", host="127.0.0.1")
        self.apis: list[int] = []
        self.answered: list[list[data_fetch.ReplicaAnswer]] = []

    def _call(self, api: int, payload: bytes, timeout_s: float) -> memoryview:
        self.apis.append(api)
        chunks = self.listener.answer(api, memoryview(payload), caller=self.caller)
        view = memoryview(b"".join(bytes(c) for c in chunks))
        code = int.from_bytes(view[:2], "little", signed=True)
        size = int.from_bytes(view[2:6], "little", signed=True)
        if code:
            raise from_code(code, bytes(view[6:6 + size]).decode())
        return view[6 + size:]
