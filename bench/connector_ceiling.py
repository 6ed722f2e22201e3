"""Ceiling peers for ``bench.connector_bench``: Python Data Sources that do no IO.

- ``bench-memory`` (source): yields, from memory, Arrow batches shaped exactly as the
  ``spark-log`` source's (Kafka-source columns of a bytes topic) with the same offsets,
  read limit (``maxOffsetsPerTrigger``), Trigger.AvailableNow support and one task per
  partition range.  What it reaches is what Spark's Python Data Source path itself
  allows: no reader of a topic through that path can be faster.
- ``bench-discard`` (sink): a ``DataSourceStreamArrowWriter`` that counts the Arrow
  batches Spark hands it and drops them: the ceiling of any Python Arrow sink.

Options of ``bench-memory``: ``rows`` (records per partition), ``partitions``,
``chunk`` (rows per yielded batch, as the frames a producer cut), ``maxOffsetsPerTrigger``.
The batches are built once per Python worker process (``_cached``), so after a warm-up
a read costs only slicing.  Bench-only code: not part of the product.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow
from pyspark.sql.types import StructType

from connectors import offsets as off
from connectors.schema_mapping import bytes_source_schema, spark_arrow_schema

__all__ = ["MemorySource", "DiscardSink", "keyvalue_batch"]

_CACHE: dict[tuple[int, int], pa.RecordBatch] = {}


def keyvalue_batch(start: int, stop: int) -> pa.RecordBatch:
    """Rows ``start..stop`` of the bench's bytes data: key ``key-%08d``, and a 100-byte value:
    the id as 10 zero-padded digits, then 90 random bytes (incompressible; see ``payload_ids``)."""
    import numpy as np

    ids = np.arange(start, stop)
    keys = np.char.add(b"key-", np.char.zfill(ids.astype("S8"), 8)).astype(object)
    noise = np.random.default_rng(start).integers(0, 256, size=(len(ids), 90), dtype=np.uint8)
    values = [b"%010d" % i + row.tobytes() for i, row in zip(ids.tolist(), noise)]
    return pa.RecordBatch.from_arrays([pa.array(keys, pa.binary()), pa.array(values, pa.binary())], names=["key", "value"])


def _cached(partition: int, rows: int, target: pa.Schema) -> pa.RecordBatch:
    """Partition ``partition``'s ``rows`` records, shaped to ``target`` (built once per process)."""
    key = (partition, rows)
    if key not in _CACHE:
        import numpy as np

        data = keyvalue_batch(partition * rows, (partition + 1) * rows)
        arrays = [
            data.column("key"),
            data.column("value"),
            pa.array(np.full(rows, "bench-memory", dtype=object), pa.string()),
            pa.array(np.full(rows, partition, dtype=np.int32)),
            pa.array(np.arange(rows, dtype=np.int64)),
            pa.array(np.full(rows, 1_700_000_000_000_000, dtype=np.int64)).cast(pa.timestamp("us", tz="UTC")),
            pa.array(np.zeros(rows, dtype=np.int32)),
        ]
        _CACHE[key] = pa.RecordBatch.from_arrays(arrays, schema=target)
    return _CACHE[key]


@dataclass(frozen=True)
class _Range(InputPartition):
    partition: int
    start: int
    end: int


class MemorySource(DataSource):
    """Format ``bench-memory`` (see the module docstring)."""

    @classmethod
    def name(cls) -> str:
        return "bench-memory"

    def schema(self) -> StructType:
        return bytes_source_schema(include_headers=False)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return _MemoryStreamReader(self.options, schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        return DiscardSink()


class _MemoryStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: dict[str, str], schema: StructType) -> None:
        self.rows = int(options["rows"])
        self.count = int(options.get("partitions", "2"))
        self.chunk = int(options.get("chunk", "20000"))
        self.max_rows = int(options["maxOffsetsPerTrigger"]) if "maxOffsetsPerTrigger" in options else None
        self.schema = schema

    def initialOffset(self) -> dict:
        return {str(p): 0 for p in range(self.count)}

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self.max_rows) if self.max_rows is not None else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        """Nothing to fix: the data never grows."""

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = {off.TopicPartition("m", int(p)): v for p, v in start.items()}
        latest = {off.TopicPartition("m", p): self.rows for p in range(self.count)}
        end = latest if not isinstance(limit, ReadMaxRows) else off.limit_rows(begin, latest, limit.max_rows)
        return {str(tp.partition): v for tp, v in end.items()}

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        return [_Range(int(p), int(start.get(p, 0)), int(v)) for p, v in sorted(end.items()) if v > start.get(p, 0)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, _Range)
        whole = _cached(partition.partition, self.rows, spark_arrow_schema(self.schema))
        for at in range(partition.start, partition.end, self.chunk):
            yield whole.slice(at, min(self.chunk, partition.end - at))

    def commit(self, end: dict) -> None:
        """Nothing to release."""


@dataclass
class _Count(WriterCommitMessage):
    rows: int


class DiscardSink(DataSourceStreamArrowWriter):
    """Counts and drops what Spark hands it, as Arrow batches (``bench-discard``)."""

    def write(self, iterator: Iterator[Any]) -> _Count:
        return _Count(sum(batch.num_rows for batch in iterator))

    def commit(self, messages: list[Any], batchId: int) -> None:
        """Nothing to make visible."""

    def abort(self, messages: list[Any], batchId: int) -> None:
        """Nothing to undo."""


class DiscardSource(MemorySource):
    """Format ``bench-discard``: the discarding sink (``writeStream.format("bench-discard")``)."""

    @classmethod
    def name(cls) -> str:
        return "bench-discard"
