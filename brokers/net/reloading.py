"""``ReloadingChannel``: a TLS channel to one address that follows the node's certificate.

gRPC fixes a channel's credentials when it is created.  This ``grpc.Channel`` holds an
inner secure channel and, on each unary-unary call, asks ``TlsFiles.current()`` (a cached
look, see ``tls.py``) whether the material changed; if so, later calls go to a new inner
channel built with the new certificate and key.  The previous inner channel is kept open
(calls in flight on it finish) and closed when a second change retires it again, or on
``close``.  Every call also carries the channel's fixed ``metadata`` (the inter-node
token, ``node_auth.py``) ahead of the caller's.

Only unary-unary calls follow reloads (every node-to-node RPC is unary); the streaming
factories and connectivity subscriptions use the channel current at the time.
Thread-safety: as ``grpc.Channel``.
"""
from __future__ import annotations

import threading
from types import TracebackType
from typing import TYPE_CHECKING, Any, Callable, Sequence, TypeVar

import grpc

from .tls import TlsFiles, TlsMaterial

__all__ = ["ReloadingChannel"]

_Req = TypeVar("_Req")
_Resp = TypeVar("_Resp")
Options = Sequence[tuple[str, Any]]
Metadata = tuple[tuple[str, str | bytes], ...]


class ReloadingChannel(grpc.Channel):
    """See the module docstring."""

    def __init__(self, address: str, files: TlsFiles, *, options: Options = (), metadata: Metadata = ()) -> None:
        self.address = address
        self._files = files
        self._options = list(options)
        self.metadata = metadata
        self._lock = threading.Lock()
        self._closed = False
        self._generation = -1
        self._inner: grpc.Channel | None = None
        self._retired: grpc.Channel | None = None

    def current(self) -> grpc.Channel:
        """The inner channel for the current TLS material (a new one after a reload)."""
        material = self._files.current()
        with self._lock:
            if self._closed:
                raise ValueError("channel is closed")
            if self._inner is None or material.generation != self._generation:
                self._swap(material)
            assert self._inner is not None
            return self._inner

    @property
    def generation(self) -> int:
        return self._generation

    def _swap(self, material: TlsMaterial) -> None:
        credentials = grpc.ssl_channel_credentials(root_certificates=material.ca, private_key=material.private_key,
                                                   certificate_chain=material.cert_chain)
        if self._retired is not None:
            self._retired.close()
        self._retired = self._inner
        self._inner = grpc.secure_channel(self.address, credentials, options=self._options)
        self._generation = material.generation

    def with_metadata(self, metadata: Sequence[tuple[str, str | bytes]] | None) -> Metadata:
        return self.metadata + tuple(metadata or ())

    def unary_unary(self, method: str, request_serializer: Callable[[_Req], bytes] | None = None,
                    response_deserializer: Callable[[bytes], _Resp] | None = None,
                    _registered_method: bool | None = False) -> grpc.UnaryUnaryMultiCallable[_Req, _Resp]:
        callable_: grpc.UnaryUnaryMultiCallable[_Req, _Resp] = _UnaryUnary(self, method, request_serializer,
                                                                          response_deserializer)
        return callable_

    def unary_stream(self, method: str, request_serializer: Callable[[_Req], bytes] | None = None,
                     response_deserializer: Callable[[bytes], _Resp] | None = None,
                     _registered_method: bool | None = False) -> grpc.UnaryStreamMultiCallable[_Req, _Resp]:
        return self.current().unary_stream(method, request_serializer, response_deserializer)

    def stream_unary(self, method: str, request_serializer: Callable[[_Req], bytes] | None = None,
                     response_deserializer: Callable[[bytes], _Resp] | None = None,
                     _registered_method: bool | None = False) -> grpc.StreamUnaryMultiCallable[_Req, _Resp]:
        return self.current().stream_unary(method, request_serializer, response_deserializer)

    def stream_stream(self, method: str, request_serializer: Callable[[_Req], bytes] | None = None,
                      response_deserializer: Callable[[bytes], _Resp] | None = None,
                      _registered_method: bool | None = False) -> grpc.StreamStreamMultiCallable[_Req, _Resp]:
        return self.current().stream_stream(method, request_serializer, response_deserializer)

    def subscribe(self, callback: Callable[[grpc.ChannelConnectivity], None], try_to_connect: bool = False) -> None:
        self.current().subscribe(callback, try_to_connect=try_to_connect)

    def unsubscribe(self, callback: Callable[[grpc.ChannelConnectivity], None]) -> None:
        with self._lock:
            inner = self._inner
        if inner is not None:
            inner.unsubscribe(callback)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            channels = [c for c in (self._inner, self._retired) if c is not None]
            self._inner = self._retired = None
        for channel in channels:
            channel.close()

    def __enter__(self) -> "ReloadingChannel":
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc_val: BaseException | None,
                 exc_tb: TracebackType | None) -> bool | None:
        self.close()
        return None


if TYPE_CHECKING:  # grpc's classes are generic only in its stubs
    _UnaryUnaryBase = grpc.UnaryUnaryMultiCallable[Any, Any]
else:
    _UnaryUnaryBase = grpc.UnaryUnaryMultiCallable


class _UnaryUnary(_UnaryUnaryBase):
    """A unary-unary method of a ``ReloadingChannel``: resolved on the current inner
    channel at each call (cached per inner channel)."""

    def __init__(self, owner: ReloadingChannel, method: str, serializer: Callable[[Any], bytes] | None,
                 deserializer: Callable[[bytes], Any] | None) -> None:
        self._owner = owner
        self._method = method
        self._serializer = serializer
        self._deserializer = deserializer
        self._bound: tuple[grpc.Channel, grpc.UnaryUnaryMultiCallable[Any, Any]] | None = None

    def _callable(self) -> grpc.UnaryUnaryMultiCallable[Any, Any]:
        channel = self._owner.current()
        bound = self._bound
        if bound is None or bound[0] is not channel:
            bound = self._bound = (channel, channel.unary_unary(self._method, self._serializer, self._deserializer))
        return bound[1]

    def __call__(self, request: Any, timeout: float | None = None, metadata: Any = None,
                 credentials: grpc.CallCredentials | None = None, wait_for_ready: bool | None = None,
                 compression: grpc.Compression | None = None) -> Any:
        return self._callable()(request, timeout=timeout, metadata=self._owner.with_metadata(metadata),
                                credentials=credentials, wait_for_ready=wait_for_ready, compression=compression)

    def with_call(self, request: Any, timeout: float | None = None, metadata: Any = None,
                  credentials: grpc.CallCredentials | None = None, wait_for_ready: bool | None = None,
                  compression: grpc.Compression | None = None) -> tuple[Any, grpc.Call]:
        return self._callable().with_call(request, timeout=timeout, metadata=self._owner.with_metadata(metadata),
                                          credentials=credentials, wait_for_ready=wait_for_ready,
                                          compression=compression)

    def future(self, request: Any, timeout: float | None = None, metadata: Any = None,
               credentials: grpc.CallCredentials | None = None, wait_for_ready: bool | None = None,
               compression: grpc.Compression | None = None) -> Any:
        return self._callable().future(request, timeout=timeout, metadata=self._owner.with_metadata(metadata),
                                       credentials=credentials, wait_for_ready=wait_for_ready,
                                       compression=compression)
