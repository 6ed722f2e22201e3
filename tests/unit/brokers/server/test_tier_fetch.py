"""FETCH_TIER's frames (``brokers/server/tier_fetch.py``): tier rows become version-2 frames
that decode back to the same rows, offsets (gaps kept) and timestamps; typed topics get one
frame per timestamp run; ``max_bytes`` cuts between frames; and the data listener checks
FETCH_TIER against ``Broker.Fetch``'s rule (READ on the topic) before anything is read."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pyarrow as pa
import pytest

from brokers.server.data_listener import FETCH_TIER, Caller, DataListener
from brokers.server.tier_fetch import tier_frames
from spark_log import frame
from spark_log.errors import ErrorCode
from spark_log.schemas import BYTES_SCHEMA
from spark_log.tier import tier_schema


def _decode(frames: list[bytes], schema: pa.Schema) -> list[tuple[frame.FrameHeader, list[int], pa.RecordBatch]]:
    out = []
    for encoded in frames:
        header = frame.verify_frame(encoded)
        out.append((header, frame.record_offsets(encoded, header).tolist(), frame.decode_batch(encoded, schema)))
    return out


def _tier_rows(schema: pa.Schema, offsets: list[int], stamps_ms: list[int], data: dict[str, list[Any]]) -> pa.Table:
    n = len(offsets)
    columns = {**data, "timestamp": pa.array(stamps_ms, pa.timestamp("ms")).cast(pa.timestamp("us")),
               "partition": pa.array([3] * n, pa.int32()), "offset": pa.array(offsets, pa.int64())}
    return pa.table({f.name: pa.array(columns[f.name]).cast(f.type) if not isinstance(columns[f.name], pa.Array)
                     else columns[f.name] for f in schema}, schema=schema)


def test_bytes_rows_round_trip_with_gaps_headers_and_timestamps() -> None:
    schema = tier_schema("bytes", None)
    offsets = [10, 11, 13, 20, 21]                     # gaps: aborted records, markers, compaction
    stamps = [1000, 1001, 1001, 1005, 1004]
    headers = [[{"key": "h", "value": b"1"}], None, [], [{"key": "a", "value": b""}, {"key": "b", "value": b"2"}], None]
    rows = _tier_rows(schema, offsets, stamps, {"key": [b"k0", None, b"k2", b"k3", b"k4"],
                                                "value": [b"v%d" % i for i in range(5)], "headers": headers})
    frames, left_out = tier_frames(rows, schema=BYTES_SCHEMA, schema_id=7, typed=False, max_bytes=1 << 20)
    assert left_out is None and len(frames) == 1
    [(header, got_offsets, batch)] = _decode(frames, BYTES_SCHEMA)
    assert header.version == frame.VERSION_OFFSETS and header.schema_id == 7 and header.codec == frame.Codec.NONE
    assert not header.is_transactional and not header.is_control   # committed records only: nothing to drop
    assert got_offsets == offsets and header.base_offset == 10 and header.last_offset_delta == 11
    assert (header.first_timestamp, header.max_timestamp) == (1000, 1005)
    assert batch.column("timestamp").cast(pa.int64()).to_pylist() == stamps
    assert batch.column("key").to_pylist() == [b"k0", None, b"k2", b"k3", b"k4"]
    assert batch.column("headers").to_pylist() == headers


def test_typed_rows_get_one_frame_per_timestamp_run_and_a_missing_column_as_nulls() -> None:
    old = pa.schema([("user", pa.string()), ("n", pa.int64())])
    new = pa.schema([("user", pa.string()), ("n", pa.int64()), ("note", pa.string())])
    rows = _tier_rows(tier_schema("typed", old), [0, 1, 2, 3, 4], [5, 5, 6, 6, 5],
                      {"user": ["a", "b", "c", "d", "e"], "n": [0, 1, 2, 3, 4]})
    frames, left_out = tier_frames(rows, schema=new, schema_id=2, typed=True, max_bytes=1 << 20)
    assert left_out is None
    decoded = _decode(frames, new)
    assert [(h.first_timestamp, offsets) for h, offsets, _ in decoded] == [(5, [0, 1]), (6, [2, 3]), (5, [4])]
    assert [r for _, _, b in decoded for r in b.to_pylist()] == [
        {"user": u, "n": n, "note": None} for u, n in zip("abcde", range(5))]


def test_max_bytes_cuts_between_frames_and_names_the_first_row_left_out(monkeypatch: pytest.MonkeyPatch) -> None:
    import brokers.server.tier_fetch as tier_fetch

    monkeypatch.setattr(tier_fetch, "_FRAME_ROWS", 10)
    schema = tier_schema("bytes", None)
    offsets = list(range(100, 150))
    rows = _tier_rows(schema, offsets, [1] * 50, {"key": [None] * 50, "value": [b"x" * 100] * 50, "headers": [None] * 50})
    frames, left_out = tier_frames(rows, schema=BYTES_SCHEMA, schema_id=0, typed=False, max_bytes=3000)
    assert len(frames) == 2 and left_out == 120            # at least one frame; cut once past max_bytes
    assert [o for _, offsets_, _ in _decode(frames, BYTES_SCHEMA) for o in offsets_] == list(range(100, 120))
    one, left_one = tier_frames(rows, schema=BYTES_SCHEMA, schema_id=0, typed=False, max_bytes=1)
    assert len(one) == 1 and left_one == 110
    assert tier_frames(rows.slice(0, 0), schema=BYTES_SCHEMA, schema_id=0, typed=False, max_bytes=1) == ([], None)


class _Refusing:
    def __init__(self) -> None:
        self.asked: list[tuple[Any, Any]] = []

    def is_super(self, principal: str) -> bool:
        return False

    def authorize(self, security: Any, principal: str, host: str, operation: Any, resource: Any) -> bool:
        self.asked.append((operation, resource))
        return False


def test_fetch_tier_is_checked_as_broker_fetch_read_on_the_topic(tmp_path: Path) -> None:
    from spark_log.acls import Operation

    read: list[Any] = []
    manager = SimpleNamespace(broker_id=1, image=SimpleNamespace(security=None))
    listener = DataListener(manager=manager, builder=None, fetch=None, produce=None, list_offsets=None,  # type: ignore[arg-type]
                            host="127.0.0.1", port=0, data_dir=tmp_path, channels=None,  # type: ignore[arg-type]
                            tier_fetch=SimpleNamespace(collect=read.append))  # type: ignore[arg-type]
    authorizer = _Refusing()
    listener.security = SimpleNamespace(authorizer=authorizer, config=SimpleNamespace(security_protocol="SSL"))
    name = b"secret-topic"
    payload = (b"".join(v.to_bytes(4, "little", signed=True) for v in (0, 1, 1 << 20)) + b"\x01"
               + (1).to_bytes(4, "little") + len(name).to_bytes(4, "little") + name + (0).to_bytes(4, "little")
               + (0).to_bytes(8, "little") + (0).to_bytes(8, "little") + (0).to_bytes(4, "little"))
    chunks = listener.answer(FETCH_TIER, memoryview(payload), caller=Caller(principal="User:eve", host="127.0.0.1"))
    answer = b"".join(bytes(c) for c in chunks)
    assert int.from_bytes(answer[:2], "little", signed=True) == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert b"not allowed read on topic 'secret-topic'" in answer
    assert [op for op, _ in authorizer.asked] == [Operation.READ] and read == []   # refused before any tier read
