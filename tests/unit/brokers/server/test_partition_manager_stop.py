"""After ``PartitionManager.stop`` closed every log, a request that arrives late (the gRPC
server drains after the broker part stopped) gets a retriable BROKER_NOT_AVAILABLE, and
never opens the log again (it used to fail with a non-retriable "already open in another
PartitionLog" StorageError while the old log was still closing)."""
from __future__ import annotations

from pathlib import Path

import pytest

from brokers.metadata.image import BrokerInfo, MetadataImage, PartitionInfo, SchemaVersion, TopicImage, frozen_map
from brokers.server.partition_manager import PartitionManager
from spark_log.errors import BrokerNotAvailableError
from spark_log.schemas import SchemaHistory


def _image() -> MetadataImage:
    broker = BrokerInfo(broker_id=1, incarnation="i1", broker_epoch=1, address="127.0.0.1:9001")
    schemas = (SchemaVersion(schema_id=0, schema=SchemaHistory.bytes_topic().latest),)
    partition = PartitionInfo(replicas=(1,), isr=(1,), leader=1, leader_epoch=1, partition_epoch=1)
    topic = TopicImage(name="t", topic_id="id-t", partitions=frozen_map({0: partition}), schemas=schemas)
    return MetadataImage(brokers=frozen_map({1: broker}), topics=frozen_map({"t": topic}), offset=3, epoch=1)


def test_requests_after_stop_are_refused_retriably_and_open_nothing(tmp_path: Path) -> None:
    manager = PartitionManager(broker_id=1, data_dir=tmp_path)
    manager.publish(None, _image())
    partition = manager.get("t", 0)
    assert partition.is_leader
    manager.stop()
    with pytest.raises(BrokerNotAvailableError, match="shutting down") as refused:
        manager.get("t", 0)
    assert refused.value.retriable
    manager.reconcile(_image())
    assert manager.hosted() == []
