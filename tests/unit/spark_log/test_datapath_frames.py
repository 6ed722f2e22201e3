"""The producer's frames carry the records and little else (issue 19's data path)."""
from __future__ import annotations

import os

import numpy as np
import pyarrow as pa

from spark_log._batching import cut_frames
from spark_log._records import bytes_batch, conform, null_column
from spark_log.frame import Codec, decode_batch, encode_batch
from spark_log.schemas import BYTES_SCHEMA, HEADERS_TYPE


def _values(rows: int) -> pa.Array:
    offsets = pa.py_buffer(np.arange(0, (rows + 1) * 100, 100, dtype=np.int32))
    return pa.Array.from_buffers(pa.binary(), rows, [None, offsets, pa.py_buffer(os.urandom(rows * 100))])


def test_frames_cut_from_a_large_table_do_not_carry_its_absent_headers() -> None:
    table = conform(pa.table({"value": _values(20_000)}), BYTES_SCHEMA, kind="bytes", now_ms=1)
    frames = cut_frames(table, 0, 128 * 1024)
    assert len(frames) > 5
    for batch, _ in frames:
        frame = encode_batch(batch, compression=Codec.NONE)
        # 100-byte value + 4 (value offsets) + 4 (key offsets) + 4 (headers offsets) + 8 (timestamp)
        assert len(frame) / batch.num_rows < 125, f"{len(frame) / batch.num_rows:.0f} bytes per record"
        decoded = decode_batch(frame, BYTES_SCHEMA)
        assert decoded.column("headers").null_count == batch.num_rows
        assert decoded.column("value").equals(batch.column("value"))


def test_null_column_is_all_null_and_valid() -> None:
    for n in (0, 1, 7):
        column = null_column(n, HEADERS_TYPE)
        column.validate(full=True)
        assert column.type == HEADERS_TYPE and column.null_count == n and column.to_pylist() == [None] * n
    assert null_column(3, pa.binary()).to_pylist() == [None] * 3


def test_bytes_batch_without_headers_is_small() -> None:
    values = [os.urandom(100) for _ in range(5_000)]
    batch = bytes_batch([None] * 5_000, values, [None] * 5_000, [1] * 5_000)
    assert len(encode_batch(batch, compression=Codec.NONE)) / 5_000 < 125


def test_frames_of_every_codec_decode_to_what_was_encoded() -> None:
    batch = bytes_batch([None, b"k"], [os.urandom(100), b"v" * 100], [None, [("h", b"x")]], [5, 3])
    for codec in Codec:
        frame = encode_batch(batch, compression=codec)
        assert decode_batch(frame, BYTES_SCHEMA, verify=True).equals(batch)


def test_group_futures_work_with_wait_as_completed_and_callbacks() -> None:
    import threading
    from concurrent.futures import as_completed, wait

    from spark_log._futures import FutureGroup

    group = FutureGroup()
    futures = [group.new() for _ in range(4)]
    called: list[object] = []
    futures[1].add_done_callback(lambda f: called.append(f.result()))
    assert not futures[0].done() and futures[0].running() and not futures[0].cancel()
    timer = threading.Timer(0.05, group.resolve, args=(lambda i: ("p", 10 + i),))
    timer.start()
    done, not_done = wait(futures[:3], timeout=10)
    assert len(done) == 3 and not not_done
    assert [f.result() for f in futures] == [("p", 10 + i) for i in range(4)]
    assert called == [("p", 11)]
    futures[2].add_done_callback(lambda f: called.append("after"))
    assert called[-1] == "after"
    failed = FutureGroup()
    more = [failed.new() for _ in range(3)]
    pending = as_completed(more, timeout=10)
    failed.fail(ValueError("refused"))
    assert all(isinstance(f.exception(), ValueError) for f in pending)
