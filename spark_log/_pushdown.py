"""Row filters that travel to brokers: a ``pyarrow.compute.Expression`` (or pyarrow's
DNF filter list, as ``pyarrow.parquet`` takes) serialised as a Substrait
ExtendedExpression bound to the *filter schema* of a topic.

The filter schema is the topic's current columns plus ``offset`` (int64), ``timestamp``
(timestamp[ms]; bytes topics already have it) and ``partition`` (int32), in that order.  The
broker evaluates the expression by column *name*, so frames written with older (narrower)
schemas are filtered too, their missing columns read as nulls.
"""
from __future__ import annotations

from typing import Any, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from .errors import InvalidRequestError

__all__ = ["filter_schema", "to_expression", "serialize_filter", "deserialize_filter"]

_EXTRA = (("offset", pa.int64()), ("timestamp", pa.timestamp("ms")), ("partition", pa.int32()))


def filter_schema(schema: pa.Schema) -> pa.Schema:
    fields = list(schema)
    for name, type_ in _EXTRA:
        if schema.get_field_index(name) < 0:
            fields.append(pa.field(name, type_))
    return pa.schema(fields)


def to_expression(row_filter: Any) -> pc.Expression:
    """A ``pc.Expression`` from an expression or a DNF list ``[("col", "op", value), ...]``."""
    if isinstance(row_filter, pc.Expression):
        return row_filter
    if isinstance(row_filter, (list, tuple)):
        import pyarrow.parquet as pq

        try:
            return pq.filters_to_expression(row_filter)
        except (TypeError, ValueError) as exc:
            raise InvalidRequestError(f"row_filter is not a valid filter list: {exc}") from None
    raise InvalidRequestError(
        f"row_filter must be a pyarrow.compute.Expression or a list of (column, op, value); got {type(row_filter).__name__}"
    )


def serialize_filter(expression: pc.Expression, schema: pa.Schema) -> bytes:
    """Substrait bytes of ``expression`` bound to ``filter_schema(schema)``."""
    import pyarrow.substrait as substrait

    try:
        buffer = substrait.serialize_expressions([expression], ["row_filter"], filter_schema(schema))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
        raise InvalidRequestError(f"row_filter cannot be evaluated on this topic: {exc}") from None
    return bytes(buffer)


def deserialize_filter(data: bytes) -> tuple[pc.Expression, pa.Schema]:
    """The expression and the schema it is bound to; ``InvalidRequestError`` if malformed."""
    import pyarrow.substrait as substrait

    try:
        bound = substrait.deserialize_expressions(pa.py_buffer(data))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, OSError) as exc:
        raise InvalidRequestError(f"row_filter is not a valid Substrait expression: {exc}") from None
    if len(bound.expressions) != 1:
        raise InvalidRequestError("row_filter must hold exactly one expression")
    (expression,) = bound.expressions.values()
    return expression, bound.schema


def projection(columns: Sequence[str] | None, schema: pa.Schema) -> list[str]:
    """The data columns to fetch: ``columns`` minus reserved ones, checked against ``schema``."""
    if columns is None:
        return list(schema.names)
    reserved = {"topic", "partition", "offset"} | ({"timestamp"} if "timestamp" not in schema.names else set())
    wanted = [c for c in columns if c not in reserved]
    unknown = [c for c in wanted if c not in schema.names]
    if unknown:
        raise InvalidRequestError(f"unknown columns {unknown}; the topic has {list(schema.names)}")
    return wanted
