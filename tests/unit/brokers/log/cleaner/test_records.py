"""records: one BatchReader per pass decodes frame after frame without copies, whatever
their schemas and codecs, and a damaged frame fails alone."""
from __future__ import annotations

import dataclasses
from typing import Callable

import pytest

from brokers.log.cleaner.records import BatchReader, KeySpec, frame_keys, frame_records
from spark_log.errors import CorruptRecordError
from spark_log.frame import parse_header
from spark_log.schemas import BYTES_SCHEMA
from tests.support.compaction import keyed_frame

SPEC = KeySpec("bytes", (), "", lambda schema_id: BYTES_SCHEMA if schema_id == 0 else None)


def _frames() -> list[bytes]:
    out = []
    for i in range(6):
        keys = [f"k{i}-{j}".encode() for j in range(5)]
        values = [None if j == 2 else f"v{i}-{j}".encode() for j in range(5)]
        out.append(keyed_frame(keys, values, timestamp=1_000 + i, compression=("lz4", None, "zstd")[i % 3]))
    return out


def test_one_reader_decodes_every_frame_of_a_pass_as_a_fresh_decode_does() -> None:
    reader = BatchReader()
    for raw in _frames() * 2:  # keys and whole frames, in turn, from the same reader
        view, header = memoryview(raw), parse_header(raw)
        keys, offsets = frame_keys(view, header, SPEC, reader)
        fresh_keys, fresh_offsets = frame_keys(view, header, SPEC)
        assert keys.equals(fresh_keys) and offsets.tolist() == fresh_offsets.tolist()
        records = frame_records(view, header, SPEC, reader)
        fresh = frame_records(view, header, SPEC)
        assert records.batch.equals(fresh.batch) and records.tombstones.tolist() == [False, False, True, False, False]


@pytest.mark.parametrize("damage", [
    lambda raw: raw[:-9],  # the body ends early
    lambda raw: raw[:60] + bytes(len(raw) - 60),  # the message is zeros
], ids=["short-body", "zeroed-message"])
def test_a_damaged_frame_fails_alone_and_the_reader_goes_on(damage: Callable[[bytes], bytes]) -> None:
    frames = _frames()
    reader = BatchReader()
    frame_records(memoryview(frames[0]), parse_header(frames[0]), SPEC, reader)
    bad = damage(frames[1])
    header = parse_header(frames[1])
    with pytest.raises(CorruptRecordError, match="valid Arrow batch"):
        reader.read(memoryview(bad), header, BYTES_SCHEMA, None)
    for raw in frames[2:]:
        assert frame_records(memoryview(raw), parse_header(raw), SPEC, reader).batch.num_rows == 5


def test_a_frame_claiming_other_than_it_holds_is_refused() -> None:
    raw = _frames()[0]
    header = dataclasses.replace(parse_header(raw), record_count=6)
    with pytest.raises(CorruptRecordError, match="claims 6 records, holds 5"):
        BatchReader().read(memoryview(raw), header, BYTES_SCHEMA, None)
