"""scan: header layout agrees with spark_log.frame; walkers stop at damage."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from brokers.log import scan
from spark_log import frame as frame_module
from spark_log.errors import CorruptRecordError
from spark_log.frame import parse_header, set_offset_and_epoch

from .support import make_frame


def test_peek_layout_matches_frame_header() -> None:
    raw = bytearray(make_frame(5, ts=123))
    set_offset_and_epoch(raw, 77, 9)
    peeked = scan.peek(raw, 0, 0)
    full = parse_header(raw)
    assert (peeked.base_offset, peeked.length, peeked.epoch, peeked.record_count, peeked.max_timestamp,
            peeked.next_offset) == (
        full.base_offset, full.frame_length, full.partition_leader_epoch, full.record_count, full.max_timestamp,
        full.next_offset,
    )


@pytest.mark.parametrize("deltas", [[], [3], [0, 2, 9]])
def test_peek_reads_the_offset_range_of_version_2_frames(deltas: list[int]) -> None:
    raw = frame_module.encode_v2(base_offset=40, last_offset_delta=9, deltas=deltas,
                                 message=frame_module.frame_body(make_frame(len(deltas)), parse_header(make_frame(len(deltas))))
                                 if deltas else None,
                                 partition_leader_epoch=3, first_timestamp=5, max_timestamp=6)
    peeked = scan.peek(raw, 0, 0)
    assert (peeked.base_offset, peeked.record_count, peeked.next_offset, peeked.length) == (40, len(deltas), 50, len(raw))


def write_frames(path: Path, count: int) -> tuple[int, list[bytes]]:
    frames = []
    for i in range(count):
        raw = bytearray(make_frame(2, tag=i))
        set_offset_and_epoch(raw, 2 * i, 1)
        frames.append(bytes(raw))
    path.write_bytes(b"".join(frames))
    return os.open(path, os.O_RDONLY), frames


def test_peek_headers_walks_every_frame(tmp_path: Path) -> None:
    fd, frames = write_frames(tmp_path / "a.log", 50)
    try:
        headers = list(scan.peek_headers(fd, 0, sum(map(len, frames))))
        assert [h.base_offset for h in headers] == list(range(0, 100, 2))
        with pytest.raises(CorruptRecordError, match="past the end"):
            list(scan.peek_headers(fd, 0, sum(map(len, frames)) - 1))
    finally:
        os.close(fd)


def test_peek_headers_reads_only_the_headers_of_frames_longer_than_its_chunk(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sizes = [3, *[3000] * 10, 2, 1, 3000]  # records of 30-byte values: 3000 records is about 100 KiB
    frames, offset = [], 0
    for i, records in enumerate(sizes):
        raw = bytearray(make_frame(records, value_bytes=30, tag=i))
        set_offset_and_epoch(raw, offset, 1)
        frames.append(bytes(raw))
        offset += records
    (tmp_path / "b.log").write_bytes(b"".join(frames))
    read: list[int] = []
    real_pread = os.pread

    def counting_pread(fd: int, length: int, position: int) -> bytes:
        data = real_pread(fd, length, position)
        read.append(len(data))
        return data

    monkeypatch.setattr(scan.os, "pread", counting_pread)
    fd = os.open(tmp_path / "b.log", os.O_RDONLY)
    try:
        headers = list(scan.peek_headers(fd, 0, sum(map(len, frames))))
    finally:
        os.close(fd)
    assert [h.length for h in headers] == [len(f) for f in frames]
    assert [h.base_offset for h in headers] == [sum(sizes[:i]) for i in range(len(sizes))]
    big = sum(len(f) for f in frames if len(f) >= 64 * 1024)
    # one 64 KiB read for the first frames, then a header's bytes after each big frame (and one more chunk
    # after the small ones), never 64 KiB per big frame
    assert big > 10 * 64 * 1024 and sum(read) < 3 * 64 * 1024


@pytest.mark.parametrize(
    "damage, reason",
    [
        (lambda raw, n: raw[: n * 3 + 10], "truncated frame header"),
        (lambda raw, n: raw[: n * 3 + 100], "torn frame"),
        (lambda raw, n: raw[: n * 3 + 100] + bytes([raw[n * 3 + 100] ^ 1]) + raw[n * 3 + 101:], "CRC"),
        (lambda raw, n: raw[: n * 3] + (99).to_bytes(8, "little") + raw[n * 3 + 8:], "expected 6"),
        (lambda raw, n: raw[: n * 3 + 12] + (0).to_bytes(4, "little") + raw[n * 3 + 16:], "epoch"),
    ],
)
def test_verify_frames_stops_at_the_first_bad_frame(tmp_path: Path, damage, reason: str) -> None:
    fd, frames = write_frames(tmp_path / "a.log", 6)
    os.close(fd)
    n = len(frames[0])
    raw = damage(b"".join(frames), n)
    (tmp_path / "a.log").write_bytes(raw)
    fd = os.open(tmp_path / "a.log", os.O_RDONLY)
    try:
        stop: list[scan.ScanStop] = []
        good = list(scan.verify_frames(fd, 0, len(raw), expected_offset=0, stop=stop))
        assert [h.base_offset for h in good] == [0, 2, 4]
        assert stop and stop[0].position == 3 * n and reason in stop[0].reason
    finally:
        os.close(fd)
