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

- ``predicate(field, op, value)``: the expression of one simple predicate on a topic column
  (``op``: one of ``PREDICATE_OPS``), or None when it cannot be pushed (a type other than
  integer, floating point, string or boolean for a comparison; a value that does not convert
  to the column's type exactly, or of another kind (a float for an integer column, a bool for a
  number); a NaN value).  Both Spark connectors build their broker-side row
  filters with it (the Python one from Spark's filters, the brokers from the JVM one's
  predicates on the data listener's FETCH), so both push the same predicates with the same
  meaning.  The expression keeps at least the rows Spark's predicate keeps (Spark checks again
  after the scan): on floating-point columns NaN is the largest value and equal to itself in
  Spark, so ``=``, ``>``, ``>=`` and ``IN`` also keep NaN rows there.

Pure functions; thread-safe.  (Turning a user's DNF list into an expression, and choosing
the projected columns, is the client's business: ``spark_log._pushdown``.)
"""
from __future__ import annotations

import math
import operator
from typing import Any, Callable

import pyarrow as pa
import pyarrow.compute as pc

from .errors import InvalidRequestError

__all__ = ["FILTER_COLUMNS", "PREDICATE_OPS", "filter_schema", "serialize_filter", "deserialize_filter", "predicate"]

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


_COMPARE: dict[str, Callable[[Any, Any], Any]] = {
    "eq": operator.eq, "gt": operator.gt, "ge": operator.ge, "lt": operator.lt, "le": operator.le,
}
PREDICATE_OPS: tuple[str, ...] = ("eq", "gt", "ge", "lt", "le", "in", "is_null", "is_not_null")


def _is_nan(value: Any) -> bool:
    return isinstance(value, float) and math.isnan(value)


def _converts(value: Any, type_: pa.DataType) -> bool:
    """Whether ``value`` is of a kind the column holds, without the conversions pyarrow would make
    with a loss or a change of meaning: a float or a fractional Decimal to an integer (truncated),
    a bool to a number.  (Out-of-range values pyarrow refuses itself.)"""
    from decimal import Decimal

    if value is None:
        return True
    if isinstance(value, bool):
        return pa.types.is_boolean(type_)
    if pa.types.is_integer(type_):
        return isinstance(value, int) or (isinstance(value, Decimal) and value == value.to_integral_value())
    if pa.types.is_floating(type_):
        return isinstance(value, (int, float))
    return True


def predicate(field: pa.Field[Any], op: str, value: Any) -> pc.Expression | None:
    """The expression of ``field <op> value`` (``in``: ``value`` is a sequence; ``is_null`` and
    ``is_not_null`` take no value), or None when it is not pushed (module docstring)."""
    name = field.name
    if op == "is_null":
        return pc.field(name).is_null()
    if op == "is_not_null":
        return pc.is_valid(pc.field(name))  # = Expression.is_valid(), which pyarrow-stubs 20 types as bool
    type_ = field.type
    floating = pa.types.is_floating(type_)
    if not (pa.types.is_integer(type_) or floating or pa.types.is_string(type_) or pa.types.is_boolean(type_)):
        return None
    try:
        if op == "in":
            values = list(value)
            if not values or any(_is_nan(v) or not _converts(v, type_) for v in values):
                return None
            expression: pc.Expression = pc.field(name).isin(pa.array(values, type=type_))
        elif op in _COMPARE:
            if _is_nan(value) or not _converts(value, type_):
                return None
            expression = _COMPARE[op](pc.field(name), pa.scalar(value, type=type_))
        else:
            return None
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError):
        return None
    if floating and op in ("eq", "gt", "ge", "in"):
        expression = expression | pc.is_nan(pc.field(name))  # Spark: NaN = NaN, NaN > any other value
    return expression
