"""Calls to a transactional id's coordinator (``__transaction_state``'s partition leader).

``TxnRpc`` is ``GroupRpc`` pointed at the ``TransactionCoordinator`` service: it finds and
caches the coordinator, and retries what retrying can fix (a coordinator that moved or is
loading, an unreachable broker) until its deadline; it also retries
``ConcurrentTransactionsError`` (the previous transaction's markers are being written).
Every other typed error is raised at once.  Thread-safe.
"""
from __future__ import annotations

import threading
import time
from typing import Any, Callable

from . import errors
from ._client import READ_TRY_S, Cluster
from ._group_client import GroupRpc
from .proto import transactions_pb2 as tpb
from .proto import transactions_pb2_grpc as grpc_txn

__all__ = ["TxnRpc"]


class TxnRpc(GroupRpc):
    def __init__(self, cluster: Cluster, *, timeout_s: float = 30.0) -> None:
        super().__init__(cluster, timeout_s=timeout_s)
        self._txn_lock = threading.Lock()

    def stub(self, address: str) -> grpc_txn.TransactionCoordinatorStub:  # type: ignore[override]
        return grpc_txn.TransactionCoordinatorStub(self.cluster.channel(address))

    def coordinator(self, transactional_id: str, *, refresh: bool = False) -> str:
        with self._txn_lock:
            cached = self._coordinators.get(transactional_id)
        if cached is not None and not refresh:
            return cached
        request = tpb.FindTxnCoordinatorRequest(transactional_id=transactional_id)
        try_s = min(self.timeout_s, READ_TRY_S)
        answer: tpb.FindTxnCoordinatorResponse = self.cluster.call_any(
            lambda address: self.stub(address).FindCoordinator(request, timeout=try_s), read_only=True)
        with self._txn_lock:
            self._coordinators[transactional_id] = answer.address
        return str(answer.address)

    def call(self, transactional_id: str, method: str, request: Any, *, deadline_s: float | None = None,
             timeout_s: float | None = None, sleep: Callable[[float], None] = time.sleep) -> Any:
        deadline = time.monotonic() + (self.timeout_s if deadline_s is None else deadline_s)
        delay = 0.02
        while True:
            try:
                return super().call(transactional_id, method, request, deadline_s=max(0.0, deadline - time.monotonic()),
                                    timeout_s=timeout_s, sleep=sleep)
            except errors.ConcurrentTransactionsError:
                if time.monotonic() + delay > deadline:
                    raise
            sleep(delay)  # backoff while the coordinator writes the last transaction's markers
            delay = min(delay * 2, 0.2)
