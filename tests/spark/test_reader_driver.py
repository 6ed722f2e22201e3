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
from connectors.plan import RangePartition
from connectors.reader import SparkLogBatchReader, SparkLogStreamReader, read_range
from connectors.source import build_plan
from spark_log import Producer
from spark_log.errors import InvalidConfigError, OffsetOutOfRangeError


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


def test_a_deleted_subscribed_topic_is_skipped_with_fail_on_data_loss_false(
        log_cluster: Any, admin: Any, topic_name: Callable[[], str]) -> None:
    """failOnDataLoss=false "skips what is gone and goes on": the other subscribed topic keeps
    flowing; with true the next trigger fails with the data-loss error.  The same after a
    restart, whose load() builds a new plan once the topic is gone."""
    keep, gone = topic_name(), topic_name()
    for topic in (keep, gone):
        admin.create_topic(topic, partitions=1)
        _fill(log_cluster, topic, 3)

    def reader(fail: str) -> SparkLogStreamReader:
        return SparkLogStreamReader(_plan(log_cluster, subscribe=f"{keep},{gone}", startingOffsets="earliest",
                                          failOnDataLoss=fail))

    readers = {fail: reader(fail) for fail in ("true", "false")}
    try:
        firsts = {fail: r.latestOffset(r.initialOffset(), ReadAllAvailable()) for fail, r in readers.items()}
        admin.delete_topic(gone)
        _fill(log_cluster, keep, 2)
        readers |= {f"{fail} restarted": reader(fail) for fail in ("true", "false")}
        for fail in ("false", "false restarted"):
            assert readers[fail].latestOffset(firsts["false"], ReadAllAvailable()) == {keep: {"0": 5}}
        for fail in ("true", "true restarted"):
            with pytest.raises(OffsetOutOfRangeError, match=f"data loss: {gone}-0 no longer exists"):
                readers[fail].latestOffset(firsts["true"], ReadAllAvailable())
    finally:
        for r in readers.values():
            r.stop()


def test_a_planned_range_of_a_deleted_topic_is_skipped_with_fail_on_data_loss_false(
        log_cluster: Any, admin: Any, topic_name: Callable[[], str]) -> None:
    """A micro-batch planned (or replayed from the offset log) before its topic was deleted:
    with failOnDataLoss=false its task reads nothing instead of failing the query."""
    topic = topic_name()
    admin.create_topic(topic, partitions=1)
    _fill(log_cluster, topic, 5)
    plans = {fail: _plan(log_cluster, subscribe=topic, failOnDataLoss=fail, pollTimeoutMs="60000")
             for fail in ("true", "false")}
    admin.delete_topic(topic)
    assert list(read_range(plans["false"], RangePartition(topic, 0, 2, 5))) == []
    with pytest.raises(OffsetOutOfRangeError, match=f"data loss: {topic}-0"):
        list(read_range(plans["true"], RangePartition(topic, 0, 2, 5)))
