"""The row-filter wire format, shared by clients (which encode) and brokers (which decode).

A row filter travels in ``FetchRequest.row_filter`` as a Substrait ExtendedExpression that
holds exactly one expression, named ``row_filter``, bound to the *filter schema* of the
topic: the topic's current columns plus ``offset`` (int64), ``timestamp`` (timestamp[ms];
bytes topics already have it) and ``partition`` (int32), appended in that order when the
topic does not have them.  The broker evaluates the expression by column *name*, so frames
written with older (narrower) schemas are filtered too, their missing columns read as nulls.

- ``filter_schema(schema)``: the filter schema of a topic whose columns are ``schema``.
- ``serialize_filter(expression, schema) -> bytes``: ``InvalidRequestError`` when the
  expression cannot be bound to ``filter_schema(schema)`` (an unknown column, a type
  Substrait cannot carry).
- ``deserialize_filter(data) -> (expression, bound schema)``: ``InvalidRequestError`` for
  bytes that are not such a message.

Pure functions; thread-safe.  (Turning a user's DNF list into an expression, and choosing
the projected columns, is the client's business: ``spark_log._pushdown``.)
"""
from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from .errors import InvalidRequestError

__all__ = ["FILTER_COLUMNS", "filter_schema", "serialize_filter", "deserialize_filter"]

FILTER_COLUMNS: tuple[tuple[str, pa.DataType], ...] = (
    ("offset", pa.int64()),
    ("timestamp", pa.timestamp("ms")),
    ("partition", pa.int32()),
)
_EXPRESSION_NAME = "row_filter"


def filter_schema(schema: pa.Schema) -> pa.Schema:
    """``schema`` plus the ``FILTER_COLUMNS`` it does not already have, in that order."""
    fields = list(schema)
    for name, type_ in FILTER_COLUMNS:
        if schema.get_field_index(name) < 0:
            fields.append(pa.field(name, type_))
    return pa.schema(fields)


def serialize_filter(expression: pc.Expression, schema: pa.Schema) -> bytes:
    """Substrait bytes of ``expression`` bound to ``filter_schema(schema)``."""
    import pyarrow.substrait as substrait

    try:
        buffer = substrait.serialize_expressions([expression], [_EXPRESSION_NAME], filter_schema(schema))
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
