"""How the producer reacts to a broker's answers and to failures on the way to the wire
(unit, ``tests/support/fake_produce.py``: no broker)."""
from __future__ import annotations

import pyarrow as pa
import pytest

from spark_log.errors import ErrorCode
from tests.support.fake_produce import FakeCluster, answer_all, bytes_topic, fake_producer


def test_duplicate_sequence_is_an_acknowledgement_with_an_unknown_offset(monkeypatch: pytest.MonkeyPatch) -> None:
    """The broker answers DUPLICATE_SEQUENCE to a replay of a frame it appended long ago (its
    offsets evicted from the producer state): the records are in the log, so the send
    succeeds with offset -1, as in Kafka's Sender, and the producer keeps its id."""
    cluster = FakeCluster({"t": bytes_topic()}, auto=answer_all(ErrorCode.DUPLICATE_SEQUENCE))
    p = fake_producer(monkeypatch, cluster, linger_ms=0)
    pid = p.producer_id
    try:
        assert p.send("t", b"v").result(timeout=10) == (0, -1)
        assert [f.result(timeout=10) for f in p.send_batch("t", _table(3), partition=0)] == [(0, -1)]
        p.flush(10)
        assert p.producer_id == pid
        assert p.metrics()["records_failed"] == 0
    finally:
        p.close(5)


def _table(n: int) -> pa.Table:
    return pa.table({"value": pa.array([b"x"] * n, pa.binary())})
