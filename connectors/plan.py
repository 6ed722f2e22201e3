"""What a read is, fixed at query start on the driver: ``ReadPlan``, and one Spark task's
share of it: ``RangePartition``.  Both pickle (Spark ships them to executors).

The reader (``connectors.reader``) and the filter pushdown (``connectors.filters``) both
take a plan; it lives here so that neither imports the other.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import pyarrow as pa
from pyspark.sql.datasource import InputPartition
from pyspark.sql.types import StructType

from .options import ReaderOptions

__all__ = ["RangePartition", "ReadPlan"]


@dataclass(frozen=True)
class RangePartition(InputPartition):
    """One Spark task: records ``[start, end)`` of ``topic``-``partition``. Picklable.

    ``timestamp_type`` is the topic's (0 CreateTime, 1 LogAppendTime) as the driver knew it
    when it planned the range: executors hold the plan pickled at query start, which
    does not know the topics ``subscribePattern`` found since.  None: take it from
    ``ReadPlan.timestamp_types``.
    """

    topic: str
    partition: int
    start: int
    end: int
    timestamp_type: int | None = None


@dataclass(frozen=True)
class ReadPlan:
    """Everything a read needs, fixed at query start on the driver. Picklable.

    ``kind`` is "bytes" or "typed"; ``topic_schema`` the typed topics' Arrow schema;
    ``schema`` the Spark schema the query sees (after ``columns``); ``fetch_columns``
    the stored columns the brokers must send (projection pushdown); ``timestamp_types``
    each topic's timestamp type at query start (never updated: topics found later carry
    theirs in their ``RangePartition``).
    """

    options: ReaderOptions
    kind: str
    schema: StructType
    fetch_columns: tuple[str, ...]
    topic_schema: pa.Schema | None = None
    timestamp_types: dict[str, int] = field(default_factory=dict)

    def matches(self, topic: str) -> bool:
        o = self.options
        if o.subscribe is not None:
            return topic in o.subscribe
        if o.subscribe_pattern is not None:
            return re.fullmatch(o.subscribe_pattern, topic) is not None
        return o.assign is not None and any(tp.topic == topic for tp in o.assign)
