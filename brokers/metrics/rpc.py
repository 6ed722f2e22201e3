"""``RpcMetricsInterceptor``: requests, errors and latency of every RPC a node serves.

Installed first among the node server's interceptors (so calls refused by the security
interceptor count too).  Per method (``Service/Method``, e.g. ``Broker/Produce``):
``spark_log_rpc_requests_total``, ``spark_log_rpc_errors_total`` (the call ended with a
non-OK status: a typed error aborted it, or the handler raised) and the
``spark_log_rpc_latency_seconds`` histogram (handler time, long polls included).
Per-partition errors inside an OK answer are not RPC errors.

Cost per call: one cached lookup of the method's children and three updates of
``prometheus_client`` values.  Thread-safety: shared by every worker thread.
"""
from __future__ import annotations

import threading
import time
from typing import Any, Callable

import grpc
from prometheus_client import CollectorRegistry, Counter, Histogram

__all__ = ["RpcMetricsInterceptor", "LATENCY_BUCKETS"]

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)

_Children = tuple[Any, Any, Any]


def short_name(method: str) -> str:
    """``/spark_log.broker.v1.Broker/Produce`` -> ``Broker/Produce``."""
    service, _, name = method.strip("/").partition("/")
    return f"{service.rpartition('.')[2]}/{name}"


class RpcMetricsInterceptor(grpc.ServerInterceptor):
    def __init__(self, registry: CollectorRegistry) -> None:
        self.requests = Counter("spark_log_rpc_requests", "RPCs served, by method", ["method"], registry=registry)
        self.errors = Counter("spark_log_rpc_errors", "RPCs that ended with an error status, by method", ["method"],
                              registry=registry)
        self.latency = Histogram("spark_log_rpc_latency_seconds", "Time to answer an RPC, by method", ["method"],
                                 buckets=LATENCY_BUCKETS, registry=registry)
        self._children: dict[str, _Children] = {}
        self._lock = threading.Lock()

    def _for(self, method: str) -> _Children:
        children = self._children.get(method)
        if children is None:
            name = short_name(method)
            with self._lock:
                children = self._children[method] = (self.requests.labels(name), self.errors.labels(name),
                                                      self.latency.labels(name))
        return children

    def intercept_service(self, continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler[Any, Any] | None],
                          handler_call_details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler[Any, Any] | None:
        handler = continuation(handler_call_details)
        if handler is None or handler.unary_unary is None:
            return handler  # unknown methods (gRPC answers UNIMPLEMENTED) and streaming ones (none today)
        inner = handler.unary_unary
        requests, errors, latency = self._for(handler_call_details.method)

        def unary(request: Any, context: grpc.ServicerContext) -> Any:
            start = time.perf_counter()
            requests.inc()
            try:
                return inner(request, context)
            except BaseException:
                errors.inc()
                raise
            finally:
                latency.observe(time.perf_counter() - start)

        return grpc.unary_unary_rpc_method_handler(unary, request_deserializer=handler.request_deserializer,
                                                   response_serializer=handler.response_serializer)
