"""Hand-assembled Fetch answers: stored frames go out with one copy, not four.

A protobuf message may carry its fields in any order, so a ``FetchPartitionResult`` is
written as the serialised small fields followed by the ``records`` (field 8) or
``arrow_stream`` (field 9) bytes field appended by hand; ``FetchResponse`` wraps each as its
field 1.  The bytes are exactly what ``FetchResponse.SerializeToString`` would parse back
to (tests check it), so clients use the ordinary generated stub.  The ``Broker`` service is
registered with a pass-through response serializer for ``Fetch`` only.
"""
from __future__ import annotations

from typing import Callable, Protocol, Sequence, TypeVar

import grpc

from google.protobuf.message import Message

from spark_log.fetch_wire import put_varint
from spark_log.proto import broker_pb2 as pb

__all__ = ["encode_fetch_response", "broker_handler", "unary", "RECORDS", "ARROW_STREAM", "Payload", "FetchPart",
           "BrokerMethods"]

RECORDS = 8
ARROW_STREAM = 9
_LEN = 2

_Req = TypeVar("_Req", bound=Message)
_Resp = TypeVar("_Resp")

Payload = bytes | memoryview | None
FetchPart = tuple[pb.FetchPartitionResult, int, Payload]
"""One partition of a fetch answer: ``(result without payload, payload field, payload)``."""


class BrokerMethods(Protocol):
    """The ``Broker`` service's methods (``service.BrokerServicer``); ``Fetch`` answers bytes."""

    def Metadata(self, request: pb.MetadataRequest, context: grpc.ServicerContext) -> pb.MetadataResponse: ...  # noqa: N802
    def Produce(self, request: pb.ProduceRequest, context: grpc.ServicerContext) -> pb.ProduceResponse: ...  # noqa: N802
    def Fetch(self, request: pb.FetchRequest, context: grpc.ServicerContext) -> bytes: ...  # noqa: N802
    def ListOffsets(self, request: pb.ListOffsetsRequest,  # noqa: N802
                    context: grpc.ServicerContext) -> pb.ListOffsetsResponse: ...
    def DescribePartitions(self, request: pb.DescribePartitionsRequest,  # noqa: N802
                           context: grpc.ServicerContext) -> pb.DescribePartitionsResponse: ...


def encode_fetch_response(parts: Sequence[FetchPart], throttle_time_ms: int = 0) -> bytes:
    """Serialised ``FetchResponse`` of ``(result without payload, payload field, payload)``."""
    chunks: list[bytes | memoryview] = []
    for head, field, payload in parts:
        head_bytes = head.SerializeToString()
        size = len(payload) if payload is not None else 0
        tail: list[bytes | memoryview] = [put_varint((field << 3) | _LEN), put_varint(size), payload] if payload is not None and size else []
        inner = len(head_bytes) + sum(len(t) for t in tail)
        chunks += [put_varint((1 << 3) | _LEN), put_varint(inner), head_bytes, *tail]
    if throttle_time_ms:
        chunks.append(pb.FetchResponse(throttle_time_ms=throttle_time_ms).SerializeToString())
    return b"".join(chunks)


def unary(method: Callable[[_Req, grpc.ServicerContext], _Resp], request: type[_Req],
          response: Callable[[_Resp], bytes]) -> grpc.RpcMethodHandler[_Req, _Resp]:
    """A typed unary-unary handler (the generated ``*_pb2_grpc`` helpers are untyped)."""
    return grpc.unary_unary_rpc_method_handler(method, request_deserializer=request.FromString,
                                               response_serializer=response)


def broker_handler(servicer: BrokerMethods) -> grpc.GenericRpcHandler:
    """The ``Broker`` service's handlers (as the generated ``add_BrokerServicer_to_server``,
    except that ``Fetch`` returns bytes already serialised by ``encode_fetch_response``)."""
    return grpc.method_handlers_generic_handler("spark_log.broker.v1.Broker", {
        "Metadata": unary(servicer.Metadata, pb.MetadataRequest, pb.MetadataResponse.SerializeToString),
        "Produce": unary(servicer.Produce, pb.ProduceRequest, pb.ProduceResponse.SerializeToString),
        "Fetch": unary(servicer.Fetch, pb.FetchRequest, bytes),
        "ListOffsets": unary(servicer.ListOffsets, pb.ListOffsetsRequest, pb.ListOffsetsResponse.SerializeToString),
        "DescribePartitions": unary(servicer.DescribePartitions, pb.DescribePartitionsRequest,
                                    pb.DescribePartitionsResponse.SerializeToString),
    })
