"""``tiering.tier_range_error``: which tier reports the leader refuses (table tests), and a
tiered ``Partition`` refusing a range that would leave a hole between the tier and its log."""
from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from brokers.log.append import check_frames
from brokers.partition import LeaderAndIsr, Partition
from brokers.partition.tiering import TierMark, tier_range_error
from spark_log.clock import ManualClock
from spark_log.config import TopicConfig
from spark_log.errors import TierOffsetInvalidError
from spark_log.frame import encode_batch

LATEST = TierMark(offset=60, start=10, end=50)


@pytest.mark.parametrize(("latest", "start", "end", "refused"), [
    (None, 0, 40, None),              # the first range, from the log start
    (None, 5, 40, None),              # ... or from below it (the log start moved since the job looked)
    (None, 20, 40, "first tiered range"),   # [10, 20) would be in neither
    (None, 0, 101, "last stable offset"),
    (None, 30, 20, "last stable offset"),
    (LATEST, 10, 80, None),           # the same start, a later end
    (LATEST, 50, 80, None),           # contiguous: starts where the tier ends
    (LATEST, 30, 50, None),           # tier retention moved the start
    (LATEST, 51, 80, "not contiguous"),   # offset 50 would be in neither
    (LATEST, 10, 40, "go back"),
    (LATEST, 5, 50, "go back"),
])
def test_tier_range_error(latest: TierMark | None, start: int, end: int, refused: str | None) -> None:
    error = tier_range_error(latest, start=start, end=end, log_start=10, lso=100)
    assert (error is None) if refused is None else (error is not None and refused in error), error


def test_a_partition_refuses_a_tier_range_that_leaves_a_hole(tmp_path: Path) -> None:
    config = TopicConfig(segment_bytes=1024, remote_storage_enable=True, local_retention_ms=0, retention_ms=-1)
    partition = Partition(topic="t", partition=0, topic_id="id", directory=tmp_path, config=config, broker_id=1,
                          clock=ManualClock(monotonic_ms=0, wall_ms=10_000))
    partition.become(LeaderAndIsr(leader_id=1, leader_epoch=1, partition_epoch=1, replicas=(1,), isr=(1,)),
                     config=config)
    try:
        for _ in range(20):
            batch = pa.record_batch({"value": pa.array([b"v" * 100] * 5, pa.binary())})
            partition.append_as_leader(check_frames(encode_batch(batch, compression="none", timestamp_ms=1_000),
                                                    max_message_bytes=1 << 20))
        with pytest.raises(TierOffsetInvalidError, match="first tiered range"):
            partition.record_tiered(start=30, end=60)
        assert partition.record_tiered(start=0, end=30) is not None
        with pytest.raises(TierOffsetInvalidError, match="not contiguous"):
            partition.record_tiered(start=40, end=60)
        partition.maintenance()
        status = partition.tier_status()
        assert (status.tier_start, status.tiered_end) == (0, 30) and status.offsets.log_start_offset <= 30
        assert partition.record_tiered(start=30, end=60) is not None   # contiguous: recorded
    finally:
        partition.close()
