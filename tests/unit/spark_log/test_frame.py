"""The frame format: round trips, header fields, and every kind of damage."""
from __future__ import annotations

import datetime as dt
import struct

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_log import frame
from spark_log.errors import CorruptRecordError, InvalidRequestError


def _batch(n: int = 10) -> pa.RecordBatch:
    return pa.record_batch(
        {
            "key": pa.array([f"k{i}".encode() if i % 3 else None for i in range(n)], pa.binary()),
            "value": pa.array([b"v" * i for i in range(n)], pa.binary()),
            "timestamp": pa.array([1000 + (i * 7) % 5 for i in range(n)], pa.timestamp("ms")),
        }
    )


@pytest.mark.parametrize("codec", ["none", "lz4", "zstd"])
def test_round_trip_each_codec(codec: str) -> None:
    batch = _batch(100)
    data = frame.encode_batch(batch, schema_id=7, compression=codec)
    header = frame.verify_frame(data)
    assert header.codec == frame.Codec.parse(codec)
    assert header.schema_id == 7
    assert header.record_count == 100
    assert header.frame_length == len(data)
    assert frame.decode_batch(data, batch.schema, verify=True).equals(batch)


def test_header_carries_timestamps_and_producer_fields() -> None:
    batch = _batch(5)  # timestamps 1000, 1002, 1004, 1001, 1003
    data = frame.encode_batch(
        batch, producer_id=42, producer_epoch=3, base_sequence=10, transactional=True
    )
    header = frame.parse_header(data)
    assert (header.first_timestamp, header.max_timestamp) == (1000, 1004)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (42, 3, 10)
    assert header.last_sequence == 14
    assert header.is_transactional and not header.is_control


def test_batches_without_timestamp_column_take_the_given_time() -> None:
    batch = pa.record_batch({"x": pa.array([1, 2, 3])})
    header = frame.parse_header(frame.encode_batch(batch, timestamp_ms=123456))
    assert (header.first_timestamp, header.max_timestamp) == (123456, 123456)


def test_rewriting_offset_and_epoch_keeps_crc_valid() -> None:
    data = bytearray(frame.encode_batch(_batch()))
    frame.set_offset_and_epoch(data, 1_000_000_007, 12)
    header = frame.verify_frame(data)
    assert (header.base_offset, header.partition_leader_epoch) == (1_000_000_007, 12)
    assert header.last_offset == 1_000_000_016


def test_iter_frames_walks_concatenated_frames() -> None:
    frames = [frame.encode_batch(_batch(n)) for n in (1, 2, 3)]
    positions = [(pos, h.record_count) for pos, h in frame.iter_frames(b"".join(frames))]
    assert positions == [(0, 1), (len(frames[0]), 2), (len(frames[0]) + len(frames[1]), 3)]


def test_decode_is_zero_copy_for_uncompressed_frames() -> None:
    batch = pa.record_batch({"value": pa.array([b"x" * 1000] * 10)})
    buffer = pa.py_buffer(frame.encode_batch(batch, compression=None))
    decoded = frame.decode_batch(buffer, batch.schema)
    data_buffer = decoded.column(0).buffers()[2]
    assert buffer.address <= data_buffer.address < buffer.address + buffer.size


@given(st.integers(min_value=frame.HEADER_SIZE, max_value=10_000), st.integers(0, 7))
@settings(max_examples=60, derandomize=True, deadline=None)
def test_any_flipped_bit_in_the_protected_part_is_detected(position: int, bit: int) -> None:
    data = bytearray(frame.encode_batch(_batch(20)))
    position = 24 + position % (len(data) - 24)
    data[position] ^= 1 << bit
    with pytest.raises(CorruptRecordError):
        frame.verify_frame(data)


def test_truncated_frame_is_refused() -> None:
    data = frame.encode_batch(_batch())
    for cut in (0, 10, frame.HEADER_SIZE, len(data) - 1):
        with pytest.raises(CorruptRecordError, match="truncated"):
            frame.verify_frame(data[:cut])


def test_bad_magic_is_refused() -> None:
    data = bytearray(frame.encode_batch(_batch()))
    data[16:18] = b"XX"
    with pytest.raises(CorruptRecordError, match="magic"):
        frame.parse_header(data)


def test_impossible_length_is_refused() -> None:
    data = bytearray(frame.encode_batch(_batch()))
    struct.pack_into("<i", data, 8, 3)
    with pytest.raises(CorruptRecordError, match="impossible"):
        frame.parse_header(data)


def test_garbage_arrow_body_is_refused_even_with_a_valid_crc() -> None:
    body = b"\xff\xff\xff\xff" + b"\x10\x00\x00\x00" + b"garbage!" * 4
    header = bytearray(frame.encode_batch(_batch(1))[: frame.HEADER_SIZE])
    data = header + body
    struct.pack_into("<i", data, 8, len(data))
    struct.pack_into("<I", data, 20, frame.crc32c(memoryview(data)[24:]))
    with pytest.raises(CorruptRecordError):
        frame.decode_batch(bytes(data), _batch(1).schema, verify=True)


def test_empty_batch_and_unknown_codec_are_refused() -> None:
    with pytest.raises(InvalidRequestError, match="at least one record"):
        frame.encode_batch(_batch(0))
    with pytest.raises(InvalidRequestError, match="compression"):
        frame.encode_batch(_batch(), compression="snappy")


def test_timestamp_with_timezone_column() -> None:
    ts = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    batch = pa.record_batch({"timestamp": pa.array([ts], pa.timestamp("us", tz="UTC"))})
    header = frame.parse_header(frame.encode_batch(batch))
    assert header.first_timestamp == int(ts.timestamp() * 1000)


@pytest.mark.parametrize("claimed", [2**40, 2**48, 2**56])
def test_a_compressed_buffer_claiming_terabytes_is_corrupt_not_out_of_memory(claimed: int) -> None:
    """The int64 length before a compressed buffer (its LZ4 frame) rewritten: pyarrow asks
    for that much memory (where the allocator refuses it depends on the process); a reader
    gets CorruptRecordError, not pyarrow's ArrowMemoryError."""
    batch = _batch(20)
    data = bytearray(frame.encode_batch(batch, compression="lz4"))
    at = data.index(b"\x04\x22\x4d\x18")
    struct.pack_into("<q", data, at - 8, claimed)
    with pytest.raises(CorruptRecordError):
        frame.decode_batch(bytes(data), batch.schema)
