"""``PartitionManager`` applies images in offset order: the manager thread may reconcile an
image that a request thread's ``get`` has already overtaken (``get`` hands a replica the
newest image's leadership); the older image must not undo the newer leadership (Kafka's
``Partition.makeLeader/makeFollower`` never apply an older leader epoch).  The manager
thread's interleaving is reproduced by calling ``reconcile`` as it would (no thread started).
"""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from brokers.metadata.image import BrokerInfo, MetadataImage, PartitionInfo, SchemaVersion, TopicImage, frozen_map
from brokers.server.partition_manager import PartitionManager
from spark_log.clock import ManualClock
from spark_log.errors import NotLeaderError
from spark_log.schemas import SchemaHistory

ME = 1


def _image(offset: int, leader: int, leader_epoch: int) -> MetadataImage:
    brokers = {b: BrokerInfo(broker_id=b, incarnation=f"i{b}", broker_epoch=b, address=f"127.0.0.1:{9000 + b}")
               for b in (1, 2)}
    schemas = (SchemaVersion(schema_id=0, schema=SchemaHistory.bytes_topic().latest),)
    partitions = {0: PartitionInfo(replicas=(1, 2), isr=(1, 2), leader=leader, leader_epoch=leader_epoch,
                                   partition_epoch=leader_epoch)}
    topics = {"t": TopicImage(name="t", topic_id="id-t", partitions=frozen_map(partitions), schemas=schemas)}
    return MetadataImage(brokers=frozen_map(brokers), topics=frozen_map(topics), offset=offset, epoch=1)


@pytest.fixture
def manager(tmp_path: Path) -> Iterator[PartitionManager]:
    manager = PartitionManager(broker_id=ME, data_dir=tmp_path, clock=ManualClock(monotonic_ms=1_000))
    yield manager
    for p in manager.hosted():
        p.close()


def test_an_older_image_reconciled_late_never_undoes_a_newer_leadership(manager: PartitionManager) -> None:
    first = _image(10, leader=2, leader_epoch=3)
    manager.publish(None, first)
    manager.reconcile(first)
    older = _image(11, leader=2, leader_epoch=4)   # published; the manager thread takes it ...
    manager.publish(None, older)
    newer = _image(12, leader=ME, leader_epoch=5)  # ... and before it reconciles, this one arrives
    manager.publish(None, newer)
    partition = manager.get("t", 0)                # a produce: leads epoch 5 at once
    assert partition.is_leader and partition.leader_epoch == 5
    manager.reconcile(older)                       # the manager thread's late reconcile: skipped
    assert partition.is_leader and partition.leader_epoch == 5
    manager.reconcile(newer)                       # and then the pending newer one
    assert partition.is_leader and partition.leader_epoch == 5


def test_get_never_hands_a_replica_an_image_older_than_the_one_reconciled(manager: PartitionManager) -> None:
    read = _image(10, leader=ME, leader_epoch=5)   # what a request thread read as ``_image`` ...
    manager.publish(None, read)
    manager.reconcile(_image(12, leader=2, leader_epoch=6))   # ... before a newer image was reconciled
    partition = manager.hosted()[0]
    assert not partition.is_leader and partition.leader_epoch == 6
    with pytest.raises(NotLeaderError):
        manager.get("t", 0)
    assert not partition.is_leader and partition.leader_epoch == 6
