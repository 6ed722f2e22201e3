"""Produce/consume round trips through real brokers: bytes and typed topics, ordering."""
from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from spark_log import Admin, Consumer, Producer, bytes_message
from spark_log._partitioner import partition_for_key, partitions_for_keys
from spark_log._producer import COMPRESS_MIN_BYTES
from spark_log.frame import Codec

pytestmark = pytest.mark.integration


def _drain(consumer: Consumer, expected: int, *, rounds: int = 60) -> list[pa.RecordBatch]:
    """Poll until ``expected`` rows arrived (each poll is a bounded long poll, not a sleep)."""
    batches: list[pa.RecordBatch] = []
    for _ in range(rounds):
        batches.extend(consumer.poll_arrow(0.5))
        if sum(b.num_rows for b in batches) >= expected:
            break
    return batches


def test_bytes_round_trip_keys_headers_timestamps(bootstrap: str, topic_name: str) -> None:
    with Admin(bootstrap) as admin:
        admin.create_topic(topic_name, partitions=3)
    sent = []
    with Producer(bootstrap, linger_ms=1) as producer:
        futures = []
        for i in range(300):
            key = f"user-{i % 7}".encode() if i % 10 else None
            headers = {"trace": f"t{i}"} if i % 3 == 0 else None
            futures.append(producer.send(topic_name, f"value-{i}".encode(), key=key, headers=headers,
                                         timestamp=1_700_000_000_000 + i))
            sent.append((key, f"value-{i}".encode(), headers, 1_700_000_000_000 + i))
        producer.flush()
        acks = [f.result(timeout=30) for f in futures]
    with Consumer(bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([(topic_name, p) for p in range(3)])
        records = []
        for _ in range(60):
            records.extend(consumer.poll(0.5))
            if len(records) >= 300:
                break
    assert len(records) == 300
    by_position = {(r.partition, r.offset): r for r in records}
    for (key, value, headers, ts), (partition, offset) in zip(sent, acks):
        record = by_position[(partition, offset)]
        assert (record.key, record.value, record.timestamp) == (key, value, ts)
        assert record.headers == ([("trace", headers["trace"].encode())] if headers else [])
        if key is not None:
            assert partition == partition_for_key(key, 3)


def test_small_batches_written_directly_round_trip(bootstrap: str, topic_name: str,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Batches without headers go out through ``bytes_message`` (counted here, with the codec
    each got: under ``COMPRESS_MIN_BYTES`` of records uncompressed whatever the producer's
    compression, else its compression), and what a consumer reads back is what was sent:
    keys (absent ones too), values (null, empty and large ones), timestamps, offsets."""
    codecs: list[tuple[str, Codec, int]] = []
    encode = bytes_message.encode

    def counting(keys: Any, values: Any, timestamps: Any, codec: Codec) -> bytes | None:
        message = encode(keys, values, timestamps, codec)
        codecs.append(("direct" if message is not None else "declined", codec, len(values)))
        return message

    monkeypatch.setattr(bytes_message, "encode", counting)
    with Admin(bootstrap) as admin:
        admin.create_topic(topic_name, partitions=1)
    small = [(f"k{i % 5}".encode() if i % 4 else None, None if i % 9 == 0 else (b"" if i % 7 == 0 else f"v{i}".encode()),
              1_700_000_000_000 + i) for i in range(60)]
    large = [(b"big", bytes([i]) * (COMPRESS_MIN_BYTES + i), 1_700_000_001_000 + i) for i in range(4)]
    sent = []
    for compression, records in (("none", small), ("lz4", small), ("lz4", large)):
        with Producer(bootstrap, compression=compression) as producer:
            for key, value, ts in records:  # one at a time: each record is its own batch
                assert producer.send(topic_name, value, key=key, timestamp=ts, partition=0).result(timeout=30) == \
                    (0, len(sent))
                sent.append((key, value, ts))
    assert [c for c in codecs if c[0] == "declined"] == [] and all(n == 1 for _, _, n in codecs)
    assert [codec for _, codec, _ in codecs] == [Codec.NONE] * 120 + [Codec.LZ4] * 4
    with Consumer(bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([(topic_name, 0)])
        batches = _drain(consumer, len(sent))
    got = [row for b in batches for row in zip(b.column("key").to_pylist(), b.column("value").to_pylist(),
                                               b.column("timestamp").cast(pa.int64()).to_pylist(),
                                               b.column("offset").to_pylist())]
    assert got == [(key, value, ts, offset) for offset, (key, value, ts) in enumerate(sent)]
    assert all(b.column("headers").null_count == b.num_rows for b in batches)


def test_order_per_partition_and_per_key(bootstrap: str, topic_name: str) -> None:
    with Admin(bootstrap) as admin:
        admin.create_topic(topic_name, partitions=4)
    with Producer(bootstrap, linger_ms=0, batch_size=200) as producer:
        futures = [producer.send(topic_name, str(i).encode(), key=f"k{i % 5}") for i in range(1000)]
        producer.flush()
        acks = [f.result(timeout=30) for f in futures]
    # acknowledged offsets grow in send order within each partition
    last: dict[int, int] = {}
    for partition, offset in acks:
        assert offset > last.get(partition, -1)
        last[partition] = offset
    with Consumer(bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([(topic_name, p) for p in range(4)])
        batches = _drain(consumer, 1000)
    seen: dict[bytes, list[int]] = {}
    for batch in batches:
        offsets = batch.column("offset").to_pylist()
        assert offsets == sorted(offsets)
        for key, value in zip(batch.column("key").to_pylist(), batch.column("value").to_pylist()):
            seen.setdefault(key, []).append(int(value))
    assert sum(len(v) for v in seen.values()) == 1000
    for values in seen.values():  # per key, consumption order is send order
        assert values == sorted(values)


def test_send_batch_routes_by_key_and_partition_column(bootstrap: str, topic_name: str) -> None:
    with Admin(bootstrap) as admin:
        admin.create_topic(topic_name, partitions=3)
    keys = pa.array([f"key-{i % 11}".encode() for i in range(3000)])
    table = pa.table({"key": keys, "value": pa.array([b"x" * 100] * 3000)})
    with Producer(bootstrap) as producer:
        acks = [f.result(timeout=30) for f in producer.send_batch(topic_name, table)]
        pinned = [f.result(timeout=30) for f in producer.send_batch(
            topic_name, pa.table({"value": [b"a", b"b"], "partition": pa.array([2, 2], pa.int32())}))]
    assert {p for p, _ in pinned} == {2}
    expected = np.bincount(partitions_for_keys(keys, 3), minlength=3)
    with Consumer(bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([(topic_name, p) for p in range(3)])
        batches = _drain(consumer, 3002)
    counts = np.zeros(3, dtype=int)
    for batch in batches:
        partition = batch.column("partition")[0].as_py()
        keys_here = [k for k in batch.column("key").to_pylist() if k is not None and k.startswith(b"key-")]
        counts[partition] += len(keys_here)
        assert all(partition_for_key(k, 3) == partition for k in keys_here)
    assert counts.tolist() == expected.tolist()
    assert len(acks) >= 3


def test_typed_topic_round_trip_with_nulls_and_nested(bootstrap: str, topic_name: str) -> None:
    schema = pa.schema([
        pa.field("user", pa.string(), nullable=False),
        pa.field("amount", pa.float64()),
        pa.field("tags", pa.list_(pa.string())),
        pa.field("at", pa.timestamp("us")),
    ])
    with Admin(bootstrap) as admin:
        created = admin.create_topic(topic_name, partitions=2, schema=schema, key_columns=["user"])
        assert created.kind == "typed" and created.schema.equals(schema)
    rows = 500
    table = pa.table({
        "user": [f"u{i % 13}" for i in range(rows)],
        "amount": [None if i % 9 == 0 else i * 1.5 for i in range(rows)],
        "tags": [None if i % 4 == 0 else [f"t{i}", "x"] for i in range(rows)],
        "at": pa.array([1_700_000_000_000_000 + i for i in range(rows)], pa.timestamp("us")),
    }, schema=schema)
    with Producer(bootstrap) as producer:
        [f.result(timeout=30) for f in producer.send_batch(topic_name, table)]
        row_ack = producer.send(topic_name, {"user": "solo", "amount": 1.0, "tags": ["a"], "at": None}).result(timeout=30)
    with Consumer(bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([(topic_name, 0), (topic_name, 1)])
        batches = _drain(consumer, rows + 1)
    got = pa.Table.from_batches(batches)
    assert set(got.column_names) == {"user", "amount", "tags", "at", "timestamp", "topic", "partition", "offset"}
    assert got.num_rows == rows + 1
    data = got.select(schema.names).sort_by([("at", "ascending")])
    original = pa.concat_tables([table, pa.table({"user": ["solo"], "amount": [1.0], "tags": [["a"]],
                                                   "at": pa.array([None], pa.timestamp("us"))}, schema=schema)])
    assert data.sort_by("user").equals(original.sort_by("user")) or sorted(data.to_pylist(), key=repr) == sorted(
        original.to_pylist(), key=repr)
    assert row_ack[1] >= 0


def test_delete_and_recreate_starts_empty(bootstrap: str, topic_name: str) -> None:
    with Admin(bootstrap) as admin:
        admin.create_topic(topic_name, partitions=2)
        with Producer(bootstrap) as producer:
            for i in range(20):
                producer.send(topic_name, f"old-{i}".encode())
            producer.flush()
        assert sum(admin.list_offsets(topic_name, "latest").values()) == 20
        admin.delete_topic(topic_name)
        assert topic_name not in admin.list_topics()
        admin.create_topic(topic_name, partitions=2)
        assert admin.list_offsets(topic_name, "latest") == {0: 0, 1: 0}
    with Producer(bootstrap) as producer:
        producer.send(topic_name, b"new", partition=1).result(timeout=30)
    with Consumer(bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([(topic_name, 0), (topic_name, 1)])
        records = []
        for _ in range(20):
            records += consumer.poll(0.3)
            if records:
                break
    assert [(r.partition, r.offset, r.value) for r in records] == [(1, 0, b"new")]
