"""A tiered ``Partition`` on a real disk (RF=1, one replica): the tier frame, local retention
only below the committed tier end, the range found again by the replay after a reopen, and
the refusals."""
from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from brokers.log.append import check_frames
from brokers.partition import LeaderAndIsr, Partition
from spark_log.clock import ManualClock
from spark_log.config import TopicConfig
from spark_log.errors import TieringNotEnabledError, TierOffsetInvalidError
from spark_log.frame import encode_batch

CONFIG = TopicConfig(segment_bytes=1024, remote_storage_enable=True, local_retention_ms=0, retention_ms=-1)


def _open(path: Path, config: TopicConfig = CONFIG) -> Partition:
    partition = Partition(topic="t", partition=0, topic_id="id", directory=path, config=config, broker_id=1,
                          clock=ManualClock(monotonic_ms=0, wall_ms=10_000))
    partition.become(LeaderAndIsr(leader_id=1, leader_epoch=1, partition_epoch=1, replicas=(1,), isr=(1,)),
                     config=config)
    return partition


def _append(partition: Partition, frames: int) -> None:
    for _ in range(frames):
        batch = pa.record_batch({"value": pa.array([b"v" * 100] * 5, pa.binary())})
        partition.append_as_leader(check_frames(encode_batch(batch, compression="none", timestamp_ms=1_000),
                                                max_message_bytes=1 << 20))


def test_local_retention_only_below_the_tier_and_the_range_survives_a_reopen(tmp_path: Path) -> None:
    partition = _open(tmp_path)
    _append(partition, 20)   # 100 records, a segment per frame or two
    status = partition.tier_status()
    assert (status.tier_start, status.tiered_end) == (0, 0) and 0 < status.tierable_end < 100
    partition.maintenance()
    assert partition.offsets().log_start_offset == 0          # nothing tiered: nothing deleted
    outcome = partition.record_tiered(start=0, end=40)
    assert outcome is not None and outcome.base_offset == 100  # the tier frame, after the records
    assert partition.record_tiered(start=0, end=40) is None    # the same range: nothing appended
    partition.maintenance()
    start = partition.offsets().log_start_offset
    assert 0 < start <= 40                                     # only segments entirely below 40 went
    partition.close()
    again = _open(tmp_path)                                    # the replay finds the tier frame again
    status = again.tier_status()
    assert (status.tier_start, status.tiered_end) == (0, 40) and status.offsets.log_start_offset == start
    with pytest.raises(TierOffsetInvalidError):
        again.record_tiered(start=0, end=30)                   # going back
    with pytest.raises(TierOffsetInvalidError):
        again.record_tiered(start=0, end=500)                  # past the last stable offset
    again.close()


def test_an_untiered_topic_refuses_a_tier_range(tmp_path: Path) -> None:
    partition = _open(tmp_path, TopicConfig(segment_bytes=1024))
    _append(partition, 2)
    with pytest.raises(TieringNotEnabledError):
        partition.record_tiered(start=0, end=5)
    partition.close()
