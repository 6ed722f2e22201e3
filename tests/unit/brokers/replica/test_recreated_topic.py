"""A topic deleted and created again under the same name: a follower of the new topic never
takes records from a leader that still hosts the old one (Kafka's KIP-516: follower fetches
name the topic id; a leader whose replica has another id answers ``INCONSISTENT_TOPIC_ID``).

Both incarnations start at leader epoch 0 with the same leader, so the leader epoch does not
tell them apart: when the follower's broker applies the re-creation before the leader's
broker does, its first fetch of the new, empty replica was answered from the old topic's
log.  Those records then lived in the new replica with epoch 0 and were never truncated
(the new leader's epoch 0 starts at offset 0 too): once the leader re-created the topic and
wrote, the follower cut only down to the new log's end, and served the old records at
offsets the leader holds other records at once it led.

Over gRPC (``Broker.Fetch``, a real server in this process, the fetcher's thread) and over
the data listener (``REPLICA_FETCH_V2`` and ``REPLICA_FETCH_SESSION_V2`` answered in
process, rounds driven one by one).  The leader is broker 1 and the follower broker 2.
"""
from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace
from typing import Iterator

import grpc
import pyarrow as pa
import pytest

from brokers.metadata.image import BrokerInfo, MetadataImage, PartitionInfo, SchemaVersion, TopicImage, frozen_map
from brokers.net.faults import FetchFaults
from brokers.partition import Partition
from brokers.replica import data_fetch
from brokers.replica.fetcher import ReplicaFetcher
from brokers.server.data_listener import DataListener
from brokers.server.leader_fetch import LeaderFetchHandler
from brokers.server.partition_manager import PartitionManager
from brokers.server.produce import validate_frames
from brokers.server.wire import encode_fetch_response
from spark_log.errors import ErrorCode
from spark_log.frame import encode_batch, iter_frames
from spark_log.proto import broker_pb2 as pb
from spark_log.schemas import BYTES_SCHEMA, SchemaHistory
from tests.support.in_process_fetch import InProcessFetchClient
from tests.support.wait import wait_until

LEADER, FOLLOWER, OLD_STAMP, NEW_STAMP = 1, 2, 0, 7777


def _image(topic_id: str, address: str = "127.0.0.1:1") -> MetadataImage:
    brokers = {b: BrokerInfo(broker_id=b, incarnation=f"i{b}", broker_epoch=b,
                             address=address if b == LEADER else "127.0.0.1:1") for b in (LEADER, FOLLOWER)}
    schemas = (SchemaVersion(schema_id=0, schema=SchemaHistory.bytes_topic().latest),)
    partitions = {0: PartitionInfo(replicas=(LEADER, FOLLOWER), isr=(LEADER, FOLLOWER), leader=LEADER,
                                   leader_epoch=0, partition_epoch=0)}
    topics = {"t": TopicImage(name="t", topic_id=topic_id, partitions=frozen_map(partitions), schemas=schemas)}
    return MetadataImage(brokers=frozen_map(brokers), topics=frozen_map(topics), offset=10, epoch=1)


def _adopt(manager: PartitionManager, image: MetadataImage) -> None:
    manager.publish(None, image)
    manager.reconcile(image)


def _write(manager: PartitionManager, image: MetadataImage, count: int, stamp: int) -> Partition:
    """``count`` one-record frames of timestamp ``stamp`` on the leader's replica of ``t-0``."""
    led = manager.get("t", 0)
    batch = pa.record_batch([pa.array([None], pa.binary()), pa.array([b"v" * 8]),
                             pa.array([[]], BYTES_SCHEMA.field("headers").type),
                             pa.array([stamp], pa.timestamp("ms"))], schema=BYTES_SCHEMA)
    for _ in range(count):
        led.append_as_leader(validate_frames(memoryview(encode_batch(batch, schema_id=0)), image.topics["t"]))
    return led


def _stamps(replica: Partition) -> list[int]:
    """The timestamps of the replica's frames below its high watermark."""
    data = replica.read(0, max_bytes=1 << 20).result.data
    return [header.max_timestamp for _, header in iter_frames(bytes(data), verify=False)]


def _close(*managers: PartitionManager) -> None:
    for manager in managers:
        for partition in manager.hosted():
            partition.close()


# -- over gRPC ----------------------------------------------------------------------------------


class _GrpcLeader:
    """Broker 1's ``Broker.Fetch`` for followers, counting the fetches it received and the
    error codes of each answer."""

    def __init__(self, root: Path) -> None:
        self.manager = PartitionManager(broker_id=LEADER, data_dir=root / "b1")
        self.handler = LeaderFetchHandler(manager=self.manager, faults=FetchFaults(None, LEADER))
        self.received = 0
        self.codes: list[list[int]] = []
        self._lock = threading.Lock()
        self.server = grpc.server(ThreadPoolExecutor(max_workers=4))
        self.server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("spark_log.broker.v1.Broker", {
            "Fetch": grpc.unary_unary_rpc_method_handler(self._fetch)}),))
        self.address = f"127.0.0.1:{self.server.add_insecure_port('127.0.0.1:0')}"
        self.server.start()

    def _fetch(self, request: bytes, context: grpc.ServicerContext) -> bytes:
        with self._lock:
            self.received += 1
        parts = self.handler.handle(pb.FetchRequest.FromString(request))
        with self._lock:
            self.codes.append([result.error.code for result, _, _ in parts])
        return encode_fetch_response(parts)

    def fetched(self, count: int) -> None:
        """Wait until ``count`` fetches arrived: the follower's one thread applied (or
        refused) the answers of all before the last."""
        wait_until(lambda: self.received >= count, timeout=10,
                   message=lambda: f"{count} fetches from the follower (got {self.received})")

    def close(self) -> None:
        self.server.stop(0)


@pytest.fixture()
def grpc_leader(tmp_path: Path) -> Iterator[_GrpcLeader]:
    leader = _GrpcLeader(tmp_path)
    try:
        yield leader
    finally:
        leader.close()
        _close(leader.manager)


def _grpc_fetcher(address: str) -> ReplicaFetcher:
    return ReplicaFetcher(broker_id=FOLLOWER, leader_id=LEADER, address=address, faults=FetchFaults(None, FOLLOWER),
                          fetch_wait_max_ms=100, retry_backoff_ms=20)


def test_over_grpc_a_recreated_topics_follower_never_takes_the_old_topics_records(
        tmp_path: Path, grpc_leader: _GrpcLeader) -> None:
    old = _image("id-old", grpc_leader.address)
    _adopt(grpc_leader.manager, old)
    assert _write(grpc_leader.manager, old, 5, OLD_STAMP).offsets().log_end_offset == 5
    # the follower's broker applied "delete t; create t" (a new id, the same leader, epoch 0); the leader's has not
    follower = PartitionManager(broker_id=FOLLOWER, data_dir=tmp_path / "b2")
    _adopt(follower, _image("id-new", grpc_leader.address))
    (replica,) = follower.hosted()
    assert replica.topic_id == "id-new" and replica.offsets().log_end_offset == 0
    fetcher = _grpc_fetcher(grpc_leader.address)
    fetcher.start()
    try:
        fetcher.set_partitions({("t", 0): replica})
        grpc_leader.fetched(3)  # the answers of the first two were handled
        assert replica.offsets().log_end_offset == 0, (
            f"the new topic's replica (id-new) took {replica.offsets().log_end_offset} records of the deleted topic "
            "(id-old) from a leader that had not applied the deletion yet")
        assert grpc_leader.codes[:2] == [[ErrorCode.INCONSISTENT_TOPIC_ID]] * 2
    finally:
        fetcher.stop()
        _close(follower)


def test_over_grpc_a_recreated_topics_follower_holds_only_the_new_topics_records(
        tmp_path: Path, grpc_leader: _GrpcLeader) -> None:
    """The same race followed to its end: the leader applies the re-creation too and writes
    the new topic's first records (epoch 0, from offset 0); the follower then holds those,
    not the old topic's records under them."""
    old, new = _image("id-old", grpc_leader.address), _image("id-new", grpc_leader.address)
    _adopt(grpc_leader.manager, old)
    _write(grpc_leader.manager, old, 5, OLD_STAMP)
    follower = PartitionManager(broker_id=FOLLOWER, data_dir=tmp_path / "b2")
    _adopt(follower, new)
    (replica,) = follower.hosted()
    fetcher = _grpc_fetcher(grpc_leader.address)
    fetcher.start()
    try:
        fetcher.set_partitions({("t", 0): replica})
        grpc_leader.fetched(2)  # the first answer (from the old topic's log) was handled
        fetcher.stop()  # so that the leader's re-creation and first writes land between two fetches
        _adopt(grpc_leader.manager, new)
        led = _write(grpc_leader.manager, new, 3, NEW_STAMP)
        assert led.topic_id == "id-new"
        fetcher = _grpc_fetcher(grpc_leader.address)
        fetcher.start()
        fetcher.set_partitions({("t", 0): replica})
        wait_until(lambda: led.high_watermark == 3 and replica.high_watermark == 3
                   and replica.offsets().log_end_offset == 3, timeout=10,
                   message=lambda: f"the replicas converge: leader {led.offsets()}, follower {replica.offsets()}")
        assert _stamps(replica) == [NEW_STAMP] * 3, (
            f"the new topic's follower holds frames stamped {_stamps(replica)} at offsets 0..2 ({OLD_STAMP}: the "
            f"deleted topic's records) where its leader holds the new topic's ({NEW_STAMP})")
    finally:
        fetcher.stop()
        _close(follower)


# -- over the data listener ---------------------------------------------------------------------


class _InProcess(InProcessFetchClient):
    """The follower's data listener client with the leader's listener answering in process;
    records the api of each request and its answers."""

    def fetch(self, **kwargs: object) -> list[data_fetch.ReplicaAnswer]:
        self.answered.append(super().fetch(**kwargs))  # type: ignore[arg-type]
        return self.answered[-1]

    def fetch_session(self, **kwargs: object) -> list[data_fetch.ReplicaAnswer]:
        self.answered.append(super().fetch_session(**kwargs))  # type: ignore[arg-type]
        return self.answered[-1]


class _DataPair:
    """Broker 1 leading the old ``t`` (5 records), broker 2 following the re-created one, its
    fetcher's rounds going to broker 1's data listener in process."""

    def __init__(self, root: Path, *, session: bool) -> None:
        self.old, self.new = _image("id-old"), _image("id-new")
        self.leader = PartitionManager(broker_id=LEADER, data_dir=root / "b1")
        self.follower = PartitionManager(broker_id=FOLLOWER, data_dir=root / "b2")
        _adopt(self.leader, self.old)
        _write(self.leader, self.old, 5, OLD_STAMP)
        _adopt(self.follower, self.new)
        (self.replica,) = self.follower.hosted()
        handler = LeaderFetchHandler(manager=self.leader, faults=FetchFaults(None, LEADER))
        listener = DataListener(manager=SimpleNamespace(broker_id=LEADER, image=SimpleNamespace(security=None)),  # type: ignore[arg-type]
                                builder=None, fetch=SimpleNamespace(follower_fetches=handler),  # type: ignore[arg-type]
                                produce=None, list_offsets=None, host="127.0.0.1", port=0,  # type: ignore[arg-type]
                                data_dir=root, channels=None)  # type: ignore[arg-type]
        self.client = _InProcess(listener)
        self.fetcher = ReplicaFetcher(broker_id=FOLLOWER, leader_id=LEADER, address="127.0.0.1:1",
                                      faults=FetchFaults(None, FOLLOWER), transport="auto",
                                      data_peers=object(),  # type: ignore[arg-type]
                                      fetch_wait_max_ms=0, retry_backoff_ms=0)
        self.fetcher.idle_wait_max_ms = 0
        self.fetcher._data = self.client
        if not session:
            self.fetcher._sessions_retry_at = float("inf")  # REPLICA_FETCH_V2: every partition both ways

    def round(self) -> list[data_fetch.ReplicaAnswer]:
        self.fetcher._round({("t", 0): self.replica})
        return self.client.answered[-1]

    def close(self) -> None:
        self.fetcher.stop()
        _close(self.leader, self.follower)


@pytest.mark.parametrize("session", [True, False], ids=["REPLICA_FETCH_SESSION_V2", "REPLICA_FETCH_V2"])
def test_over_the_data_listener_a_recreated_topics_follower_takes_only_the_new_topics_records(
        tmp_path: Path, session: bool) -> None:
    pair = _DataPair(tmp_path, session=session)
    try:
        for _ in range(2):  # the leader still hosts the old topic: refused, nothing applied
            [answer] = pair.round()
            assert answer.error_code == ErrorCode.INCONSISTENT_TOPIC_ID and not len(answer.records), answer
            assert pair.replica.offsets().log_end_offset == 0, (
                f"the new topic's replica took {pair.replica.offsets().log_end_offset} records of the deleted topic")
        assert set(pair.client.apis) == {data_fetch.REPLICA_FETCH_SESSION_V2 if session else data_fetch.REPLICA_FETCH_V2}
        _adopt(pair.leader, pair.new)  # the leader's broker applies the re-creation and writes the new topic
        led = _write(pair.leader, pair.new, 3, NEW_STAMP)
        for _ in range(4):
            pair.round()
        assert (led.high_watermark, pair.replica.high_watermark, pair.replica.offsets().log_end_offset) == (3, 3, 3)
        assert _stamps(pair.replica) == [NEW_STAMP] * 3, (
            f"the follower holds frames stamped {_stamps(pair.replica)} ({OLD_STAMP}: the deleted topic's)")
    finally:
        pair.close()


def test_an_answer_is_applied_only_to_a_replica_of_the_topic_id_its_request_named(tmp_path: Path) -> None:
    """The fetcher's own check, in depth behind the leader's: an answer goes only to a
    replica of the topic id its request named.  A round holds on to the replicas it asked
    for, so only a replica whose id changed between request and answer meets it: a stand-in
    replica does that here, and gets nothing applied."""
    pair = _DataPair(tmp_path, session=True)
    try:
        _adopt(pair.leader, pair.new)
        _write(pair.leader, pair.new, 3, NEW_STAMP)
        applied: list[object] = []
        other = SimpleNamespace(topic_id="id-new", fetch_position=pair.replica.fetch_position,
                                apply_fetched=lambda *args: applied.append(args))
        asked = pair.client._call

        def answered_as_the_id_changes(api: int, payload: bytes, timeout_s: float) -> memoryview:
            answer = asked(api, payload, timeout_s)
            other.topic_id = "id-newer"
            return answer

        pair.client._call = answered_as_the_id_changes  # type: ignore[method-assign]
        pair.fetcher._round({("t", 0): other})  # type: ignore[dict-item]
        [answer] = pair.client.answered[-1]
        assert answer.error_code == 0 and len(answer.records) > 0  # the leader answered id-new's records
        assert applied == []
    finally:
        pair.close()
