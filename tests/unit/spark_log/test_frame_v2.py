"""Frame version 2: rows carry their own offsets (compaction's frames); version 1 still reads."""
from __future__ import annotations

import struct
from typing import Any, cast

import numpy as np
import pyarrow as pa
import pytest

from spark_log import frame
from spark_log.errors import CorruptRecordError, InvalidRequestError

SCHEMA = pa.schema(cast("list[pa.Field[Any]]", [
    pa.field("key", pa.binary()), pa.field("value", pa.binary()), pa.field("timestamp", pa.timestamp("ms"))]))


def _batch(n: int) -> pa.RecordBatch:
    return pa.record_batch([pa.array([f"k{i}".encode() for i in range(n)]), pa.array([f"v{i}".encode() for i in range(n)]),
                            pa.array(list(range(100, 100 + n)), pa.timestamp("ms"))], schema=SCHEMA)


def _v2(deltas: list[int], *, last: int = 9, base: int = 1000, codec: frame.Codec = frame.Codec.LZ4) -> bytes:
    batch = _batch(10).take(pa.array(deltas, pa.int64())) if deltas else None
    message = frame.ipc_message(batch, codec) if batch is not None else None
    return frame.encode_v2(base_offset=base, last_offset_delta=last, deltas=deltas, message=message,
                           partition_leader_epoch=4, attributes=int(codec) if deltas else 0, producer_id=7,
                           producer_epoch=2, base_sequence=50, first_timestamp=100, max_timestamp=109, schema_id=3)


def test_a_version_2_frame_round_trips_with_its_offsets() -> None:
    data = _v2([0, 3, 4, 8])
    header = frame.verify_frame(data)
    assert (header.version, header.record_count, header.span, header.next_offset) == (2, 4, 10, 1010)
    assert (header.last_offset, header.last_sequence, header.schema_id) == (1009, 59, 3)
    assert frame.record_offsets(data, header).tolist() == [1000, 1003, 1004, 1008]
    decoded = frame.decode_batch(data, SCHEMA, verify=True)
    assert decoded.column("value").to_pylist() == [b"v0", b"v3", b"v4", b"v8"]
    assert len(data) % 8 == 0


def test_version_1_frames_read_as_dense_version_2_frames() -> None:
    data = frame.encode_batch(_batch(5), base_offset=20)
    header = frame.parse_header(data)
    assert (header.version, header.span, header.last_offset_delta, header.body_start) == (1, 5, 4, frame.HEADER_SIZE)
    assert frame.record_offsets(data, header).tolist() == [20, 21, 22, 23, 24]


def test_an_emptied_frame_keeps_its_range_and_producer_fields() -> None:
    data = _v2([])
    header = frame.verify_frame(data)
    assert (header.record_count, header.span, header.frame_length) == (0, 10, frame.V2_HEADER_SIZE)
    assert (header.producer_id, header.producer_epoch, header.base_sequence, header.last_sequence) == (7, 2, 50, 59)
    assert frame.record_offsets(data, header).size == 0
    assert frame.decode_batch(data, SCHEMA).num_rows == 0
    assert len(frame.frame_body(data, header)) == 0


def test_frames_concatenate_and_peek_agrees_with_parse() -> None:
    frames = [_v2([1, 2], base=0), frame.encode_batch(_batch(3), base_offset=10), _v2([], base=13)]
    data = b"".join(frames)
    seen = [(pos, h.base_offset, h.next_offset) for pos, h in frame.iter_frames(data)]
    assert [s[1:] for s in seen] == [(0, 10), (10, 13), (13, 23)]
    for pos, base, end in seen:
        peeked = frame.peek(data, pos, pos)
        assert (peeked.base_offset, peeked.next_offset) == (base, end)


@pytest.mark.parametrize("position", [64, 68, 72, 76, 80])
def test_the_crc_covers_the_version_2_extension_and_deltas(position: int) -> None:
    data = bytearray(_v2([0, 3, 4, 8]))
    data[position] ^= 0x01
    with pytest.raises(CorruptRecordError):
        frame.verify_frame(data)


@pytest.mark.parametrize("deltas, last", [([3, 3], 9), ([4, 2], 9), ([0, 12], 9), ([-1], 9)])
def test_encoding_refuses_deltas_that_break_the_rules(deltas: list[int], last: int) -> None:
    with pytest.raises(InvalidRequestError, match="strictly increasing"):
        frame.encode_v2(base_offset=0, last_offset_delta=last, deltas=deltas, message=b"x" * 8,
                        partition_leader_epoch=0, first_timestamp=0, max_timestamp=0)


def test_encoding_refuses_a_message_without_records_and_the_reverse() -> None:
    with pytest.raises(InvalidRequestError, match="exactly when"):
        frame.encode_v2(base_offset=0, last_offset_delta=3, deltas=[], message=b"x" * 8,
                        partition_leader_epoch=0, first_timestamp=0, max_timestamp=0)
    with pytest.raises(InvalidRequestError, match="last_offset_delta"):
        frame.encode_v2(base_offset=0, last_offset_delta=-1, deltas=[], message=None,
                        partition_leader_epoch=0, first_timestamp=0, max_timestamp=0)


def test_stored_deltas_out_of_order_are_corruption_even_with_a_valid_crc() -> None:
    data = bytearray(_v2([0, 3, 4, 8]))
    struct.pack_into("<I", data, frame.V2_HEADER_SIZE + 4, 9)  # 0, 9, 4, 8
    struct.pack_into("<I", data, 20, frame.crc32c(memoryview(data)[24:]))
    header = frame.verify_frame(data)
    with pytest.raises(CorruptRecordError, match="out of order"):
        frame.record_offsets(data, header)


@pytest.mark.parametrize("version, count, last, length", [(3, 1, 0, 80), (2, 1, -1, 80), (2, 2, 0, 88), (2, 0, 5, 80),
                                                          (2, 1, 4, 72)])
def test_impossible_version_2_headers_are_refused(version: int, count: int, last: int, length: int) -> None:
    data = bytearray(_v2([0]))
    data[18] = version
    struct.pack_into("<i", data, 28, count)
    struct.pack_into("<i", data, 64, last)
    struct.pack_into("<i", data, 8, length)
    data = data[:max(length, 72)] + bytes(max(0, length - len(data)))
    with pytest.raises(CorruptRecordError):
        frame.parse_header(data)


def test_uncompressed_version_2_bodies_decode_zero_copy() -> None:
    data = _v2([2, 5], codec=frame.Codec.NONE)
    buffer = pa.py_buffer(data)
    decoded = frame.decode_batch(buffer, SCHEMA)
    values = decoded.column("value").buffers()[2]
    assert values is not None
    assert buffer.address <= values.address < buffer.address + buffer.size
    assert np.array_equal(frame.record_offsets(data, frame.parse_header(data)), [1002, 1005])
