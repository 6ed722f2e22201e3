"""The leader's header rewrite (``leader_header``, ``frame_body``): only ``spark_log.frame``
knows where the fields lie; a stamped header plus the untouched body is a valid frame."""
from __future__ import annotations

import pyarrow as pa
import pytest

from spark_log import frame


def _frame() -> bytes:
    batch = pa.record_batch({"value": pa.array([b"a", b"bb", b"ccc"]),
                             "timestamp": pa.array([10, 30, 20], pa.timestamp("ms"))})
    return frame.encode_batch(batch, producer_id=9, producer_epoch=1, base_sequence=4)


@pytest.mark.parametrize("position", [0, 17])
def test_offset_and_epoch_keep_the_crc(position: int) -> None:
    data = b"\x00" * position + _frame()
    header = frame.parse_header(data, position)
    head = frame.leader_header(data, header, position, base_offset=1_000, epoch=7)
    stamped = frame.verify_frame(bytes(head) + bytes(frame.frame_body(data, header, position)))
    assert (stamped.base_offset, stamped.partition_leader_epoch, stamped.crc) == (1_000, 7, header.crc)
    assert (stamped.first_timestamp, stamped.max_timestamp) == (10, 30)
    assert frame.parse_header(data, position) == header  # the input is not modified


def test_log_append_time_rewrites_timestamps_and_the_crc() -> None:
    data = _frame()
    header = frame.parse_header(data)
    head = frame.leader_header(data, header, base_offset=5, epoch=2, append_time_ms=1_800_000_000_000)
    stamped = frame.verify_frame(bytes(head) + bytes(frame.frame_body(data, header)))
    assert stamped.first_timestamp == stamped.max_timestamp == 1_800_000_000_000
    assert stamped.attributes == header.attributes | frame.ATTR_LOG_APPEND_TIME
    assert stamped.crc != header.crc
    assert (stamped.producer_id, stamped.base_sequence, stamped.record_count) == (9, 4, 3)


def test_frame_body_is_a_view_of_the_arrow_message() -> None:
    data = bytearray(_frame())
    header = frame.parse_header(data)
    body = frame.frame_body(data, header)
    assert len(body) == header.frame_length - frame.HEADER_SIZE
    data[frame.HEADER_SIZE] ^= 0xFF
    assert body[0] == data[frame.HEADER_SIZE]  # no copy
