"""``message.timestamp.type=LogAppendTime`` through the public clients against the shared
3-broker cluster: every reader sees the leader's append time, not the producer's
CreateTime (the leader stamps only the frame's header; the stored records keep the
producer's timestamps)."""
from __future__ import annotations

import time

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from jobs.tier import consumer_reader, tier_topic
from spark_log import Admin, Consumer, Producer
from spark_log.tier import TierTable
from tests.support.tiering import TIERED, wait_local_start
from tests.support.wait import wait_until

pytestmark = pytest.mark.integration

OLD = 1_000_000_000_000  # 2001-09-09: the producer's CreateTime


def _append(bootstrap: str, topic: str, values: list[bytes]) -> tuple[int, int]:
    """Create a LogAppendTime topic, send ``values`` with an old CreateTime; the wall-clock
    window (ms) the append happened in."""
    with Admin(bootstrap) as admin:
        admin.create_topic(topic, partitions=1, replication_factor=3, config={"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    with Producer(bootstrap) as producer:
        for value in values:
            producer.send(topic, value, partition=0, timestamp=OLD)
        producer.flush()
    return before, int(time.time() * 1000)


def test_a_consumer_sees_the_append_time(bootstrap: str, topic_name: str) -> None:
    before, after = _append(bootstrap, topic_name, [b"a", b"b"])
    with Consumer(bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([(topic_name, 0)])
        got: list = []
        wait_until(lambda: got.extend(consumer.poll(0.2)) or len(got) >= 2, timeout=30, message="nothing consumed")
    assert all(before <= r.timestamp <= after for r in got), ([r.timestamp for r in got], before, after)


def _high_watermark(bootstrap: str, topic: str) -> int:
    with Admin(bootstrap) as admin:
        return admin.list_offsets(topic, "latest")[0]


def test_list_offsets_by_timestamp_searches_the_append_time(bootstrap: str, topic_name: str) -> None:
    before, after = _append(bootstrap, topic_name, [b"a", b"b", b"c"])
    with Admin(bootstrap) as admin:
        assert admin.list_offsets(topic_name, before - 1000) == {0: 0}    # the producer's CreateTime is far older
        assert admin.list_offsets(topic_name, after + 60_000) == {0: 3}   # none that recent: the high watermark
        assert admin.list_offsets(topic_name, OLD) == {0: 0}


def test_a_filtered_projected_fetch_sees_the_append_time(bootstrap: str, topic_name: str) -> None:
    """The brokers' pushdown (a Consumer with ``columns`` and ``row_filter``): the timestamps it
    answers and the predicate on ``timestamp`` are the append time's."""
    before, after = _append(bootstrap, topic_name, [b"a", b"b"])
    end = _high_watermark(bootstrap, topic_name)
    recent = pc.field("timestamp") >= pa.scalar(before, pa.timestamp("ms"))
    with Consumer(bootstrap, auto_offset_reset="none", columns=["value", "timestamp"], row_filter=recent) as consumer:
        consumer.assign([(topic_name, 0)])
        consumer.seek(topic_name, 0, 0, end=end)
        batches: list[pa.RecordBatch] = []
        wait_until(lambda: batches.extend(consumer.poll_arrow(0.2)) or consumer.position(topic_name, 0) >= end,
                   timeout=30, message="the range was never read")
    rows = pa.Table.from_batches(batches) if batches else pa.table({"value": [], "timestamp": []})
    assert rows.column("value").to_pylist() == [b"a", b"b"], rows
    stamps = rows.column("timestamp").cast(pa.int64()).to_pylist()
    assert all(before <= s <= after for s in stamps), (stamps, before, after)


def test_tiered_rows_carry_the_append_time(bootstrap: str, topic_name: str) -> None:
    """Tiering to Delta (the job's Consumer reader) writes the append time, and a union read
    serves it from the tier once the brokers deleted the tiered segments."""
    with Admin(bootstrap) as admin:
        admin.create_topic(topic_name, partitions=1, replication_factor=3,
                           config={**TIERED, "message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    with Producer(bootstrap, linger_ms=1, batch_size=600) as producer:
        futures = [producer.send(topic_name, b"v%03d" % i + b"x" * 40, partition=0, timestamp=OLD) for i in range(60)]
        for future in futures:
            future.result(timeout=60)
    after = int(time.time() * 1000)
    with Admin(bootstrap) as admin:
        tiered = tier_topic(admin, topic_name, reader=consumer_reader(bootstrap)).tiered
        location = admin.describe_tier(topic_name).location
    assert tiered and tiered[0][1] > 0, tiered
    table = TierTable(location, topic_name).load().to_pyarrow_table(columns=["offset", "timestamp"])
    stamps = table.column("timestamp").cast(pa.timestamp("ms")).cast(pa.int64()).to_pylist()
    assert len(stamps) == tiered[0][1] and all(before <= s <= after for s in stamps), (stamps, before, after)
    wait_local_start(bootstrap, topic_name, 0, 1)   # the first records are now served by the tier
    end = _high_watermark(bootstrap, topic_name)
    with Consumer(bootstrap, auto_offset_reset="none") as consumer:
        consumer.assign([(topic_name, 0)])
        consumer.seek(topic_name, 0, 0, end=end)
        got: list = []
        wait_until(lambda: got.extend(consumer.poll(0.2)) or consumer.position(topic_name, 0) >= end,
                   timeout=60, message="the union read never reached the end")
    assert [r.offset for r in got] == list(range(60))   # (the brokers' TIERED control frame: offset 60)
    assert all(before <= r.timestamp <= after for r in got), ([r.timestamp for r in got], before, after)
