"""The readers' driver and executor sides against the test cluster's brokers, without a
Spark session: offset planning (``SparkLogBatchReader.partitions``,
``SparkLogStreamReader.latestOffset``) and ``read_range``."""
from __future__ import annotations

import pickle
import re
from typing import Any, Callable

import pyarrow as pa
import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable

from connectors.options import ReaderOptions
from connectors.reader import SparkLogBatchReader, SparkLogStreamReader
from connectors.source import build_plan
from spark_log import Producer
from spark_log.errors import InvalidConfigError


def _fill(log_cluster: Any, topic: str, n: int) -> None:
    with Producer(log_cluster.bootstrap, linger_ms=0) as producer:
        values = pa.array([f"v{i}".encode() for i in range(n)], pa.binary())
        producer.send_batch(topic, pa.table({"value": values}), partition=0)
        producer.flush()


def _plan(log_cluster: Any, **options: str) -> Any:
    return build_plan(ReaderOptions.parse({"bootstrap": log_cluster.bootstrap, **options}))


def test_batch_starting_offsets_after_ending_offsets_is_refused(
        log_cluster: Any, admin: Any, topic_name: Callable[[], str]) -> None:
    """Kafka's source refuses a range whose start is after its end; this one read nothing."""
    topic = topic_name()
    admin.create_topic(topic, partitions=1)
    _fill(log_cluster, topic, 10)
    plan = _plan(log_cluster, subscribe=topic, startingOffsets=f'{{"{topic}": {{"0": 8}}}}',
                 endingOffsets=f'{{"{topic}": {{"0": 3}}}}')
    with pytest.raises(InvalidConfigError, match=f"'startingOffsets'.*{topic}-0 starts at 8 > 3"):
        SparkLogBatchReader(plan).partitions()


def test_a_topic_found_by_pattern_mid_query_keeps_its_timestamp_type_on_executors(
        log_cluster: Any, admin: Any, topic_name: Callable[[], str]) -> None:
    """Executors hold the reader pickled at query start; a LogAppendTime topic that
    subscribePattern finds later must still read with timestampType 1 (each range carries it)."""
    first, second = topic_name(), topic_name()
    admin.create_topic(first, partitions=1)
    _fill(log_cluster, first, 2)
    plan = _plan(log_cluster, subscribePattern=re.escape(first.rsplit("-", 1)[0]) + "-[0-9]+",
                 startingOffsets="earliest")
    reader = SparkLogStreamReader(plan)
    executor = pickle.loads(pickle.dumps(reader))  # what Spark ships to the executors at start
    try:
        start = reader.initialOffset()
        admin.create_topic(second, partitions=1, config={"message.timestamp.type": "LogAppendTime"})
        _fill(log_cluster, second, 3)
        end = reader.latestOffset(start, ReadAllAvailable())
        rows: list[tuple[str, int]] = []
        for part in reader.partitions(start, end):
            for batch in executor.read(pickle.loads(pickle.dumps(part))):
                rows += zip(batch.column("topic").to_pylist(), batch.column("timestampType").to_pylist())
    finally:
        reader.stop()
    assert sorted(rows) == sorted([(first, 0)] * 2 + [(second, 1)] * 3)
