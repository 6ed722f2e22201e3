"""``RecordingServer``: the node's ``grpc.Server``, remembering which services it serves.

Every service reaches the server through ``add_generic_rpc_handlers`` (handlers built with
``grpc.method_handlers_generic_handler`` name their service: ``service_name()``) or
``add_registered_method_handlers``; this wrapper records the names, in order, and
delegates everything to the real server.  ``services`` is what a test enumerates to
check that every RPC the node serves is authorized (its methods come from the protocol
descriptors, ``spark_log/proto``).  Thread-safety: registration happens before ``start``.
"""
from __future__ import annotations

import threading
from typing import Any, Iterable, Mapping

import grpc

__all__ = ["RecordingServer"]


class RecordingServer(grpc.Server):
    def __init__(self, inner: grpc.Server) -> None:
        self._inner = inner
        self.services: list[str] = []

    def _record(self, name: str) -> None:
        if name not in self.services:
            self.services.append(name)

    def add_generic_rpc_handlers(self, generic_rpc_handlers: Iterable[grpc.GenericRpcHandler]) -> None:
        handlers = list(generic_rpc_handlers)
        for handler in handlers:
            service_name = getattr(handler, "service_name", None)
            self._record(str(service_name()) if callable(service_name) else f"<unnamed {type(handler).__name__}>")
        self._inner.add_generic_rpc_handlers(handlers)

    def add_registered_method_handlers(self, service_name: str,
                                       method_handlers: Mapping[str, grpc.RpcMethodHandler[Any, Any]]) -> None:
        self._record(service_name)
        self._inner.add_registered_method_handlers(service_name, method_handlers)

    def add_insecure_port(self, address: str) -> int:
        return self._inner.add_insecure_port(address)

    def add_secure_port(self, address: str, server_credentials: grpc.ServerCredentials) -> int:
        return self._inner.add_secure_port(address, server_credentials)

    def start(self) -> None:
        self._inner.start()

    def stop(self, grace: float | None) -> threading.Event:
        return self._inner.stop(grace)

    def wait_for_termination(self, timeout: float | None = None) -> bool:
        return self._inner.wait_for_termination(timeout)
