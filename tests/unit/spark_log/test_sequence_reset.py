"""KIP-360 bookkeeping (``spark_log._sequence_reset``): when an out-of-order refusal means
the leader forgot a producer id, and how the id's later sequences are re-stamped; and the
frame re-stamping it relies on (``frame.with_producer``)."""
from __future__ import annotations

import random

import pyarrow as pa
import pytest

from spark_log import errors
from spark_log._sequence_reset import SequenceResets
from spark_log.frame import encode_batch, parse_header, verify_frame, with_producer

SLOT = ("t", 0)


def _resets() -> SequenceResets:
    return SequenceResets(random.Random(7))


def test_a_refusal_right_after_the_acknowledged_sequences_moves_the_rest_to_a_fresh_id() -> None:
    resets = _resets()
    resets.acknowledged(SLOT, 5, 0, 10, last_offset=109)
    fresh = resets.refused(SLOT, 5, 10, maybe_written=False, log_start=-1)
    assert fresh is not None and fresh != 5 and resets.origin(fresh) == 5
    assert resets.mapped(SLOT, 5, 10) == (fresh, 0)
    assert resets.mapped(SLOT, 5, 25) == (fresh, 15)      # later sequences keep their order
    assert resets.mapped(SLOT, 5, 9) == (5, 9)            # acknowledged ones are not moved
    assert resets.mapped(("t", 1), 5, 10) == (5, 10)      # only on that partition
    assert resets.refused(SLOT, 5, 10, maybe_written=False, log_start=-1) is None  # once


def test_a_refusal_with_an_earlier_frame_unacknowledged_is_only_early() -> None:
    resets = _resets()
    resets.acknowledged(SLOT, 5, 0, 10, last_offset=109)
    assert resets.refused(SLOT, 5, 20, maybe_written=False, log_start=-1) is None
    assert resets.refused(SLOT, 5, 0, maybe_written=False, log_start=-1) is None
    assert not resets


def test_a_frame_that_may_have_been_written_moves_only_when_retention_took_the_ids_records() -> None:
    resets = _resets()
    resets.acknowledged(SLOT, 5, 0, 10, last_offset=109)
    assert resets.refused(SLOT, 5, 10, maybe_written=True, log_start=50) is None   # a lagging broker
    assert resets.refused(SLOT, 5, 10, maybe_written=True, log_start=110) is not None


def test_a_fresh_id_forgotten_in_turn_moves_again() -> None:
    resets = _resets()
    resets.acknowledged(SLOT, 5, 0, 10, last_offset=9)
    first = resets.refused(SLOT, 5, 10, maybe_written=False, log_start=-1)
    assert first is not None
    resets.acknowledged(SLOT, first, 0, 4, last_offset=20)
    second = resets.refused(SLOT, first, 4, maybe_written=False, log_start=-1)
    assert second is not None
    assert resets.mapped(SLOT, 5, 16) == (second, 2)


def test_acknowledgements_out_of_order_keep_the_highest() -> None:
    resets = _resets()
    resets.acknowledged(SLOT, 5, 10, 10, last_offset=19)
    resets.acknowledged(SLOT, 5, 0, 10, last_offset=9)
    assert resets.refused(SLOT, 5, 10, maybe_written=False, log_start=-1) is None
    assert resets.refused(SLOT, 5, 20, maybe_written=False, log_start=-1) is not None


def test_with_producer_restamps_id_and_sequence_with_a_valid_crc() -> None:
    batch = pa.record_batch({"value": pa.array([b"a", b"b"], pa.binary())})
    frame = encode_batch(batch, schema_id=0, timestamp_ms=1, producer_id=5, producer_epoch=0, base_sequence=10)
    out = with_producer(frame, 99, 0)
    header = verify_frame(memoryview(out))
    assert (header.producer_id, header.base_sequence, header.record_count) == (99, 0, 2)
    assert out[64:] == frame[64:]
    assert parse_header(memoryview(frame)).producer_id == 5   # the original is untouched
    damaged = bytearray(out)
    damaged[-1] ^= 0xFF
    with pytest.raises(errors.CorruptRecordError):
        verify_frame(memoryview(bytes(damaged)))


def test_holes_move_the_later_sequences_along_a_chain_of_fresh_ids() -> None:
    resets = _resets()
    first = resets.skipped(SLOT, 5, 0, 1)        # sequence 0 failed unwritten
    assert first is not None and resets.mapped(SLOT, 5, 1) == (first, 0)
    second = resets.skipped(SLOT, 5, 6, 1)       # so did 6, stamped before the first hole was known
    assert second is not None and second != first
    assert resets.mapped(SLOT, 5, 3) == (first, 2)
    assert resets.mapped(SLOT, 5, 7) == (second, 0)
    assert resets.origin(second) == 5 and resets.origin(first) == 5
    assert resets.skipped(SLOT, 5, 0, 1) is None  # below the moved sequences: the caller gives the id up
