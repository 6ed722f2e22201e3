"""Pushdown on the data listener's FETCH: the JVM connector's projection and row filter.

The JVM connector cannot encode Substrait, so its FETCH may end with a *pushdown block*
(after the partitions; a FETCH without one is answered exactly as before, and a broker that
predates the block ignores the trailing bytes and answers with stored frames)::

    u8 version (1)
    i32 n (-1: every column) x str column          the projection
    i32 n x (str column, u8 op, op's operand)      predicates, AND-ed
        op: 1 eq, 2 gt, 3 ge, 4 lt, 5 le (one value), 6 in (i32 n x value), 7 is null, 8 is not null
        value: u8 tag, then 0 null | 1 i64 | 2 f64 | 3 str | 4 u8 boolean | 5 str decimal

The block applies to the one topic the FETCH names.  Each predicate becomes an expression with
``spark_log.filters.predicate`` (the rule the Python connector's pushdown uses), the conjunction
is bound like any client's row filter (``serialize_filter``) and set on the ``FetchRequest``,
so ``FetchHandler.collect`` and ``pushdown.Pushdown`` filter and project as for a gRPC Fetch:
one implementation of filtering on the brokers.  A predicate ``predicate`` does not push is an
``InvalidRequestError`` (the client only sends what it reports as pushed).

A FETCH that carried the block gets, after its partitions, ``i32 n x u8`` payload kinds, one per
partition (0: stored frames, 1: an Arrow IPC stream of the selected rows: the projected columns,
then ``offset`` and ``timestamp``), so the client can tell a broker that filtered from one that
predates the block.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Protocol, Sequence

import pyarrow.compute as pc

from brokers.metadata.image import TopicImage
from spark_log.errors import InvalidRequestError, UnknownTopicOrPartitionError
from spark_log.filters import PREDICATE_OPS, predicate, serialize_filter
from spark_log.proto import broker_pb2 as pb

from .wire import ARROW_STREAM, FetchPart

__all__ = ["FetchPushdown", "read_block", "apply", "payload_kinds"]

VERSION = 1
_OPS = {i + 1: op for i, op in enumerate(PREDICATE_OPS)}  # 1 eq ... 6 in, 7 is_null, 8 is_not_null


class _Request(Protocol):
    """The data listener's request reader (``data_listener._Reader``)."""

    data: memoryview
    at: int

    def u8(self) -> int: ...
    def i32(self) -> int: ...
    def i64(self) -> int: ...
    def str(self) -> str: ...
    def raw(self) -> memoryview: ...
    def count(self) -> int: ...


@dataclass(frozen=True)
class FetchPushdown:
    columns: list[str] | None
    predicates: list[tuple[str, str, Any]]  # (column, op, value or values)


def _value(request: _Request) -> Any:
    tag = request.u8()
    if tag == 0:
        return None
    if tag == 1:
        return request.i64()
    if tag == 2:
        import struct

        return struct.unpack("<d", struct.pack("<q", request.i64()))[0]
    if tag == 3:
        return request.str()
    if tag == 4:
        return bool(request.u8())
    if tag == 5:
        from decimal import Decimal, InvalidOperation

        text = request.str()
        try:
            return Decimal(text)
        except InvalidOperation:
            raise InvalidRequestError(f"bad decimal {text!r} in a FETCH pushdown block") from None
    raise InvalidRequestError(f"unknown value tag {tag} in a FETCH pushdown block")


def read_block(request: _Request) -> FetchPushdown | None:
    """The pushdown block after a FETCH's partitions, or None when the request ends there."""
    if request.at >= len(request.data):
        return None
    version = request.u8()
    if version != VERSION:
        raise InvalidRequestError(f"FETCH pushdown block version {version}; this broker reads version {VERSION}")
    n = request.i32()
    columns = None if n < 0 else [request.str() for _ in range(n)]
    predicates: list[tuple[str, str, Any]] = []
    for _ in range(request.count()):
        column, code = request.str(), request.u8()
        op = _OPS.get(code)
        if op is None:
            raise InvalidRequestError(f"unknown predicate op {code} in a FETCH pushdown block")
        if op == "in":
            value: Any = tuple(_value(request) for _ in range(request.count()))
        elif op in ("is_null", "is_not_null"):
            value = None
        else:
            value = _value(request)
        predicates.append((column, op, value))
    return FetchPushdown(columns, predicates)


def apply(block: FetchPushdown, message: pb.FetchRequest, topics: Mapping[str, TopicImage]) -> None:
    """Set ``message``'s projection and row filter from ``block`` (module docstring)."""
    names = {p.topic for p in message.partitions}
    if len(names) != 1:
        raise InvalidRequestError(f"a FETCH with a pushdown block names one topic, not {sorted(names)}")
    (name,) = names
    topic = topics.get(name)
    if topic is None:
        raise UnknownTopicOrPartitionError(f"unknown topic {name!r}")
    schema = topic.schema
    if block.columns is not None:
        message.project = True
        message.columns.extend(block.columns)
    if not block.predicates or schema is None:
        if block.predicates:
            raise InvalidRequestError(f"topic {name!r} has no schema: nothing to filter")
        return
    expressions: list[pc.Expression] = []
    for column, op, value in block.predicates:
        index = schema.get_field_index(column)
        if index < 0:
            raise InvalidRequestError(f"a FETCH predicate names column {column!r}; topic {name!r} has {schema.names}")
        expression = predicate(schema.field(index), op, value)
        if expression is None:
            raise InvalidRequestError(f"the FETCH predicate {column} {op} {value!r} cannot be evaluated on "
                                      f"{schema.field(index).type}")
        expressions.append(expression)
    combined = expressions[0]
    for expression in expressions[1:]:
        combined = combined & expression
    message.row_filter = serialize_filter(combined, schema)


def payload_kinds(parts: Sequence[FetchPart]) -> list[int]:
    """Per partition: 1 when its payload is an Arrow IPC stream, else 0 (stored frames)."""
    return [1 if field == ARROW_STREAM else 0 for _result, field, _payload in parts]
