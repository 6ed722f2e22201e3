"""``PollBuffer`` (spark_log/_poll_buffer.py): max_poll_records cuts, paused partitions wait,
arrival order kept, positions of waiting records."""
from __future__ import annotations

import pyarrow as pa

from spark_log._poll_buffer import PollBuffer


def _batch(partition: int, start: int, n: int) -> tuple[tuple[str, int], pa.RecordBatch]:
    return ("t", partition), pa.record_batch({"offset": pa.array(range(start, start + n), pa.int64())})


def _offsets(batches: list[pa.RecordBatch]) -> list[int]:
    return [o for b in batches for o in b.column("offset").to_pylist() if o is not None]  # a non-null column


def test_limit_cuts_a_batch_and_keeps_its_tail_first() -> None:
    buffer = PollBuffer(3)
    buffer.add([_batch(0, 0, 2), _batch(1, 10, 4)])
    assert _offsets(buffer.take(set())) == [0, 1, 10]
    assert buffer.first_offset(("t", 1)) == 11 and buffer.first_offset(("t", 0)) is None
    assert _offsets(buffer.take(set())) == [11, 12, 13]
    assert buffer.take(set()) == []


def test_paused_partitions_wait_and_unlimited_takes_all() -> None:
    buffer = PollBuffer(None)
    buffer.add([_batch(0, 0, 2), _batch(1, 5, 2), _batch(0, 2, 1)])
    assert _offsets(buffer.take({("t", 0)})) == [5, 6]
    assert buffer.first_offset(("t", 0)) == 0
    assert _offsets(buffer.take(set())) == [0, 1, 2]


def test_drop_and_keep_only() -> None:
    buffer = PollBuffer(None)
    buffer.add([_batch(0, 0, 1), _batch(1, 0, 1), _batch(2, 0, 1)])
    buffer.drop([("t", 1)])
    buffer.keep_only({("t", 2)})
    assert [b.num_rows for b in buffer.take(set())] == [1] and buffer.first_offset(("t", 0)) is None
