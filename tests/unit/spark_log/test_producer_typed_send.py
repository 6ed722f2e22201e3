"""``send`` to a typed topic: headers, the key hash and timestamps (unit,
``tests/support/fake_produce.py``: no broker)."""
from __future__ import annotations

import pyarrow as pa
import pytest

from spark_log import errors
from spark_log._partitioner import key_array, partitions_for_keys
from spark_log.clock import ManualClock
from tests.support.fake_produce import FakeCluster, fake_producer, ok, typed_topic

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])


def test_headers_are_refused_on_a_typed_topic(monkeypatch: pytest.MonkeyPatch) -> None:
    """A typed frame holds only the schema's columns: headers given to ``send`` would be
    dropped, so they are refused, naming why; nothing is sent."""
    cluster = FakeCluster({"typed": typed_topic("typed", SCHEMA)}, auto=ok)
    p = fake_producer(monkeypatch, cluster, linger_ms=0)
    try:
        with pytest.raises(errors.InvalidRequestError, match="headers"):
            p.send("typed", {"id": 1, "name": "a"}, headers={"trace": b"x"})
        with pytest.raises(errors.InvalidRequestError, match="headers"):
            p.send("typed", {"id": 1, "name": "a"}, headers=[("trace", "x")])
        p.flush(5)
        assert cluster.frames() == []
        p.send("typed", {"id": 1, "name": "a"}, headers={}).result(timeout=10)  # no headers: nothing to drop
    finally:
        p.close(5)


@pytest.mark.parametrize("typ,value", [(pa.binary(), b"\x00\x01key"), (pa.bool_(), True), (pa.float64(), 3.0),
                                       (pa.string(), "user-1"), (pa.int64(), 42)])
def test_send_routes_a_key_as_send_batch_and_the_sink_do(monkeypatch: pytest.MonkeyPatch, typ: pa.DataType,
                                                         value: object) -> None:
    """``send``, ``send_batch`` and the Spark sink (``key_array``) hash a typed row's key
    columns the same way (Arrow's cast to text), so one key lands in one partition."""
    schema = pa.schema([("k", typ), ("k2", pa.int32()), ("v", pa.int64())])
    n = 64
    cluster = FakeCluster({"typed": typed_topic("typed", schema, partitions=n, key_columns=("k", "k2"))}, auto=ok)
    p = fake_producer(monkeypatch, cluster, linger_ms=0)
    try:
        for k2 in (7, None):
            row = {"k": value, "k2": k2, "v": 1}
            part_send, _ = p.send("typed", row).result(timeout=10)
            table = pa.Table.from_pylist([row], schema=schema)
            [f] = p.send_batch("typed", table)
            part_batch, _ = f.result(timeout=10)
            keys, _ = key_array(table, ["k", "k2"])
            part_sink = int(partitions_for_keys(keys, n)[0])
            assert part_send == part_batch == part_sink, (
                f"key {value!r} ({typ}), {k2}: send() -> {part_send}, send_batch() -> {part_batch}, sink -> {part_sink}")
    finally:
        p.close(5)


def test_send_keeps_the_given_timestamp(monkeypatch: pytest.MonkeyPatch) -> None:
    """A typed frame has no timestamp column: readers give every row the header's
    ``first_timestamp``.  So a typed batch holds rows of one timestamp (a row with another
    starts the next batch) and its frame carries it."""
    cluster = FakeCluster({"typed": typed_topic("typed", SCHEMA)}, auto=ok)
    p = fake_producer(monkeypatch, cluster, linger_ms=60_000)  # only flush ships: batches as send() cut them
    try:
        stamps = [1_000, 1_000, 2_000, 1_000]
        futures = [p.send("typed", {"id": i, "name": "a"}, timestamp=ts) for i, ts in enumerate(stamps)]
        p.flush(10)
        assert [f.exception(timeout=10) for f in futures] == [None] * 4
        got = [(h.record_count, h.first_timestamp, h.max_timestamp) for _, _, h in cluster.frames()]
        assert got == [(2, 1_000, 1_000), (1, 2_000, 2_000), (1, 1_000, 1_000)]
    finally:
        p.close(5)


def test_send_without_a_timestamp_stamps_the_send_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """A row sent without a timestamp has the time of ``send``, not the later time its batch
    ships."""
    clock = ManualClock(wall_ms=5_000)
    cluster = FakeCluster({"typed": typed_topic("typed", SCHEMA)}, auto=ok)
    p = fake_producer(monkeypatch, cluster, linger_ms=60_000, clock=clock)
    try:
        future = p.send("typed", {"id": 1, "name": "a"})
        clock.advance(250)
        p.flush(10)
        future.result(timeout=10)
        assert [h.first_timestamp for _, _, h in cluster.frames()] == [5_000]
    finally:
        p.close(5)
