"""Opening a damaged partition directory: a clean truncation or a typed error, and never
the loss of a record that lies before the damage."""
from __future__ import annotations

import struct
from pathlib import Path

import pytest

from brokers.log import PartitionLog
from spark_log.errors import CorruptRecordError

from .support import BASE_TS, body, make_frame, read_all, small_config


def build(directory: Path, frames: int = 40, *, close: bool = True) -> tuple[list[tuple[int, bytes]], list[int]]:
    """A log of ``frames`` 3-record frames over several segments; returns (frames, bases)."""
    log = PartitionLog(directory, small_config())
    appended = []
    for i in range(frames):
        frame = make_frame(3, value_bytes=40, tag=i, ts=BASE_TS + i)
        log.append_as_leader(frame, leader_epoch=i // 10)
        appended.append((3 * i, body(frame)))
    bases = log.segment_base_offsets
    if close:
        log.close()
    return appended, bases


def seg(directory: Path, base: int, suffix: str = ".log") -> Path:
    return directory / f"{base:020d}{suffix}"


def flip(path: Path, position: int, bit: int = 0x04) -> None:
    raw = bytearray(path.read_bytes())
    raw[position] ^= bit
    path.write_bytes(bytes(raw))


def reopen(directory: Path) -> PartitionLog:
    return PartitionLog(directory, small_config())


def assert_prefix(log: PartitionLog, appended: list[tuple[int, bytes]]) -> list[tuple[int, bytes]]:
    got = read_all(log)
    assert got == appended[: len(got)], "the log is not a prefix of what was appended"
    assert log.log_end_offset == (got[-1][0] + 3 if got else log.log_start_offset)
    return got


def test_clean_reopen_is_clean(tmp_path: Path) -> None:
    appended, _ = build(tmp_path)
    with reopen(tmp_path) as log:
        assert log.recovery.clean and read_all(log) == appended


def test_torn_tail_is_truncated_to_the_last_whole_frame(tmp_path: Path) -> None:
    appended, bases = build(tmp_path)
    path = seg(tmp_path, bases[-1])
    size = path.stat().st_size
    with path.open("r+b") as handle:
        handle.truncate(size - 17)
    with reopen(tmp_path) as log:
        assert log.recovery.truncated and not log.recovery.deleted_segments
        assert read_all(log) == appended[:-1]
        assert log.append_as_leader(make_frame(1), leader_epoch=3).first_offset == appended[-1][0]


def test_garbage_after_the_last_frame_is_cut(tmp_path: Path) -> None:
    appended, bases = build(tmp_path)
    with seg(tmp_path, bases[-1]).open("ab") as handle:
        handle.write(b"\0" * 100)
    with reopen(tmp_path) as log:
        assert log.recovery.truncated and read_all(log) == appended


def test_flipped_bit_in_the_unflushed_tail_truncates_there(tmp_path: Path) -> None:
    appended, bases = build(tmp_path)
    (tmp_path / "recovery-point-offset-checkpoint").unlink()  # as if never flushed: recover all
    path = seg(tmp_path, bases[1])
    flip(path, path.stat().st_size // 2)
    with reopen(tmp_path) as log:
        got = assert_prefix(log, appended)
        assert bases[1] <= log.log_end_offset < bases[2]
        assert len(got) < len(appended)
        assert log.segment_base_offsets == bases[:2]
        assert log.recovery.deleted_segments == bases[2:]


def test_flipped_bit_in_a_flushed_segment_is_a_typed_error_on_read(tmp_path: Path) -> None:
    appended, bases = build(tmp_path)
    path = seg(tmp_path, bases[0])
    flip(path, path.stat().st_size - 30)  # inside the body of the last frame of segment 0
    with reopen(tmp_path) as log:
        assert log.recovery.clean  # flushed data is trusted on open, as in Kafka
        assert log.read(0, max_bytes=64, verify=True).first_offset == 0  # before the damage
        with pytest.raises(CorruptRecordError, match="CRC"):
            read_all(log)
        assert read_all(log, bases[1]) == [a for a in appended if a[0] >= bases[1]]


def test_flipped_offset_in_a_flushed_header_is_a_typed_error(tmp_path: Path) -> None:
    appended, bases = build(tmp_path)
    frame_len = len(make_frame(3, value_bytes=40))
    flip(seg(tmp_path, bases[0]), 2 * frame_len + 1)  # base_offset of the third frame (not under the CRC)
    with reopen(tmp_path) as log:
        with pytest.raises(CorruptRecordError):
            read_all(log)
        assert log.read(0, max_bytes=frame_len).next_offset == 3


def test_truncated_middle_segment_cuts_the_log_there(tmp_path: Path) -> None:
    appended, bases = build(tmp_path)
    path = seg(tmp_path, bases[1])
    with path.open("r+b") as handle:
        handle.truncate(path.stat().st_size // 2)
    with reopen(tmp_path) as log:
        got = assert_prefix(log, appended)
        assert bases[1] < log.log_end_offset < bases[2] and len(got) < len(appended)
        assert log.recovery.deleted_segments == bases[2:]


def test_missing_middle_segment_cuts_the_log_before_the_gap(tmp_path: Path) -> None:
    appended, bases = build(tmp_path)
    seg(tmp_path, bases[1]).unlink()
    with reopen(tmp_path) as log:
        assert assert_prefix(log, appended) == [a for a in appended if a[0] < bases[1]]
        assert not seg(tmp_path, bases[1], ".index").exists()  # orphan index removed


@pytest.mark.parametrize("suffix", [".index", ".timeindex"])
def test_deleted_indexes_are_rebuilt(tmp_path: Path, suffix: str) -> None:
    appended, bases = build(tmp_path)
    for base in bases:
        seg(tmp_path, base, suffix).unlink(missing_ok=True)
    with reopen(tmp_path) as log:
        assert read_all(log) == appended
        assert log.offset_for_timestamp(BASE_TS + 25) == 75
        for offset in range(0, 120, 5):
            assert log.read(offset, max_bytes=1).first_offset == offset - offset % 3
    assert all(seg(tmp_path, base, suffix).exists() for base in bases)


@pytest.mark.parametrize(
    "damage",
    [
        lambda raw: raw[:-3],  # partial entry
        lambda raw: b"\xff" * len(raw),  # garbage
        lambda raw: raw[:8] + struct.pack("<II", 7, 100) + raw[16:],  # plausible but wrong entry
    ],
)
def test_corrupt_offset_index_is_rebuilt(tmp_path: Path, damage) -> None:
    appended, bases = build(tmp_path, frames=60)
    path = seg(tmp_path, bases[0], ".index")
    raw = path.read_bytes()
    assert len(raw) >= 24
    path.write_bytes(damage(raw))
    with reopen(tmp_path) as log:
        assert read_all(log) == appended
        for offset in range(0, bases[1]):
            assert log.read(offset, max_bytes=1).first_offset == offset - offset % 3


def test_corrupt_time_index_is_rebuilt(tmp_path: Path) -> None:
    appended, bases = build(tmp_path)
    seg(tmp_path, bases[0], ".timeindex").write_bytes(b"\x01" * 24)
    with reopen(tmp_path) as log:
        assert log.offset_for_timestamp(BASE_TS + 2) == 6
        assert read_all(log) == appended


def test_damaged_checkpoints_mean_more_recovery_not_less_data(tmp_path: Path) -> None:
    appended, _ = build(tmp_path)
    with reopen(tmp_path) as log:
        epochs = log.epoch_entries()
    (tmp_path / "recovery-point-offset-checkpoint").write_text("garbage")
    (tmp_path / "leader-epoch-checkpoint").write_text("0\n9\n")
    (tmp_path / "log-start-offset-checkpoint").unlink()
    with reopen(tmp_path) as log:
        assert read_all(log) == appended
        assert log.epoch_entries() == epochs == [(0, 0), (1, 30), (2, 60), (3, 90)]
        assert log.recovery.recovered_segments == log.segment_base_offsets


def test_a_crash_before_the_epoch_checkpoint_is_repaired_from_the_frames(tmp_path: Path) -> None:
    appended, _ = build(tmp_path, close=False)  # left open: as if the process died
    (tmp_path / "leader-epoch-checkpoint").unlink()
    (tmp_path / ".lock").unlink()  # the dead process' lock
    with reopen(tmp_path) as log:
        assert read_all(log) == appended and log.latest_epoch == 3


def test_leftover_tmp_files_are_removed(tmp_path: Path) -> None:
    build(tmp_path)
    (tmp_path / "recovery-point-offset-checkpoint.tmp").write_text("0\n1\n99")
    with reopen(tmp_path) as log:
        assert "recovery-point-offset-checkpoint.tmp" in log.recovery.removed_files
