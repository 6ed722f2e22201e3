"""The acks=all path and the follower fetcher over real partitions on disk.

- A Produce request with several entries appends all of them before waiting for any to
  replicate, so one follower fetch at the leader's LEO acknowledges the whole request (one
  replication round trip per request, not one per entry).
- An acks=all wait is fenced by the leader epoch of its append: a broker that lost and
  regained leadership in between never acknowledges it, even once the new epoch's high
  watermark passes it.
- ``ReplicaFetcher.stop`` cancels a fetch the leader never answers (its blocking call is
  cancelled by closing the channel).

The leader is broker 1 (``PartitionManager``, ``ProduceHandler``, ``LeaderFetchHandler``
in this process); follower fetches are the ``FetchRequest``s broker 2 would send.
"""
from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Iterator

import grpc
import pyarrow as pa
import pytest

from brokers.metadata.image import BrokerInfo, MetadataImage, PartitionInfo, SchemaVersion, TopicImage, frozen_map
from brokers.net.faults import FetchFaults
from brokers.partition import Partition
from brokers.replica.fetcher import ReplicaFetcher
from brokers.server.leader_fetch import LeaderFetchHandler
from brokers.server.wire import encode_fetch_response
from brokers.server.partition_manager import PartitionManager
from brokers.server.produce import ProduceHandler, validate_frames
from spark_log.clock import ManualClock
from spark_log.errors import NotLeaderError
from spark_log.frame import encode_batch
from spark_log.proto import broker_pb2 as pb
from spark_log.schemas import BYTES_SCHEMA, SchemaHistory
from tests.support.wait import wait_until

ME, FOLLOWER = 1, 2


def _image(leader: int, leader_epoch: int, isr: tuple[int, ...] = (1, 2)) -> MetadataImage:
    brokers = {b: BrokerInfo(broker_id=b, incarnation=f"i{b}", broker_epoch=b, address=f"127.0.0.1:{9000 + b}")
               for b in (1, 2)}
    schemas = (SchemaVersion(schema_id=0, schema=SchemaHistory.bytes_topic().latest),)
    partitions = {0: PartitionInfo(replicas=(1, 2), isr=isr, leader=leader, leader_epoch=leader_epoch,
                                   partition_epoch=leader_epoch)}
    topics = {"t": TopicImage(name="t", topic_id="id-t", partitions=frozen_map(partitions), schemas=schemas)}
    return MetadataImage(brokers=frozen_map(brokers), topics=frozen_map(topics), offset=10, epoch=1)


def _frame(rows: int, sequence: int) -> bytes:
    batch = pa.record_batch([pa.array([None] * rows, pa.binary()), pa.array([b"v" * 10] * rows),
                             pa.array([[]] * rows, BYTES_SCHEMA.field("headers").type),
                             pa.array([0] * rows, pa.timestamp("ms"))], schema=BYTES_SCHEMA)
    return encode_batch(batch, schema_id=0, producer_id=7, producer_epoch=0, base_sequence=sequence)


@pytest.fixture()
def manager(tmp_path: Path) -> Iterator[PartitionManager]:
    manager = PartitionManager(broker_id=ME, data_dir=tmp_path, clock=ManualClock(monotonic_ms=1_000))
    image = _image(leader=ME, leader_epoch=1)
    manager.publish(None, image)
    manager.reconcile(image)
    try:
        yield manager
    finally:
        for partition in manager.hosted():
            partition.close()


def _offsets(partition: Partition) -> tuple[int, int, int]:
    offsets = partition.offsets()
    return offsets.log_start_offset, offsets.high_watermark, offsets.log_end_offset


def _follower_fetch(manager: PartitionManager, fetch_offset: int, leader_epoch: int = 1) -> pb.FetchResponse:
    handler = LeaderFetchHandler(manager=manager, faults=FetchFaults(None, ME))
    request = pb.FetchRequest(replica_id=FOLLOWER, max_wait_ms=0, max_bytes=1 << 20, partitions=[pb.FetchPartition(
        topic="t", partition=0, fetch_offset=fetch_offset, current_leader_epoch=leader_epoch, last_fetched_epoch=-1)])
    return pb.FetchResponse.FromString(encode_fetch_response(handler.handle(request)))


def test_one_follower_fetch_acknowledges_every_entry_of_a_request(manager: PartitionManager) -> None:
    partition = manager.get("t", 0)
    entries = [pb.PartitionRecords(topic="t", partition=0, records=_frame(10, 10 * i), current_leader_epoch=-1)
               for i in range(3)]
    request = pb.ProduceRequest(acks=-1, timeout_ms=20_000, partitions=entries)
    answers: list[pb.ProduceResponse] = []
    producing = threading.Thread(target=lambda: answers.append(ProduceHandler(manager).handle(request)))
    producing.start()
    try:
        # every entry is appended while none is replicated yet (the HW is still 0)
        wait_until(lambda: _offsets(partition) == (0, 0, 30), timeout=10,
                   message=lambda: f"all three entries appended before any wait; offsets {partition.offsets()}")
        assert not answers
        fetched = _follower_fetch(manager, 0)
        assert len(fetched.partitions[0].records) > 0   # the follower got the request's frames ...
        _follower_fetch(manager, 30)                     # ... and its next fetch acknowledges all of them
    finally:
        producing.join(timeout=10)
    assert not producing.is_alive()
    (answer,) = answers
    assert [(r.error.code, r.base_offset, r.last_offset) for r in answer.partitions] == [(0, 0, 9), (0, 10, 19),
                                                                                         (0, 20, 29)]
    assert partition.high_watermark == 30


def test_an_acks_all_wait_is_fenced_by_the_epoch_of_its_append(manager: PartitionManager) -> None:
    partition = manager.get("t", 0)
    data = memoryview(_frame(5, 0))
    outcome = partition.append_as_leader(validate_frames(data, manager.image.topics["t"]), gap_timeout_ms=1000)
    assert (outcome.last_offset, outcome.leader_epoch, partition.high_watermark) == (4, 1, 0)
    # leadership moves away and comes back in epoch 3 with an ISR of this broker alone: the
    # new epoch's HW passes the offset, but the append of epoch 1 was never replicated then
    for image in (_image(leader=FOLLOWER, leader_epoch=2), _image(leader=ME, leader_epoch=3, isr=(1,))):
        manager.publish(None, image)
        manager.reconcile(image)
    assert partition.is_leader and partition.leader_epoch == 3 and partition.high_watermark == 5
    with pytest.raises(NotLeaderError):
        partition.wait_for_high_watermark(outcome.last_offset, 1000, leader_epoch=outcome.leader_epoch)
    assert partition.wait_for_high_watermark(outcome.last_offset, 1000)  # waited for in the current epoch


class _SilentLeader:
    """A leader that takes fetches and never answers them until released."""

    def __init__(self) -> None:
        self.fetches = 0
        self.release = threading.Event()

    def fetch(self, request: bytes, context: grpc.ServicerContext) -> bytes:
        self.fetches += 1
        self.release.wait(30)
        return b""


def test_stop_cancels_a_fetch_the_leader_never_answers(tmp_path: Path) -> None:
    leader = _SilentLeader()
    server = grpc.server(ThreadPoolExecutor(max_workers=4))
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("spark_log.broker.v1.Broker", {
        "Fetch": grpc.unary_unary_rpc_method_handler(leader.fetch)}),))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    follower = PartitionManager(broker_id=FOLLOWER, data_dir=tmp_path, clock=ManualClock())
    image = _image(leader=ME, leader_epoch=1)
    follower.publish(None, image)
    follower.reconcile(image)
    fetcher = ReplicaFetcher(broker_id=FOLLOWER, leader_id=ME, address=f"127.0.0.1:{port}",
                             faults=FetchFaults(None, FOLLOWER), fetch_wait_max_ms=30_000)
    fetcher.start()
    try:
        (replica,) = follower.hosted()
        fetcher.set_partitions({("t", 0): replica})
        wait_until(lambda: leader.fetches == 1, timeout=10, message="the follower's fetch reached the leader")
        fetcher.stop(join=True)
        assert not fetcher._thread.is_alive(), "stop returned with the fetch still in flight"
        assert leader.fetches == 1
    finally:
        leader.release.set()
        fetcher.stop()
        server.stop(0)
        for partition in follower.hosted():
            partition.close()
