"""PartitionLog: the contract in docs/INTERNALS.md (storage)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from brokers.log import PartitionLog
from brokers.log import files as files_layer
from spark_log.clock import ManualClock
from spark_log.errors import (
    CorruptRecordError,
    FencedEpochError,
    InvalidRequestError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
    StorageError,
)
from spark_log.frame import iter_frames, parse_header

from .support import BASE_TS, body, files, make_frame, read_all, small_config


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(wall_ms=BASE_TS + 1000)


@pytest.fixture
def log(tmp_path: Path, clock: ManualClock):
    log = PartitionLog(tmp_path / "p", small_config(), clock=clock)
    yield log
    log.close()


def test_append_assigns_dense_offsets_and_stamps_the_epoch(log: PartitionLog) -> None:
    one, two = make_frame(3, tag=1), make_frame(2, tag=2)
    info = log.append_as_leader(one + two, leader_epoch=4)
    assert (info.first_offset, info.last_offset, info.record_count, info.frames) == (0, 4, 5, 2)
    assert log.log_end_offset == 5 and log.log_start_offset == 0 and log.latest_epoch == 4
    data = bytes(log.read(0, max_bytes=1 << 20).data)
    headers = [h for _, h in iter_frames(data)]
    assert [(h.base_offset, h.partition_leader_epoch) for h in headers] == [(0, 4), (3, 4)]
    assert data[64:len(one)] == body(one) and data[len(one) + 64:] == body(two)


def test_offsets_continue_across_appends_and_epochs(log: PartitionLog) -> None:
    log.append_as_leader(make_frame(3), leader_epoch=1)
    info = log.append_as_leader(make_frame(2), leader_epoch=3)
    assert info.first_offset == 3 and log.log_end_offset == 5
    assert log.epoch_entries() == [(1, 0), (3, 3)]


@pytest.mark.parametrize(
    "damage, error",
    [
        (lambda f: f[:-1], CorruptRecordError),  # truncated last frame
        (lambda f: f[:100] + bytes([f[100] ^ 1]) + f[101:], CorruptRecordError),  # bit flip, CRC
        (lambda f: f + b"\0" * 10, CorruptRecordError),  # trailing garbage
        (lambda f: f[:40], CorruptRecordError),  # torn header
        (lambda f: f[:16] + b"XX" + f[18:], CorruptRecordError),  # bad magic
    ],
)
def test_bad_input_raises_and_appends_nothing(log: PartitionLog, damage, error) -> None:
    log.append_as_leader(make_frame(2), leader_epoch=0)
    before = read_all(log)
    good = make_frame(3, tag=1)
    bad = damage(make_frame(3, tag=2))
    with pytest.raises(error):
        log.append_as_leader(good + bad, leader_epoch=0)
    assert log.log_end_offset == 2 and read_all(log) == before


def test_non_bytes_input_is_refused(log: PartitionLog) -> None:
    with pytest.raises(InvalidRequestError, match="bytes-like"):
        log.append_as_leader("frames", leader_epoch=0)  # type: ignore[arg-type]
    with pytest.raises(InvalidRequestError, match="at least one frame"):
        log.append_as_leader(b"", leader_epoch=0)
    assert log.log_end_offset == 0


def test_record_too_large_names_the_limit(tmp_path: Path) -> None:
    with PartitionLog(tmp_path / "p", small_config(max_message_bytes=200)) as log:
        with pytest.raises(RecordTooLargeError, match="max.message.bytes is 200"):
            log.append_as_leader(make_frame(1, value_bytes=10) + make_frame(10, value_bytes=100), leader_epoch=0)
        assert log.log_end_offset == 0


def test_a_lower_leader_epoch_is_fenced(log: PartitionLog) -> None:
    log.append_as_leader(make_frame(1), leader_epoch=5)
    with pytest.raises(FencedEpochError):
        log.append_as_leader(make_frame(1), leader_epoch=4)
    with pytest.raises(InvalidRequestError):
        log.append_as_leader(make_frame(1), leader_epoch=-1)
    assert log.log_end_offset == 1


def test_memoryview_input_is_accepted(log: PartitionLog) -> None:
    frame = bytearray(make_frame(2))
    assert log.append_as_leader(memoryview(frame), leader_epoch=0).record_count == 2


def test_follower_append_keeps_offsets_and_epochs(tmp_path: Path, log: PartitionLog) -> None:
    log.append_as_leader(make_frame(2), leader_epoch=1)
    log.append_as_leader(make_frame(3), leader_epoch=2)
    data = bytes(log.read(0, max_bytes=1 << 20).data)
    with PartitionLog(tmp_path / "follower", small_config()) as follower:
        info = follower.append_as_follower(data)
        assert (info.first_offset, info.last_offset) == (0, 4)
        assert follower.epoch_entries() == [(1, 0), (2, 2)]
        assert bytes(follower.read(0, max_bytes=1 << 20).data) == data
        with pytest.raises(OffsetOutOfRangeError):
            follower.append_as_follower(data)
        assert follower.log_end_offset == 5


def test_follower_refuses_gaps_and_epochs_going_back(tmp_path: Path, log: PartitionLog) -> None:
    log.append_as_leader(make_frame(2), leader_epoch=3)
    log.append_as_leader(make_frame(2), leader_epoch=3)
    frames = bytes(log.read(0, max_bytes=1 << 20).data)
    first_len = parse_header(frames).frame_length
    with PartitionLog(tmp_path / "f", small_config()) as follower:
        follower.append_as_follower(frames[:first_len])
        with pytest.raises(OffsetOutOfRangeError):
            follower.append_as_follower(frames[:first_len])  # starts at 0, log ends at 2
        follower.truncate_fully_and_start_at(0)
        follower.append_as_follower(frames)
        assert follower.log_end_offset == 4
    lower = bytearray(make_frame(1))
    lower[:8] = (4).to_bytes(8, "little")
    lower[12:16] = (2).to_bytes(4, "little")
    with pytest.raises(InvalidRequestError, match="truncate"):
        log.append_as_follower(bytes(lower))
    assert log.log_end_offset == 4


def test_read_returns_whole_frames_within_max_bytes(log: PartitionLog) -> None:
    frames = [make_frame(2, tag=i) for i in range(5)]
    for f in frames:
        log.append_as_leader(f, leader_epoch=0)
    size = len(frames[0])
    result = log.read(3, max_bytes=2 * size + 10)
    assert (result.first_offset, result.next_offset) == (2, 6)
    assert len(result.data) == 2 * size
    tiny = log.read(0, max_bytes=1)  # at least one frame
    assert (tiny.first_offset, tiny.next_offset, len(tiny.data)) == (0, 2, size)
    capped = log.read(0, max_bytes=1 << 20, max_offset=4)
    assert capped.next_offset == 4
    mid = log.read(0, max_bytes=1 << 20, max_offset=3)  # frame at 2 starts below 3: included
    assert mid.next_offset == 4
    assert log.read(4, max_bytes=100, max_offset=4).data == b""


def test_read_at_the_end_is_empty_and_outside_raises(log: PartitionLog) -> None:
    log.append_as_leader(make_frame(2), leader_epoch=0)
    end = log.read(2, max_bytes=100)
    assert (end.data, end.first_offset, end.next_offset) == (b"", 2, 2)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(3, max_bytes=100)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(-1, max_bytes=100)


def test_reads_cross_segments(log: PartitionLog) -> None:
    appended = []
    for i in range(30):
        frame = make_frame(3, value_bytes=40, tag=i)
        log.append_as_leader(frame, leader_epoch=0)
        appended.append((3 * i, body(frame)))
    assert len(log.segment_base_offsets) >= 3
    assert read_all(log) == appended
    assert read_all(log, max_bytes=1) == appended
    for offset in range(0, 90, 7):
        result = log.read(offset, max_bytes=1)
        assert result.first_offset == offset - offset % 3


def test_segments_are_named_by_base_offset(log: PartitionLog) -> None:
    for i in range(20):
        log.append_as_leader(make_frame(3, value_bytes=60), leader_epoch=0)
    names = files(log.directory)
    bases = log.segment_base_offsets
    assert bases[0] == 0
    for base in bases:
        assert f"{base:020d}.log" in names
    log.flush(checkpoint=True)
    assert f"{bases[0]:020d}.index" in files(log.directory)
    assert f"{bases[0]:020d}.timeindex" in files(log.directory)


def test_roll_by_segment_ms(tmp_path: Path, clock: ManualClock) -> None:
    with PartitionLog(tmp_path / "p", small_config(segment_ms=1000), clock=clock) as log:
        log.append_as_leader(make_frame(1), leader_epoch=0)
        log.maybe_roll()
        assert log.segment_base_offsets == [0]
        clock.advance(1000)
        log.maybe_roll()
        assert log.segment_base_offsets == [0, 1]
        log.maybe_roll()  # an empty active segment never rolls
        assert log.segment_base_offsets == [0, 1]
        log.append_as_leader(make_frame(1), leader_epoch=0)
        clock.advance(1000)
        log.append_as_leader(make_frame(1), leader_epoch=0)  # rolls on append too
        assert log.segment_base_offsets == [0, 1, 2]


def test_offset_for_timestamp(log: PartitionLog) -> None:
    for i in range(40):
        log.append_as_leader(make_frame(2, ts=BASE_TS + 10 * i), leader_epoch=0)
    assert log.offset_for_timestamp(0) == 0
    assert log.offset_for_timestamp(BASE_TS) == 0
    assert log.offset_for_timestamp(BASE_TS + 1) == 2
    assert log.offset_for_timestamp(BASE_TS + 250) == 50
    assert log.offset_for_timestamp(BASE_TS + 390) == 78
    assert log.offset_for_timestamp(BASE_TS + 391) is None


def test_log_append_time_replaces_timestamps(tmp_path: Path, clock: ManualClock) -> None:
    config = small_config(message_timestamp_type="LogAppendTime")
    with PartitionLog(tmp_path / "p", config, clock=clock) as log:
        info = log.append_as_leader(make_frame(2, ts=5), leader_epoch=0)
        assert info.max_timestamp == clock.wall_ms()
        data = bytes(log.read(0, max_bytes=1 << 20, verify=True).data)
        header = parse_header(data)
        assert header.max_timestamp == header.first_timestamp == clock.wall_ms()
        assert header.attributes & 0x40


def test_end_offset_for_epoch(log: PartitionLog) -> None:
    assert log.end_offset_for_epoch(0) == (-1, -1)
    log.append_as_leader(make_frame(2), leader_epoch=1)
    log.append_as_leader(make_frame(3), leader_epoch=3)
    assert log.end_offset_for_epoch(3) == (3, 5)
    assert log.end_offset_for_epoch(2) == (1, 2)
    assert log.end_offset_for_epoch(1) == (1, 2)
    assert log.end_offset_for_epoch(0) == (0, 0)
    assert log.end_offset_for_epoch(4) == (-1, -1)


def test_truncate_to_drops_whole_frames(log: PartitionLog) -> None:
    for i in range(30):
        log.append_as_leader(make_frame(3, value_bytes=40, tag=i), leader_epoch=i // 10)
    expected = read_all(log)
    log.truncate_to(46)  # inside the frame 45..47: it goes whole
    assert log.log_end_offset == 45
    assert read_all(log) == expected[:15]
    assert log.epoch_entries() == [(0, 0), (1, 30)]
    log.truncate_to(30)
    assert log.log_end_offset == 30 and log.epoch_entries() == [(0, 0)]
    info = log.append_as_leader(make_frame(1), leader_epoch=5)
    assert info.first_offset == 30
    log.truncate_to(1000)  # past the end: nothing to do
    assert log.log_end_offset == 31


def test_truncate_is_durable_across_reopen(tmp_path: Path) -> None:
    with PartitionLog(tmp_path / "p", small_config()) as log:
        for i in range(30):
            log.append_as_leader(make_frame(3, value_bytes=40, tag=i), leader_epoch=1)
        log.flush(checkpoint=True)
        log.truncate_to(30)
        expected = read_all(log)
    with PartitionLog(tmp_path / "p", small_config()) as log:
        assert log.log_end_offset == 30 and read_all(log) == expected


def test_truncate_fully_and_start_at(log: PartitionLog) -> None:
    for i in range(10):
        log.append_as_leader(make_frame(3, value_bytes=60), leader_epoch=2)
    log.truncate_fully_and_start_at(500)
    assert (log.log_start_offset, log.log_end_offset, log.latest_epoch) == (500, 500, None)
    assert log.segment_base_offsets == [500]
    assert log.append_as_leader(make_frame(1), leader_epoch=3).first_offset == 500
    with pytest.raises(OffsetOutOfRangeError):
        log.read(0, max_bytes=10)


def test_advance_log_start_deletes_segments_below(log: PartitionLog) -> None:
    for i in range(30):
        log.append_as_leader(make_frame(3, value_bytes=40), leader_epoch=0)
    bases = log.segment_base_offsets
    log.advance_log_start(bases[2] + 1)
    assert log.log_start_offset == bases[2] + 1
    assert log.segment_base_offsets == bases[2:]
    with pytest.raises(OffsetOutOfRangeError):
        log.read(bases[2], max_bytes=10)
    assert log.read(bases[2] + 1, max_bytes=10).first_offset == bases[2]
    with pytest.raises(OffsetOutOfRangeError):
        log.advance_log_start(log.log_end_offset + 1)
    log.advance_log_start(0)  # going back is a no-op
    assert log.log_start_offset == bases[2] + 1


def test_retention_by_bytes_never_deletes_the_active_segment(tmp_path: Path) -> None:
    with PartitionLog(tmp_path / "p", small_config(retention_bytes=5000)) as log:
        for i in range(60):
            log.append_as_leader(make_frame(3, value_bytes=40), leader_epoch=0)
        deleted = log.apply_retention(high_watermark=log.log_end_offset)
        assert deleted > 0
        assert log.size_bytes <= 5000 + 4096
        assert log.log_start_offset == log.segment_base_offsets[0]
        assert read_all(log)[0][0] == log.log_start_offset
    with PartitionLog(tmp_path / "p", small_config(retention_bytes=0)) as log:
        log.apply_retention(high_watermark=log.log_end_offset)
        assert len(log.segment_base_offsets) == 1


def test_retention_stops_at_the_high_watermark(tmp_path: Path) -> None:
    """Only segments wholly below the HW go (Kafka's ``deletableSegments``): the log start
    never passes it, whatever retention wants."""
    with PartitionLog(tmp_path / "p", small_config(retention_bytes=0)) as log:
        for _ in range(60):
            log.append_as_leader(make_frame(3, value_bytes=40), leader_epoch=0)
        bases = log.segment_base_offsets
        assert len(bases) > 3
        assert log.apply_retention(high_watermark=0) == 0 and log.log_start_offset == 0
        assert log.apply_retention(high_watermark=bases[2] - 1) == 1 and log.log_start_offset == bases[1]
        assert log.apply_retention(high_watermark=bases[2]) == 1 and log.log_start_offset == bases[2]
        assert log.apply_retention(high_watermark=log.log_end_offset) == len(bases) - 3
        assert log.segment_base_offsets == bases[-1:]


def test_retention_by_time(tmp_path: Path, clock: ManualClock) -> None:
    with PartitionLog(tmp_path / "p", small_config(retention_ms=10_000), clock=clock) as log:
        for i in range(40):
            log.append_as_leader(make_frame(3, value_bytes=40, ts=BASE_TS + 1000 * i), leader_epoch=0)
        segments = log.segment_base_offsets
        clock.advance(BASE_TS + 25_000 - clock.wall_ms())
        deleted = log.apply_retention(high_watermark=log.log_end_offset)
        assert deleted >= 1 and log.segment_base_offsets == segments[deleted:]
        assert log.offset_for_timestamp(BASE_TS + 10_000) is not None
        clock.advance(10**9)
        log.apply_retention(high_watermark=log.log_end_offset)
        assert log.segment_base_offsets == segments[-1:]


def test_flush_messages_fsyncs_every_n_records(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (calls.append(fd), real(fd))[1])
    with PartitionLog(tmp_path / "p", small_config(flush_messages=3)) as log:
        log.append_as_leader(make_frame(1), leader_epoch=0)  # (the epoch checkpoint is fsynced)
        calls.clear()
        log.append_as_leader(make_frame(1), leader_epoch=0)
        assert calls == [] and log.recovery_point == 0
        log.append_as_leader(make_frame(1), leader_epoch=0)
        assert len(calls) == 1 and log.recovery_point == 3


def test_flush_ms(tmp_path: Path, clock: ManualClock) -> None:
    with PartitionLog(tmp_path / "p", small_config(flush_ms=100), clock=clock) as log:
        log.append_as_leader(make_frame(2), leader_epoch=0)
        assert log.recovery_point == 0
        clock.advance(100)
        log.maybe_roll()
        assert log.recovery_point == 2


def test_reopen_reads_back_everything(tmp_path: Path) -> None:
    with PartitionLog(tmp_path / "p", small_config()) as log:
        for i in range(25):
            log.append_as_leader(make_frame(3, value_bytes=50, tag=i, ts=BASE_TS + i), leader_epoch=i // 5)
        expected, epochs = read_all(log), log.epoch_entries()
    with PartitionLog(tmp_path / "p", small_config()) as log:
        assert log.recovery.clean
        assert read_all(log) == expected and log.epoch_entries() == epochs
        assert log.offset_for_timestamp(BASE_TS + 20) == 60


def test_one_log_per_directory(tmp_path: Path, log: PartitionLog) -> None:
    with pytest.raises(StorageError, match="already open"):
        PartitionLog(log.directory, small_config())


def test_closed_log_refuses_calls(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path / "p", small_config())
    log.close()
    log.close()
    with pytest.raises(StorageError, match="closed"):
        log.append_as_leader(make_frame(1), leader_epoch=0)


def test_delete_removes_the_directory(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path / "p", small_config())
    log.append_as_leader(make_frame(1), leader_epoch=0)
    log.delete()
    assert not (tmp_path / "p").exists()


def test_verify_read_detects_a_flipped_bit(log: PartitionLog) -> None:
    log.append_as_leader(make_frame(3, value_bytes=100), leader_epoch=0)
    log.flush(checkpoint=True)
    path = log.directory / f"{0:020d}.log"
    raw = bytearray(path.read_bytes())
    raw[150] ^= 0x10
    path.write_bytes(bytes(raw))
    log.read(0, max_bytes=1 << 20)  # without verify the bytes are served as stored
    with pytest.raises(CorruptRecordError, match="CRC"):
        log.read(0, max_bytes=1 << 20, verify=True)


@pytest.mark.parametrize(
    "call",
    [
        lambda log: log.append_as_leader(make_frame(1), leader_epoch="1"),
        lambda log: log.append_as_leader(make_frame(1), leader_epoch=2**31),
        lambda log: log.read("0", max_bytes=10),
        lambda log: log.read(0, max_bytes=None),
        lambda log: log.truncate_to(1.5),
        lambda log: log.advance_log_start(True),
        lambda log: log.offset_for_timestamp("now"),
        lambda log: log.end_offset_for_epoch(None),
    ],
)
def test_wrong_argument_types_are_invalid_requests(log: PartitionLog, call) -> None:
    log.append_as_leader(make_frame(2), leader_epoch=0)
    with pytest.raises(InvalidRequestError):
        call(log)
    assert log.log_end_offset == 2 and log.log_start_offset == 0


def test_flush_after_a_roll_makes_the_new_segment_entry_durable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import brokers.log.partition_log as module

    synced: list[Path] = []
    monkeypatch.setattr(module, "fsync_dir", synced.append)
    with PartitionLog(tmp_path / "p", small_config(flush_messages=1)) as log:
        synced.clear()
        log.append_as_leader(make_frame(1), leader_epoch=0)
        assert synced == []
        for _ in range(20):
            log.append_as_leader(make_frame(3, value_bytes=100), leader_epoch=0)
        assert len(log.segment_base_offsets) > 1 and synced.count(log.directory) == len(log.segment_base_offsets) - 1


def test_a_clean_reopen_rewrites_no_checkpoint_and_a_crashed_one_does(tmp_path: Path, clock: ManualClock) -> None:
    """Issue 19: opening a cleanly closed log writes nothing (a broker restarting with 1,000
    partitions paid 7 fsyncs per partition rewriting the same checkpoints); a log whose
    recovery point is below its end (a crash) is flushed and checkpointed as before."""
    from brokers.log.checkpoint import read_offset, write_offset
    from brokers.log.recovery import LOG_START_FILE, RECOVERY_POINT_FILE

    directory = tmp_path / "p"
    log = PartitionLog(directory, small_config(), clock=clock)
    log.append_as_leader(make_frame(3), leader_epoch=2)
    log.close()
    names = (RECOVERY_POINT_FILE, LOG_START_FILE, "leader-epoch-checkpoint")
    assert all((directory / n).is_file() for n in names)
    inodes = {n: os.stat(directory / n).st_ino for n in names}  # an atomic rewrite replaces the file
    log = PartitionLog(directory, small_config(), clock=clock)
    assert log.log_end_offset == 3 and log.epoch_entries() == [(2, 0)] and log.recovery_point == 3
    log.close()
    assert {n: os.stat(directory / n).st_ino for n in names} == inodes
    write_offset(directory / RECOVERY_POINT_FILE, 1)  # as if the process died before the last checkpoint
    log = PartitionLog(directory, small_config(), clock=clock)
    assert log.recovery_point == 3 and read_offset(directory / RECOVERY_POINT_FILE) == 3
    log.close()


class _RecordingFiles(files_layer.OsFiles):
    """The OS layer, recording each fsync (by file name) and rename (by target name)."""

    def __init__(self) -> None:
        self.ops: list[tuple[str, str]] = []
        self._names: dict[int, str] = {}

    def open(self, path: Path, flags: int, mode: int = 0o644) -> int:
        fd = super().open(path, flags, mode)
        self._names[fd] = Path(path).name
        return fd

    def fsync(self, fd: int) -> None:
        self.ops.append(("fsync", self._names.get(fd, "?")))
        super().fsync(fd)

    def replace(self, source: Path, target: Path) -> None:
        self.ops.append(("rename", Path(target).name))
        super().replace(source, target)


def test_a_new_epoch_reaches_the_file_before_the_recovery_point_not_on_append(tmp_path: Path) -> None:
    """The epoch checkpoint is not written on the append path (a first write to 1,000 new
    partitions cost a file, a rename and two fsyncs per replica), and never a recovery
    point past an epoch entry that a crash could lose: the file is written first."""
    recording = _RecordingFiles()
    previous = files_layer.use(recording)
    try:
        with PartitionLog(tmp_path / "p", small_config()) as log:
            log.append_as_leader(make_frame(1), leader_epoch=1)
            log.flush(checkpoint=True)
            recording.ops.clear()
            log.append_as_leader(make_frame(1, tag=1), leader_epoch=2)
            appended = list(recording.ops)
            log.flush(checkpoint=True)
            flushed = list(recording.ops[len(appended):])
    finally:
        files_layer.use(previous)
    epoch_file, point_file = "leader-epoch-checkpoint", "recovery-point-offset-checkpoint"
    assert not [op for op in appended if op[1].startswith(epoch_file)], appended
    synced = flushed.index(("fsync", epoch_file + ".tmp"))
    assert synced < flushed.index(("rename", point_file)), flushed
    reopened = PartitionLog(tmp_path / "p", small_config())
    try:
        assert reopened.epoch_entries() == [(1, 0), (2, 1)]
    finally:
        reopened.close()
