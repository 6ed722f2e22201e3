"""Filter pushdown for batch reads: Spark predicates turned into offset ranges and a
broker-side row filter.

``push_filters(filters, plan)`` returns the ``PushedFilters`` it absorbed and the
filters Spark must still evaluate, by reference, as ``DataSourceReader.pushFilters``
requires:

=====================================  ======================================  ==========
predicate                              effect                                  Spark re-checks
=====================================  ======================================  ==========
``topic``/``partition`` =, IN, <, ...  drop whole topic partitions             no
``offset`` =, <, <=, >, >=             shrink ``[start, end)``                 no
``offset IN (...)``                    shrink to ``[min, max + 1)``            yes
``timestamp >``/``>=``                 start at the first offset by time       yes
typed column =, <, <=, >, >=, IN,      row filter evaluated on the brokers     yes
IS [NOT] NULL
=====================================  ======================================  ==========

Everything else is left to Spark.  ``PushedFilters`` pickles (it is part of the reader).
"""
from __future__ import annotations

import datetime as _dt
import operator
from dataclasses import dataclass, field
from typing import Any, Final, Iterable

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import (
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
)

from spark_log.filters import predicate

from . import offsets as off
from .plan import ReadPlan

__all__ = ["PushedFilters", "push_filters"]

_COMPARISONS: Final = (EqualTo, GreaterThan, GreaterThanOrEqual, LessThan, LessThanOrEqual)


@dataclass
class PushedFilters:
    """Predicates absorbed by the source (see module docstring). Picklable."""

    topic_tests: list[tuple[str, Any]] = field(default_factory=list)      # (op name, value)
    partition_tests: list[tuple[str, Any]] = field(default_factory=list)
    offset_low: int = 0              # inclusive
    offset_high: int | None = None   # exclusive
    min_timestamp: int | None = None  # ms
    row_filter: pc.Expression | None = None  # for Consumer(row_filter=...)

    def _keep(self, tp: off.TopicPartition) -> bool:
        return all(_test(op, tp.topic, v) for op, v in self.topic_tests) and all(
            _test(op, tp.partition, v) for op, v in self.partition_tests
        )

    def narrow(self, begin: off.Offsets, end: off.Offsets) -> tuple[off.Offsets, off.Offsets]:
        """``begin``/``end`` restricted to the absorbed topic, partition and offset predicates."""
        kept = [tp for tp in end if self._keep(tp)]
        new_begin = {tp: max(begin.get(tp, 0), self.offset_low) for tp in kept}
        new_end = {tp: end[tp] if self.offset_high is None else min(end[tp], self.offset_high) for tp in kept}
        return new_begin, new_end


def _test(op: str, actual: Any, value: Any) -> bool:
    if op == "in":
        return actual in value
    return bool({"eq": operator.eq, "gt": operator.gt, "ge": operator.ge, "lt": operator.lt, "le": operator.le}[op](actual, value))


_OP_NAME: dict[type[Filter], str] = {EqualTo: "eq", GreaterThan: "gt", GreaterThanOrEqual: "ge", LessThan: "lt", LessThanOrEqual: "le"}


def _column(flt: Filter) -> str | None:
    """The top-level column ``flt`` tests, or None (nested, or a filter without one)."""
    attribute: tuple[str, ...] = getattr(flt, "attribute", ())
    return attribute[0] if len(attribute) == 1 else None


def _to_ms(value: Any) -> int | None:
    if isinstance(value, _dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=_dt.timezone.utc)
        return int(value.timestamp() * 1000)
    return None


def push_filters(filters: Iterable[Filter], plan: ReadPlan) -> tuple[PushedFilters, list[Filter]]:
    """Split ``filters`` into what the source absorbs and what Spark still evaluates."""
    pushed = PushedFilters()
    remaining: list[Filter] = []
    expressions: list[pc.Expression] = []
    data_fields = {f.name: f for f in (plan.topic_schema or [])} if plan.kind == "typed" else {}
    for flt in filters:
        column = _column(flt)
        if column in ("topic", "partition") and isinstance(flt, (*_COMPARISONS, In)):
            target = pushed.topic_tests if column == "topic" else pushed.partition_tests
            target.append(("in", tuple(flt.value)) if isinstance(flt, In) else (_OP_NAME[type(flt)], flt.value))
            continue
        if column == "offset" and isinstance(flt, _COMPARISONS) and isinstance(flt.value, int):
            v = int(flt.value)
            low, high = {"eq": (v, v + 1), "gt": (v + 1, None), "ge": (v, None), "lt": (0, v), "le": (0, v + 1)}[_OP_NAME[type(flt)]]
            pushed.offset_low = max(pushed.offset_low, low)
            if high is not None:
                pushed.offset_high = high if pushed.offset_high is None else min(pushed.offset_high, high)
            continue
        if column == "offset" and isinstance(flt, In) and flt.value and all(isinstance(x, int) for x in flt.value):
            pushed.offset_low = max(pushed.offset_low, min(flt.value))
            high = max(flt.value) + 1
            pushed.offset_high = high if pushed.offset_high is None else min(pushed.offset_high, high)
        elif column == "timestamp" and isinstance(flt, (GreaterThan, GreaterThanOrEqual)):
            ms = _to_ms(flt.value)
            if ms is not None:
                pushed.min_timestamp = ms if pushed.min_timestamp is None else max(pushed.min_timestamp, ms)
        elif column is not None and column in data_fields:
            expression = _expression(flt, data_fields[column])
            if expression is not None:
                expressions.append(expression)
        remaining.append(flt)
    if expressions:
        combined = expressions[0]
        for expression in expressions[1:]:
            combined = combined & expression
        pushed.row_filter = combined
    return pushed, remaining


def _expression(flt: Filter, arrow_field: pa.Field[Any]) -> pc.Expression | None:
    """A pyarrow.compute expression for ``flt`` on a top-level column, or None
    (``spark_log.filters.predicate``: the rule the JVM connector's pushdown shares)."""
    if isinstance(flt, IsNull):
        return predicate(arrow_field, "is_null", None)
    if isinstance(flt, IsNotNull):
        return predicate(arrow_field, "is_not_null", None)
    if isinstance(flt, In):
        return predicate(arrow_field, "in", tuple(flt.value))
    if isinstance(flt, _COMPARISONS):
        return predicate(arrow_field, _OP_NAME[type(flt)], flt.value)
    return None
