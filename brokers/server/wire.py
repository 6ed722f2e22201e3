"""Hand-assembled Fetch answers: stored frames go out with one copy, not four.

A protobuf message may carry its fields in any order, so a ``FetchPartitionResult`` is
written as the serialised small fields followed by the ``records`` (field 8) or
``arrow_stream`` (field 9) bytes field appended by hand; ``FetchResponse`` wraps each as its
field 1.  The bytes are exactly what ``FetchResponse.SerializeToString`` would parse back
to (tests check it), so clients use the ordinary generated stub.  The ``Broker`` service is
registered with a pass-through response serializer for ``Fetch`` only.
"""
from __future__ import annotations

from typing import Any, Sequence

import grpc

from spark_log.proto import broker_pb2 as pb

__all__ = ["encode_fetch_response", "broker_handler", "RECORDS", "ARROW_STREAM"]

RECORDS = 8
ARROW_STREAM = 9
_LEN = 2


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        bits = value & 0x7F
        value >>= 7
        if value:
            out.append(bits | 0x80)
        else:
            out.append(bits)
            return bytes(out)


def encode_fetch_response(parts: Sequence[tuple[pb.FetchPartitionResult, int, Any]], throttle_time_ms: int = 0) -> bytes:
    """Serialised ``FetchResponse`` of ``(result without payload, payload field, payload)``."""
    chunks: list[Any] = []
    for head, field, payload in parts:
        head_bytes = head.SerializeToString()
        size = len(payload) if payload is not None else 0
        tail = [_varint((field << 3) | _LEN), _varint(size), payload] if size else []
        inner = len(head_bytes) + sum(len(t) for t in tail)
        chunks += [_varint((1 << 3) | _LEN), _varint(inner), head_bytes, *tail]
    if throttle_time_ms:
        chunks.append(pb.FetchResponse(throttle_time_ms=throttle_time_ms).SerializeToString())
    return b"".join(chunks)


def broker_handler(servicer: Any) -> grpc.GenericRpcHandler:
    """The ``Broker`` service's handlers (as the generated ``add_BrokerServicer_to_server``,
    except that ``Fetch`` returns bytes already serialised by ``encode_fetch_response``)."""
    def unary(method: Any, request: Any, response: Any) -> grpc.RpcMethodHandler:
        return grpc.unary_unary_rpc_method_handler(method, request_deserializer=request.FromString,
                                                   response_serializer=response)
    return grpc.method_handlers_generic_handler("spark_log.broker.v1.Broker", {
        "Metadata": unary(servicer.Metadata, pb.MetadataRequest, pb.MetadataResponse.SerializeToString),
        "Produce": unary(servicer.Produce, pb.ProduceRequest, pb.ProduceResponse.SerializeToString),
        "Fetch": unary(servicer.Fetch, pb.FetchRequest, bytes),
        "ListOffsets": unary(servicer.ListOffsets, pb.ListOffsetsRequest, pb.ListOffsetsResponse.SerializeToString),
        "DescribePartitions": unary(servicer.DescribePartitions, pb.DescribePartitionsRequest,
                                    pb.DescribePartitionsResponse.SerializeToString),
    })
