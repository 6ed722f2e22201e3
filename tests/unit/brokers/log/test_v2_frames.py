"""The log with version-2 frames (rows with their own offsets): follower appends, reads,
recovery and the producer state all see each frame's whole offset range."""
from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from brokers.log import PartitionLog
from brokers.log.recovery import RECOVERY_POINT_FILE
from spark_log import frame
from spark_log.errors import CorruptRecordError, InvalidRequestError

from .support import make_frame, small_config


def _v2(base: int, deltas: list[int], last: int, *, epoch: int = 1) -> bytes:
    values = pa.array([f"{base}+{d}".encode() for d in deltas], pa.binary())
    message = frame.ipc_message(pa.record_batch({"value": values}), frame.Codec.NONE) if deltas else None
    return frame.encode_v2(base_offset=base, last_offset_delta=last, deltas=deltas, message=message,
                           partition_leader_epoch=epoch, producer_id=5, producer_epoch=0, base_sequence=base,
                           first_timestamp=10, max_timestamp=20, schema_id=0)


def _compacted() -> bytes:
    """Offsets 0..29 in four frames: 0-9 keep 2 and 7, 10-19 emptied, 20-24 dense, 25-29 keep 29."""
    dense = bytearray(make_frame(5))
    frame.set_offset_and_epoch(dense, 20, 1)
    return _v2(0, [2, 7], 9) + _v2(10, [], 9) + bytes(dense) + _v2(25, [4], 4)


def _offsets(data: bytes | memoryview) -> list[int]:
    return [o for pos, h in frame.iter_frames(data) for o in frame.record_offsets(data, h, pos).tolist()]


def test_a_follower_appends_compacted_frames_and_reads_them_back(tmp_path: Path) -> None:
    with PartitionLog(tmp_path / "p", small_config()) as log:
        info = log.append_as_follower(_compacted())
        assert (info.first_offset, info.last_offset, log.log_end_offset) == (0, 29, 30)
        assert _offsets(log.read(0, max_bytes=1 << 20).data) == [2, 7, 20, 21, 22, 23, 24, 29]
        read = log.read(12, max_bytes=1)  # inside the emptied frame: that frame comes first
        assert (read.first_offset, read.next_offset) == (10, 20)
        assert _offsets(log.read(21, max_bytes=1 << 20).data)[0] == 20  # the frame holding 21, whole
        log.append_as_leader(make_frame(2), leader_epoch=1)
        assert log.log_end_offset == 32


def test_a_gap_between_frames_is_still_corruption(tmp_path: Path) -> None:
    with PartitionLog(tmp_path / "p", small_config()) as log:
        with pytest.raises(CorruptRecordError, match="expected 10"):
            log.append_as_follower(_v2(0, [1], 9) + _v2(11, [0], 3))
        assert log.log_end_offset == 0


def test_a_leader_refuses_version_2_frames(tmp_path: Path) -> None:
    with PartitionLog(tmp_path / "p", small_config()) as log:
        with pytest.raises(InvalidRequestError, match="only compaction"):
            log.append_as_leader(_v2(0, [1], 3), leader_epoch=1)
        assert log.log_end_offset == 0


@pytest.mark.parametrize("trusted", [True, False], ids=["below-recovery-point", "recovered"])
def test_reopening_walks_version_2_frames(tmp_path: Path, trusted: bool) -> None:
    directory = tmp_path / "p"
    with PartitionLog(directory, small_config(segment_bytes=1024)) as log:
        for round_ in range(6):
            data = bytearray(_compacted())
            for pos, header in list(frame.iter_frames(bytes(data))):
                frame.set_offset_and_epoch(data, header.base_offset + 30 * round_, 1, pos)
            log.append_as_follower(bytes(data))
        before = _offsets(b"".join(bytes(log.read(o, max_bytes=1 << 20).data) for o in log.segment_base_offsets))
        segments = log.segment_base_offsets
    if not trusted:
        (directory / RECOVERY_POINT_FILE).unlink()
    with PartitionLog(directory, small_config(segment_bytes=1024)) as log:
        assert log.recovery.clean and log.log_end_offset == 180 and log.segment_base_offsets == segments
        assert log.recovery.recovered_segments == (segments[-1:] if trusted else segments)  # the active one always
        after = _offsets(b"".join(bytes(log.read(o, max_bytes=1 << 20).data) for o in log.segment_base_offsets))
        assert after == before and len(after) == 48
