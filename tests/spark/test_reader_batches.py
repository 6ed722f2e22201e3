"""The reader hands Spark few, large Arrow batches: small fetched frames are coalesced.

Runs ``connectors.reader.read_range`` (the body of the readers' ``read``) against the
real brokers of the test cluster, without a Spark session.
"""
from __future__ import annotations

from typing import Any, Callable

import pyarrow as pa

from connectors.options import ReaderOptions
from connectors.plan import RangePartition
from connectors.reader import COALESCE_ROWS, read_range
from connectors.schema_mapping import spark_arrow_schema
from connectors.source import build_plan


def _small_frames(log_cluster: Any, admin: Any, topic: str, frames: int, rows_per_frame: int) -> None:
    from spark_log import Producer

    admin.create_topic(topic, partitions=1)
    with Producer(log_cluster.bootstrap, linger_ms=0) as producer:
        for f in range(frames):
            values = [f"v{f * rows_per_frame + i}".encode() for i in range(rows_per_frame)]
            producer.send_batch(topic, pa.table({"value": pa.array(values, pa.binary())}), partition=0)
        producer.flush()


def test_small_frames_reach_spark_as_batches_of_at_least_the_coalescing_size(
    log_cluster: Any, admin: Any, topic_name: Callable[[], str]
) -> None:
    topic = topic_name()
    rows_per_frame, frames = 1000, 40  # 40 frames of 1,000 rows: 40,000 records
    _small_frames(log_cluster, admin, topic, frames, rows_per_frame)
    plan = build_plan(ReaderOptions.parse({"bootstrap": log_cluster.bootstrap, "subscribe": topic}))
    start, end = 500, 38_250  # starts and ends inside frames
    batches = list(read_range(plan, RangePartition(topic, 0, start, end)))

    assert all(b.schema.equals(spark_arrow_schema(plan.schema)) for b in batches)
    assert [b.num_rows >= COALESCE_ROWS for b in batches[:-1]] == [True] * (len(batches) - 1)
    assert len(batches) <= (end - start) // COALESCE_ROWS + 1
    offsets = pa.concat_arrays([b.column("offset") for b in batches]).to_pylist()
    assert offsets == list(range(start, end))
    values = pa.concat_arrays([b.column("value") for b in batches]).to_pylist()
    assert values == [f"v{i}".encode() for i in range(start, end)]
