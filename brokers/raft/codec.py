"""Raft entries as spark-log frames: the bytes the metadata log stores and ships.

Consecutive entries with the same epoch and control flag become one frame whose Arrow
batch has a single non-null binary column ``payload``; the frame header carries the
base offset, the epoch (``partition_leader_epoch``) and the control attribute.  Frames
are uncompressed (metadata records are small) and CRC-protected (``spark_log.frame``).
"""
from __future__ import annotations

from typing import Iterable, Iterator

import pyarrow as pa

from spark_log.errors import CorruptRecordError
from spark_log.frame import Codec, decode_batch, encode_batch, iter_frames

from .messages import Entry

__all__ = ["ENTRY_SCHEMA", "encode_entries", "decode_entries", "group_entries"]

ENTRY_SCHEMA = pa.schema([pa.field("payload", pa.binary(), nullable=False)])
RAFT_SCHEMA_ID = 0


def group_entries(entries: Iterable[Entry]) -> Iterator[list[Entry]]:
    """Runs of consecutive entries sharing epoch and control flag."""
    run: list[Entry] = []
    for entry in entries:
        if run and (entry.epoch != run[0].epoch or entry.control != run[0].control
                    or entry.offset != run[-1].offset + 1):
            yield run
            run = []
        run.append(entry)
    if run:
        yield run


def encode_run(run: list[Entry]) -> bytes:
    batch = pa.record_batch([pa.array([e.payload for e in run], type=pa.binary())], schema=ENTRY_SCHEMA)
    return encode_batch(batch, schema_id=RAFT_SCHEMA_ID, compression=Codec.NONE, timestamp_ms=0,
                        base_offset=run[0].offset, partition_leader_epoch=run[0].epoch,
                        control=run[0].control)


def encode_entries(entries: Iterable[Entry]) -> bytes:
    """Frames for ``entries`` (which must be in offset order), concatenated."""
    return b"".join(encode_run(run) for run in group_entries(entries))


def decode_entries(data: bytes | memoryview) -> list[Entry]:
    """Entries from concatenated frames; raises ``CorruptRecordError`` on damage."""
    view = memoryview(data)
    out: list[Entry] = []
    for position, header in iter_frames(view, verify=True):
        batch = decode_batch(view[position:position + header.frame_length], ENTRY_SCHEMA)
        payloads = batch.column(0).to_pylist()
        for i, payload in enumerate(payloads):
            if not isinstance(payload, bytes):
                raise CorruptRecordError(f"raft entry {header.base_offset + i}: payload is "
                                         f"{type(payload).__name__}, not bytes")
            out.append(Entry(header.base_offset + i, header.partition_leader_epoch, payload, header.is_control))
    return out
