"""Fetch: projection and row-filter pushdown, list offsets by timestamp, seeks, long polls."""
from __future__ import annotations

import threading
import time

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from spark_log import Admin, Consumer, Producer, errors
from tests.support.wait import wait_until

pytestmark = pytest.mark.integration

SCHEMA = pa.schema([
    pa.field("id", pa.int64(), nullable=False),
    pa.field("country", pa.string()),
    pa.field("amount", pa.float64()),
    pa.field("note", pa.string()),
])


def _typed_topic(bootstrap: str, name: str, rows: int = 2000) -> pa.Table:
    table = pa.table({
        "id": pa.array(range(rows), pa.int64()),
        "country": [["fr", "de", "us", None][i % 4] for i in range(rows)],
        "amount": [float(i % 100) for i in range(rows)],
        "note": ["n" * 50] * rows,
    }, schema=SCHEMA)
    with Admin(bootstrap) as admin:
        admin.create_topic(name, partitions=2, schema=SCHEMA, key_columns=["id"])
    with Producer(bootstrap) as producer:
        for future in producer.send_batch(name, table):
            future.result(timeout=30)
    return table


def _read_all(consumer: Consumer, topic: str, expected: int | None = None, rounds: int = 30) -> pa.Table:
    consumer.assign([(topic, 0), (topic, 1)])
    batches: list[pa.RecordBatch] = []
    for _ in range(rounds):
        got = consumer.poll_arrow(0.3)
        batches.extend(got)
        done = consumer.position(topic, 0) + consumer.position(topic, 1)
        if expected is not None and done >= expected and not got:
            break
    return pa.Table.from_batches(batches) if batches else pa.table({})


def test_projection_and_filter_pushdown(bootstrap: str, topic_name: str) -> None:
    table = _typed_topic(bootstrap, topic_name)
    wanted = table.filter((pc.field("country") == "fr") & (pc.field("amount") >= 50))
    with Consumer(bootstrap, auto_offset_reset="earliest", columns=["id", "amount"],
                  row_filter=(pc.field("country") == "fr") & (pc.field("amount") >= 50)) as consumer:
        got = _read_all(consumer, topic_name, expected=2000)
    assert set(got.column_names) == {"id", "amount", "timestamp", "topic", "partition", "offset"}
    assert sorted(got.column("id").to_pylist()) == sorted(wanted.column("id").to_pylist())
    # the DNF form pyarrow.parquet takes works too, and filters may use offset/partition
    with Consumer(bootstrap, auto_offset_reset="earliest", columns=["id"],
                  row_filter=[("partition", "=", 1), ("offset", "<", 10)]) as consumer:
        got = _read_all(consumer, topic_name, expected=2000)
    assert got.num_rows == 10 and set(got.column("partition").to_pylist()) == {1}
    assert sorted(got.column("offset").to_pylist()) == list(range(10))


def test_projection_moves_fewer_bytes(bootstrap: str, topic_name: str) -> None:
    _typed_topic(bootstrap, topic_name)
    with Consumer(bootstrap, auto_offset_reset="earliest") as consumer:
        full = _read_all(consumer, topic_name, expected=2000)
    with Consumer(bootstrap, auto_offset_reset="earliest", columns=["id"]) as consumer:
        narrow = _read_all(consumer, topic_name, expected=2000)
    assert full.num_rows == narrow.num_rows == 2000
    assert "note" not in narrow.column_names
    assert narrow.select(["id"]).nbytes * 5 < full.select(SCHEMA.names).nbytes


def test_bytes_topic_filter_on_key(bootstrap: str, topic_name: str) -> None:
    with Admin(bootstrap) as admin:
        admin.create_topic(topic_name, partitions=1)
    with Producer(bootstrap) as producer:
        for i in range(100):
            producer.send(topic_name, f"v{i}".encode(), key=b"keep" if i % 10 == 0 else b"drop", partition=0)
        producer.flush()
    with Consumer(bootstrap, auto_offset_reset="earliest", columns=["value"],
                  row_filter=pc.field("key") == b"keep") as consumer:
        consumer.assign([(topic_name, 0)])
        records = []
        for _ in range(20):
            records += consumer.poll(0.3)
            if consumer.position(topic_name, 0) >= 100 and len(records) >= 10:
                break
    assert [r.value for r in records] == [f"v{i}".encode() for i in range(0, 100, 10)]
    assert [r.offset for r in records] == list(range(0, 100, 10))


def test_list_offsets_by_timestamp_and_seek(bootstrap: str, topic_name: str) -> None:
    base = 1_800_000_000_000
    with Admin(bootstrap) as admin:
        admin.create_topic(topic_name, partitions=1)
    with Producer(bootstrap, linger_ms=0) as producer:
        for i in range(50):
            producer.send(topic_name, f"v{i}".encode(), partition=0, timestamp=base + 10 * i)
            if i % 7 == 0:
                producer.flush()  # several frames
        producer.flush()
    with Admin(bootstrap) as admin:
        assert admin.list_offsets(topic_name, "earliest") == {0: 0}
        assert admin.list_offsets(topic_name, "latest") == {0: 50}
        assert admin.list_offsets(topic_name, base + 10 * 23) == {0: 23}
        assert admin.list_offsets(topic_name, base + 10 * 23 + 1) == {0: 24}
        assert admin.list_offsets(topic_name, base - 1) == {0: 0}
        assert admin.list_offsets(topic_name, base + 10_000) == {0: 50}
    with Consumer(bootstrap) as consumer:
        consumer.assign([(topic_name, 0)])
        assert consumer.position(topic_name, 0) == 50  # auto_offset_reset="latest"
        consumer.seek(topic_name, 0, 45)
        records = []
        for _ in range(10):
            records += consumer.poll(0.3)
            if len(records) >= 5:
                break
        assert [r.offset for r in records] == [45, 46, 47, 48, 49]
        consumer.seek_to_beginning()
        assert consumer.position(topic_name, 0) == 0


def test_long_poll_returns_when_data_arrives(bootstrap: str, topic_name: str) -> None:
    with Admin(bootstrap) as admin:
        admin.create_topic(topic_name, partitions=1)
    with Consumer(bootstrap) as consumer, Producer(bootstrap, linger_ms=0) as producer:
        consumer.assign([(topic_name, 0)])
        consumer.position(topic_name, 0)
        assert consumer.poll(0.2) == []  # nothing yet: the poll waited and came back empty
        timer = threading.Timer(0.3, lambda: producer.send(topic_name, b"late", partition=0))
        timer.start()
        started = time.monotonic()
        records = []
        while not records and time.monotonic() - started < 20:
            records = consumer.poll(10.0)
        timer.join()
        assert [r.value for r in records] == [b"late"]
        assert time.monotonic() - started < 8  # woken by the append, not by the 10 s timeout


def test_an_empty_prefetch_does_not_end_a_poll_before_its_timeout(bootstrap: str, topic_name: str) -> None:
    """A poll returns records that are there within its timeout, even when the first answer
    it takes is an empty prefetch left by the previous poll (that answer waited out
    ``fetch_max_wait_ms`` before the records came).  Such a poll used to return nothing at
    once, and a reader that took an empty poll for "no records" stopped early
    (tests/integration/test_typed_topic_without_schema.py failed so on a loaded machine)."""
    with Admin(bootstrap) as admin:
        admin.create_topic(topic_name, partitions=1)
    with Consumer(bootstrap, auto_offset_reset="earliest", fetch_max_wait_ms=50) as consumer, \
            Producer(bootstrap, linger_ms=0) as producer:
        consumer.assign([(topic_name, 0)])
        assert consumer.poll(0.2) == []  # takes the answer and leaves a prefetch of 50 ms out
        wait_until(lambda: not consumer._done.empty(), timeout=30,  # noqa: SLF001 - the state this test is about
                   message="the prefetch never answered")
        producer.send(topic_name, b"there", partition=0).result(timeout=30)
        started = time.monotonic()
        records = consumer.poll(30.0)
        assert [r.value for r in records] == [b"there"]
        assert time.monotonic() - started < 20  # woken by the records, not by the 30 s timeout


def test_seek_out_of_range(bootstrap: str, topic_name: str) -> None:
    with Admin(bootstrap) as admin:
        admin.create_topic(topic_name, partitions=1)
    with Producer(bootstrap) as producer:
        producer.send(topic_name, b"x", partition=0).result(timeout=30)
    with Consumer(bootstrap, auto_offset_reset="none") as consumer:
        consumer.assign([(topic_name, 0)])
        consumer.seek(topic_name, 0, 1000)
        with pytest.raises(errors.OffsetOutOfRangeError):
            for _ in range(10):
                consumer.poll(0.3)
    with Consumer(bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([(topic_name, 0)])
        consumer.seek(topic_name, 0, 1000)
        records = []
        for _ in range(10):
            records += consumer.poll(0.3)
            if records:
                break
        assert [r.value for r in records] == [b"x"]
