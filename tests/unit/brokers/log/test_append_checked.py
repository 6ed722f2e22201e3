"""Checked frames: the CRC of a frame is computed once on the leader path.

``check_frames`` verifies (and is the only maker of ``CheckedFrames``); the log trusts
checked frames, still verifies raw bytes handed to it, and verifies every follower frame.
With ``LogAppendTime`` the stamped frames carry a recomputed, valid CRC."""
from __future__ import annotations

from pathlib import Path

import pytest

import spark_log.frame as frame_module
from brokers.log.append import check_frames
from brokers.log.partition_log import PartitionLog
from spark_log.clock import ManualClock
from spark_log.errors import CorruptRecordError, RecordTooLargeError
from spark_log.frame import iter_frames

from .support import make_frame, small_config


@pytest.fixture()
def crc_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    original = frame_module.crc32c

    def counting(data: bytes | bytearray | memoryview) -> int:
        calls.append(len(data))
        return original(data)
    monkeypatch.setattr(frame_module, "crc32c", counting)
    return calls


def test_checked_frames_are_not_verified_again_raw_bytes_are(tmp_path: Path, crc_calls: list[int]) -> None:
    data = make_frame(2) + make_frame(3)
    with PartitionLog(tmp_path / "p", small_config()) as log:
        before = len(crc_calls)
        checked = check_frames(data, max_message_bytes=1 << 20)
        assert len(crc_calls) - before == 2
        log.append_as_leader(checked, leader_epoch=0)
        assert len(crc_calls) - before == 2, "the log verified checked frames again"
        log.append_as_leader(data, leader_epoch=0)
        assert len(crc_calls) - before == 4
        assert log.log_end_offset == 10


def test_follower_appends_verify_every_frame(tmp_path: Path, crc_calls: list[int]) -> None:
    with PartitionLog(tmp_path / "leader", small_config()) as leader, \
            PartitionLog(tmp_path / "follower", small_config()) as follower:
        leader.append_as_leader(check_frames(make_frame(2) + make_frame(1), max_message_bytes=None), leader_epoch=3)
        copied = bytes(leader.read(0, max_bytes=1 << 20).data)
        before = len(crc_calls)
        follower.append_as_follower(copied)
        assert len(crc_calls) - before == 2
        damaged = bytearray(copied)
        damaged[-1] ^= 0xFF
        follower.truncate_to(0)
        with pytest.raises(CorruptRecordError, match="CRC"):
            follower.append_as_follower(bytes(damaged))
        assert follower.log_end_offset == 0


def test_size_limit_is_checked_by_check_frames_and_names_the_topic() -> None:
    with pytest.raises(RecordTooLargeError, match=r"max.message.bytes is 200 \(topic 'clicks'\)"):
        check_frames(make_frame(10, value_bytes=100), max_message_bytes=200, topic="clicks")


def test_log_append_time_frames_carry_a_valid_recomputed_crc(tmp_path: Path) -> None:
    clock = ManualClock(wall_ms=1_800_000_000_000)
    original = make_frame(2, ts=5) + make_frame(1, ts=6)
    with PartitionLog(tmp_path / "p", small_config(message_timestamp_type="LogAppendTime"), clock=clock) as log:
        log.append_as_leader(check_frames(original, max_message_bytes=None), leader_epoch=2)
        stored = bytes(log.read(0, max_bytes=1 << 20, verify=True).data)
    headers = [header for _, header in iter_frames(stored, verify=True)]
    assert [(h.base_offset, h.partition_leader_epoch) for h in headers] == [(0, 2), (2, 2)]
    assert all(h.first_timestamp == h.max_timestamp == clock.wall_ms() for h in headers)
    assert len(stored) == len(original)
