"""client.read_range over an in-memory consumer: exact ranges, data loss, no progress."""
from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from connectors import client
from connectors.offsets import OffsetRange
from connectors.options import ReaderOptions
from spark_log.errors import OffsetOutOfRangeError, RequestTimeoutError, UnknownTopicOrPartitionError


class _Log:
    """One partition whose records ``[log_start, end)`` exist, served 4 per poll."""

    def __init__(self, log_start: int, end: int) -> None:
        self.log_start, self.end = log_start, end


def _consumer_class(log: _Log) -> Any:
    class Consumer:
        def __init__(self, *_: Any, **__: Any) -> None:
            self.pos = 0

        def assign(self, tps: Any) -> None:
            pass

        def seek(self, topic: str, partition: int, offset: int, *, end: int | None = None) -> None:
            assert end is None or end >= offset
            self.pos = offset

        def seek_to_beginning(self, tps: Any) -> None:
            self.pos = log.log_start

        def position(self, topic: str, partition: int) -> int:
            return self.pos

        def poll_arrow(self, timeout: float = 1.0) -> list[pa.RecordBatch]:
            if self.pos < log.log_start:
                raise OffsetOutOfRangeError("gone")
            frame_start = self.pos - self.pos % 4  # whole frames of 4 records, as brokers send
            offsets = list(range(frame_start, min(frame_start + 4, log.end)))
            self.pos = max(self.pos, offsets[-1] + 1) if offsets else self.pos
            return [pa.RecordBatch.from_pydict({"value": [b"x"] * len(offsets), "offset": pa.array(offsets, pa.int64())})] if offsets else []

        def close(self) -> None:
            pass

    return Consumer


def _offsets(monkeypatch: pytest.MonkeyPatch, log: _Log, r: OffsetRange, **options: str) -> list[int]:
    monkeypatch.setattr(client, "Consumer", _consumer_class(log))
    o = ReaderOptions.parse({"subscribe": "t", **options})
    return [x for b in client.read_range(o, r, columns=None) for x in b.column("offset").to_pylist()]


def test_exactly_the_range(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _offsets(monkeypatch, _Log(0, 100), OffsetRange("t", 0, 6, 13)) == list(range(6, 13))
    assert _offsets(monkeypatch, _Log(0, 100), OffsetRange("t", 0, 5, 5)) == []


def test_deleted_records_fail_the_read_unless_told_otherwise(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(OffsetOutOfRangeError, match=r"records \[2, 8\) were deleted.*failOnDataLoss"):
        _offsets(monkeypatch, _Log(8, 100), OffsetRange("t", 0, 2, 12))
    assert _offsets(monkeypatch, _Log(8, 100), OffsetRange("t", 0, 2, 12), failOnDataLoss="false") == list(range(8, 12))
    assert _offsets(monkeypatch, _Log(50, 100), OffsetRange("t", 0, 2, 12), failOnDataLoss="false") == []


def test_a_range_that_never_arrives_times_out(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(RequestTimeoutError, match="pollTimeoutMs"):
        _offsets(monkeypatch, _Log(0, 10), OffsetRange("t", 0, 8, 20), pollTimeoutMs="50")


def test_a_deleted_topic_is_data_loss(monkeypatch: pytest.MonkeyPatch) -> None:
    """A range planned (or replayed) before its topic was deleted: the consumer's assign finds
    no such topic; failOnDataLoss decides, as for records retention deleted."""
    class Gone(_consumer_class(_Log(0, 100))):  # type: ignore[misc]
        def assign(self, tps: Any) -> None:
            raise UnknownTopicOrPartitionError("topic 't' does not exist")

    monkeypatch.setattr(client, "Consumer", Gone)
    r = OffsetRange("t", 0, 2, 12)
    with pytest.raises(OffsetOutOfRangeError, match=r"t-0 no longer exists.*\[2, 12\).*failOnDataLoss"):
        list(client.read_range(ReaderOptions.parse({"subscribe": "t"}), r, columns=None))
    assert list(client.read_range(ReaderOptions.parse({"subscribe": "t", "failOnDataLoss": "false"}), r, columns=None)) == []
