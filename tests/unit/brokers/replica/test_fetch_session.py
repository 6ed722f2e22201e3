"""Fetch sessions (``REPLICA_FETCH_SESSION``, ``brokers/server/replica_session.py``): a
follower's ``ReplicaFetcher`` rounds against a leader's ``LeaderFetchHandler`` through the
data listener's own request handling and the follower's own encoding, with real partitions
on disk on both sides and a manual clock (no socket: the listener answers in process).

What must hold: an idle round carries no partition and answers none, yet counts the
follower as caught up exactly as a full fetch does (no ISR shrink); records, a grown high
watermark, an error and a partition no longer followed travel for that partition alone; a
refused partition is not asked for again until its backoff passed or its leader epoch
changed (the fetcher's delayed partitions); a connection's session belongs to one follower."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Iterator

import pyarrow as pa
import pytest

from brokers.log.append import check_frames
from brokers.metadata.image import BrokerInfo, MetadataImage, PartitionInfo, SchemaVersion, TopicImage, frozen_map
from brokers.net.faults import FetchFaults
from brokers.partition import Partition
from brokers.replica import data_fetch
from brokers.replica.fetcher import ReplicaFetcher
from brokers.replica.replica_wire import ReplicaWanted
from brokers.server.data_listener import DataListener
from brokers.server.leader_fetch import LeaderFetchHandler
from brokers.server.partition_manager import PartitionManager
from brokers.server.replica_listener import REPLICA_FETCH_SESSION
from spark_log.clock import ManualClock
from spark_log.errors import ErrorCode, InvalidRequestError
from spark_log.frame import encode_batch
from spark_log.schemas import SchemaHistory
from tests.support.in_process_fetch import InProcessFetchClient
from tests.support.wait import wait_until

LEADER, FOLLOWER, TOPIC, LAG_MS = 1, 2, "t", 30_000


def _image(epochs: dict[int, int]) -> MetadataImage:
    brokers = {b: BrokerInfo(broker_id=b, incarnation=f"i{b}", broker_epoch=b, address=f"127.0.0.1:{9000 + b}")
               for b in (LEADER, FOLLOWER)}
    schemas = (SchemaVersion(schema_id=0, schema=SchemaHistory.bytes_topic().latest),)
    parts = {i: PartitionInfo(replicas=(LEADER, FOLLOWER), isr=(LEADER, FOLLOWER), leader=LEADER, leader_epoch=epoch,
                              partition_epoch=epoch) for i, epoch in epochs.items()}
    topics = {TOPIC: TopicImage(name=TOPIC, topic_id="id-t", partitions=frozen_map(parts), schemas=schemas)}
    return MetadataImage(brokers=frozen_map(brokers), topics=frozen_map(topics), offset=10 + sum(epochs.values()),
                         epoch=1)


class _InProcess(InProcessFetchClient):
    """The follower's client with the leader's data listener answering in process; records
    how many partitions each request carried and the answers."""

    def __init__(self, listener: DataListener) -> None:
        super().__init__(listener)
        self.carried: list[int] = []

    def fetch_session(self, **kwargs: object) -> list[data_fetch.ReplicaAnswer]:
        before = dict(self._sent)
        answers = super().fetch_session(**kwargs)  # type: ignore[arg-type]
        self.carried.append(sum(1 for key, w in self._sent.items() if before.get(key) != w))
        self.answered.append(answers)
        return answers


class Pair:
    def __init__(self, root: Path, retry_backoff_ms: int = 60_000) -> None:
        self.clock = ManualClock()
        image = _image({0: 1, 1: 1, 2: 1})
        self.leader = PartitionManager(broker_id=LEADER, data_dir=root / "l", clock=self.clock)
        self.follower = PartitionManager(broker_id=FOLLOWER, data_dir=root / "f", clock=self.clock)
        for manager in (self.leader, self.follower):
            manager.publish(None, image)
            manager.reconcile(image)
        handler = LeaderFetchHandler(manager=self.leader, faults=FetchFaults(None, LEADER))
        listener = DataListener(manager=SimpleNamespace(broker_id=LEADER, image=SimpleNamespace(security=None)),  # type: ignore[arg-type]
                                builder=None, fetch=SimpleNamespace(follower_fetches=handler),  # type: ignore[arg-type]
                                produce=None, list_offsets=None, host="127.0.0.1", port=0,  # type: ignore[arg-type]
                                data_dir=root, channels=None)  # type: ignore[arg-type]
        self.client = _InProcess(listener)
        self.fetcher = ReplicaFetcher(broker_id=FOLLOWER, leader_id=LEADER, address="127.0.0.1:1",
                                      faults=FetchFaults(None, FOLLOWER), transport="auto", data_peers=object(),  # type: ignore[arg-type]
                                      fetch_wait_max_ms=0, retry_backoff_ms=retry_backoff_ms)
        self.fetcher.idle_wait_max_ms = 0
        self.fetcher._data = self.client
        self.following = {(p.topic, p.partition): p for p in self.follower.hosted()}

    def round(self) -> dict[int, data_fetch.ReplicaAnswer]:
        """One follower round; the partitions answered."""
        self.fetcher._round(self.following)
        return {answer.partition: answer for answer in self.client.answered[-1]}

    def led(self, index: int) -> Partition:
        return self.leader.get(TOPIC, index)

    def close(self) -> None:
        self.fetcher.stop()
        self.leader.stop()
        self.follower.stop()


@pytest.fixture()
def pair(tmp_path: Path) -> Iterator[Pair]:
    pair = Pair(tmp_path)
    try:
        yield pair
    finally:
        pair.close()


def _append(partition: Partition, rows: int) -> None:
    batch = pa.record_batch({"value": pa.array([b"v" * 10] * rows, pa.binary())})
    partition.append_as_leader(check_frames(encode_batch(batch, compression="none"), max_message_bytes=1 << 20))


def test_an_idle_round_carries_and_answers_nothing_and_still_counts_the_follower_caught_up(pair: Pair) -> None:
    assert sorted(pair.round()) == [0, 1, 2] and pair.client.carried == [3]  # a new session: all of it, both ways
    assert pair.round() == {} and pair.round() == {} and pair.client.carried[1:] == [0, 0]
    pair.clock.advance(LAG_MS + 1)
    assert pair.led(1).isr_change(LAG_MS) is not None  # the check is live: without a fetch the follower would leave
    assert pair.round() == {} and pair.client.carried[-1] == 0
    for index in range(3):  # the settled fetch counted the follower as caught up now, as a full fetch does
        assert pair.led(index).isr_change(LAG_MS) is None
        assert pair.led(index).replication_view().replica.caught_up_ms_ago[FOLLOWER] == 0


def test_new_records_and_a_grown_high_watermark_travel_for_that_partition_alone(pair: Pair) -> None:
    pair.round()
    assert pair.round() == {}
    _append(pair.led(1), 5)
    answered = pair.round()  # the records, to the one partition that has them
    assert list(answered) == [1] and len(answered[1].records) > 0 and answered[1].high_watermark == 0
    follower = pair.follower.get(TOPIC, 1, leader=False)
    assert follower.offsets().log_end_offset == 5 and follower.high_watermark == 0
    answered = pair.round()  # the follower's new position alone travels; the HW it made grow comes back
    assert pair.client.carried[-1] == 1 and list(answered) == [1]
    assert answered[1].high_watermark == 5 and not len(answered[1].records)
    assert pair.led(1).high_watermark == 5 and follower.high_watermark == 5
    assert pair.round() == {} and pair.client.carried[-1] == 0


def _newer_epoch_of_partition_2(manager: PartitionManager) -> None:
    newer = _image({0: 1, 1: 1, 2: 2})
    manager.publish(None, newer)
    manager.reconcile(newer)


def test_a_refusal_is_answered_and_the_partition_waits_until_its_epoch_changes(pair: Pair) -> None:
    pair.round()
    assert pair.round() == {}
    _newer_epoch_of_partition_2(pair.leader)  # the leader learns of epoch 2 of partition 2 first
    answered = pair.round()
    assert list(answered) == [2] and answered[2].error_code == ErrorCode.FENCED_EPOCH
    assert pair.round() == {} and pair.round() == {}  # refused: not asked again within its backoff (60 s)
    session = pair.client.caller.replica_session
    assert sorted(session.entries) == [(TOPIC, 0), (TOPIC, 1)]
    _newer_epoch_of_partition_2(pair.follower)  # the follower's metadata catches up: asked again at once
    answered = pair.round()
    assert pair.client.carried[-1] == 1 and sorted(session.entries) == [(TOPIC, 0), (TOPIC, 1), (TOPIC, 2)]
    assert list(answered) == [2] and answered[2].error_code == 0
    assert pair.round() == {}


def test_a_refused_partition_is_asked_again_after_its_backoff(tmp_path: Path) -> None:
    pair = Pair(tmp_path, retry_backoff_ms=50)
    try:
        pair.round()
        _newer_epoch_of_partition_2(pair.leader)
        assert pair.round()[2].error_code == ErrorCode.FENCED_EPOCH
        assert pair.round() == {}  # within the backoff
        refusals: list[int] = []
        wait_until(lambda: refusals.extend(a.error_code for a in pair.round().values()) or refusals, timeout=10,
                   message="the refused partition is fetched again once its backoff passed")
        assert refusals == [ErrorCode.FENCED_EPOCH]
    finally:
        pair.close()


def test_a_partition_no_longer_followed_leaves_the_session(pair: Pair) -> None:
    pair.round()
    del pair.following[(TOPIC, 0)]
    assert pair.round() == {}
    session = pair.client.caller.replica_session
    assert sorted(session.entries) == [(TOPIC, 1), (TOPIC, 2)] and pair.client.carried[-1] == 0


def test_a_connections_session_belongs_to_one_follower(pair: Pair) -> None:
    pair.round()
    with pytest.raises(InvalidRequestError, match="fetch session is broker 2's"):
        pair.client.fetch_session(replica_id=3, max_wait_ms=0, max_bytes=1 << 20,
                                  partitions=[ReplicaWanted(TOPIC, 0, 0, 1, -1, 0)])
    assert pair.client.closed  # the two ends may disagree now: the connection is given up


def test_a_truncated_session_request_is_a_typed_refusal(pair: Pair) -> None:
    payload = data_fetch.FETCH_HEAD.pack(FOLLOWER, 0, 1, 1 << 20, 0) + b"\x05\x00"  # a removal count cut short
    chunks = pair.client.listener.answer(REPLICA_FETCH_SESSION, memoryview(payload), caller=pair.client.caller)
    data = b"".join(bytes(c) for c in chunks)
    assert int.from_bytes(data[:2], "little", signed=True) == ErrorCode.INVALID_REQUEST
    assert pair.client.caller.replica_session is None  # nothing of it was applied
