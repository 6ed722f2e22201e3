"""segment.index.bytes (``TopicConfig.segment_index_bytes``): each index file of a segment
stays within it, as Kafka's: the segment rolls before an append its indexes could not
take, and every record stays readable across the rolls and after a reopen."""
from __future__ import annotations

from pathlib import Path

from brokers.log.offset_index import ENTRY_BYTES as OFFSET_ENTRY_BYTES
from brokers.log.partition_log import PartitionLog
from brokers.log.time_index import ENTRY_BYTES as TIME_ENTRY_BYTES
from tests.unit.brokers.log.support import BASE_TS, make_frame, read_all, small_config


def _fill(log: PartitionLog, frames: int) -> None:
    for i in range(frames):  # one frame per append, each with a later timestamp: every frame indexable
        log.append_as_leader(make_frame(2, ts=BASE_TS + i, tag=i), leader_epoch=0)


def _index_sizes(log: PartitionLog) -> list[tuple[int, int]]:
    return [(len(s.offset_index) * OFFSET_ENTRY_BYTES, len(s.time_index) * TIME_ENTRY_BYTES)
            for s in log._segments]  # noqa: SLF001 - the files' sizes are what the setting bounds


def test_a_segment_rolls_before_its_index_passes_the_bound(tmp_path: Path) -> None:
    config = small_config(segment_bytes=1 << 20, index_interval_bytes=0, segment_index_bytes=64)
    with PartitionLog(tmp_path / "p", config) as log:
        _fill(log, 40)
        sizes = _index_sizes(log)
        assert len(sizes) > 1, "no roll: the index bound was not applied"
        assert all(offsets <= 64 and times <= 64 for offsets, times in sizes), sizes
        assert max(times for _, times in sizes) > 64 - TIME_ENTRY_BYTES  # filled up to the bound, not rolled early
        frames = read_all(log)
        assert [base for base, _ in frames] == [2 * i for i in range(40)]
    with PartitionLog(tmp_path / "p", config) as reopened:  # recovery keeps the segments and their bounds
        assert all(offsets <= 64 and times <= 64 for offsets, times in _index_sizes(reopened))
        assert read_all(reopened) == frames
        assert reopened.offset_for_timestamp(BASE_TS + 33) == 66


def test_the_default_bound_does_not_roll_a_small_log(tmp_path: Path) -> None:
    with PartitionLog(tmp_path / "p", small_config(segment_bytes=1 << 20, index_interval_bytes=0)) as log:
        _fill(log, 40)
        assert log.segment_base_offsets == [0]
        assert _index_sizes(log)[0][0] > 64  # far more than the small bound above would allow
