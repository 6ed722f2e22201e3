"""The Compaction service on a broker whose cleaner is off: work it would never do is refused."""
from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

import pytest

from brokers.server.compaction import BrokerCleaner, CompactionHandler
from brokers.server.partition_manager import PartitionManager
from spark_log.errors import InvalidRequestError, UnknownTopicOrPartitionError
from spark_log.proto import compaction_pb2 as pb


def _handler(enabled: bool) -> CompactionHandler:
    manager = cast(PartitionManager, SimpleNamespace(broker_id=7, image=SimpleNamespace(topics={}), hosted=lambda: []))
    woken: list[Any] = []
    cleaner = cast(BrokerCleaner, SimpleNamespace(enabled=enabled, pool=SimpleNamespace(wake=lambda: woken.append(1))))
    return CompactionHandler(manager, cleaner, max_map_bytes=1 << 20)


def test_a_broker_without_a_cleaner_refuses_compaction_but_describes() -> None:
    off = _handler(enabled=False)
    with pytest.raises(InvalidRequestError, match="broker 7 runs no log cleaner"):
        off.compact(pb.CompactRequest(topic="t"))
    with pytest.raises(InvalidRequestError, match="log_cleaner_enable = false"):
        off.offer_map(pb.OffsetMapRequest(topic="t", partition=0, start_offset=0, end_offset=1, plan=True))
    assert len(off.describe(pb.DescribeCompactionRequest()).partitions) == 0
    with pytest.raises(UnknownTopicOrPartitionError):  # a broker with a cleaner gets past the check
        _handler(enabled=True).compact(pb.CompactRequest(topic="t"))
