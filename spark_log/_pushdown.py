"""Client side of fetch pushdown: the user's row filter as an expression, and the data
columns to project.  The wire format of the filter is public: ``spark_log.filters``.
"""
from __future__ import annotations

from typing import Any, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from .errors import InvalidRequestError

__all__ = ["RowFilter", "to_expression", "projection"]

# What ``Consumer(row_filter=...)`` takes: an expression, or pyarrow's DNF filter list (a list of
# (column, op, value) tests, or a list of such lists OR-ed together).  Checked at run time.
RowFilter = pc.Expression | Sequence[tuple[str, str, Any]] | Sequence[Sequence[tuple[str, str, Any]]]


def to_expression(row_filter: object) -> pc.Expression:
    """A ``pc.Expression`` from an expression or a DNF list ``[("col", "op", value), ...]``
    (as ``pyarrow.parquet`` takes); ``InvalidRequestError`` for anything else."""
    if isinstance(row_filter, pc.Expression):
        return row_filter
    if isinstance(row_filter, (list, tuple)):
        import pyarrow.parquet as pq

        try:
            return pq.filters_to_expression(list(row_filter))
        except (TypeError, ValueError) as exc:
            raise InvalidRequestError(f"row_filter is not a valid filter list: {exc}") from None
    raise InvalidRequestError(
        f"row_filter must be a pyarrow.compute.Expression or a list of (column, op, value); got {type(row_filter).__name__}"
    )


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
