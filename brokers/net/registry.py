"""``RecordingServer``: the node's ``grpc.Server``, remembering which services and
methods it serves.

Every service reaches the server through ``add_generic_rpc_handlers`` (handlers built with
``grpc.method_handlers_generic_handler`` name their service: ``service_name()``) or
``add_registered_method_handlers``; this wrapper records, in order, the service names
(``services``) and the full method paths (``methods``, ``"/pkg.Service/Method"``) and
delegates everything to the real server.  A generic handler whose methods cannot be
listed (a hand-written ``GenericRpcHandler`` answering any path it likes) is recorded in
``unlisted``, so a completeness check can refuse it instead of missing its methods.
These are what ``tests/integration/test_security_rpcs.py`` enumerates to check that every
RPC the node serves has an access rule.  Thread-safety: registration happens before ``start``.
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
        self.methods: list[str] = []
        self.unlisted: list[str] = []

    def _record(self, name: str, methods: Iterable[str]) -> None:
        if name not in self.services:
            self.services.append(name)
        for method in methods:
            if method not in self.methods:
                self.methods.append(method)

    def add_generic_rpc_handlers(self, generic_rpc_handlers: Iterable[grpc.GenericRpcHandler]) -> None:
        handlers = list(generic_rpc_handlers)
        for handler in handlers:
            service_name = getattr(handler, "service_name", None)
            name = str(service_name()) if callable(service_name) else f"<unnamed {type(handler).__name__}>"
            # grpc's DictionaryGenericHandler (method_handlers_generic_handler) keeps its full
            # paths in _method_handlers; any other handler's methods cannot be listed
            paths = getattr(handler, "_method_handlers", None)
            if isinstance(paths, Mapping):
                self._record(name, (str(path) for path in paths))
            else:
                self._record(name, ())
                self.unlisted.append(name)
        self._inner.add_generic_rpc_handlers(handlers)

    def add_registered_method_handlers(self, service_name: str,
                                       method_handlers: Mapping[str, grpc.RpcMethodHandler[Any, Any]]) -> None:
        self._record(service_name, (f"/{service_name}/{method}" for method in method_handlers))
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
