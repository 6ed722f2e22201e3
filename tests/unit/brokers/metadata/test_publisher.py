"""MetadataListener: applies committed entries, publishes (delta, image), restores."""
from __future__ import annotations

import threading

import pytest

from brokers.metadata import records as r
from brokers.metadata.delta import MetadataDelta
from brokers.metadata.image import MetadataImage
from brokers.metadata.publisher import MetadataListener
from brokers.metadata.snapshot import encode_image
from spark_log.errors import RequestTimeoutError

from .helpers import broker, build, topic


def feed(listener: MetadataListener, records: list[r.MetadataRecord], start: int = 0) -> None:
    for offset, record in enumerate(records, start):
        listener.apply(offset, 1, r.encode(record))


def test_publishers_see_each_record_in_order() -> None:
    listener = MetadataListener()
    seen: list[tuple[int, int]] = []
    listener.add_publisher(lambda delta, image: seen.append((delta.image.offset, image.offset)))
    feed(listener, [broker(1), *topic("a", [(1,)])])
    assert seen == [(-1, 0), (0, 1), (1, 2), (2, 3)]
    assert listener.image.topics["a"].partitions[0].leader == 1


def test_bad_entries_are_skipped_alike() -> None:
    listener = MetadataListener()
    listener.apply(0, 1, b"garbage")
    listener.apply(1, 1, r.encode(r.FenceBrokerRecord(broker_id=5, broker_epoch=1)))
    assert listener.image.offset == 1 and not listener.image.brokers


def test_a_failing_publisher_does_not_stop_others() -> None:
    listener = MetadataListener()
    seen: list[int] = []

    def broken(delta: MetadataDelta, image: MetadataImage) -> None:
        raise RuntimeError("boom")

    listener.add_publisher(broken)
    listener.add_publisher(lambda d, i: seen.append(i.offset))
    feed(listener, [broker(1)])
    assert seen == [0]


def test_late_publisher_gets_the_whole_image() -> None:
    listener = MetadataListener()
    feed(listener, [broker(1), *topic("a", [(1,)])])
    calls: list[MetadataDelta] = []
    listener.add_publisher(lambda delta, image: calls.append(delta))
    assert len(calls) == 1 and calls[0].changed_topics() == {"a"}
    assert [(t, p) for t, p, _ in calls[0].local_changes(1, listener.image).leaders] == [("a", 0)]


def test_snapshot_and_restore() -> None:
    source = MetadataListener()
    feed(source, [broker(1), *topic("a", [(1,)])])
    target = MetadataListener()
    feed(target, [broker(2), *topic("old", [(2,)])])
    deltas: list[MetadataDelta] = []
    target.add_publisher(lambda delta, image: deltas.append(delta))
    deltas.clear()
    target.restore(4, source.snapshot())
    assert target.image == source.image
    assert set(deltas[0].removed_topics()) == {"old"}


def test_wait_for() -> None:
    listener = MetadataListener()
    with pytest.raises(RequestTimeoutError):
        listener.wait_for(lambda image: "a" in image.topics, timeout_s=0.05)
    thread = threading.Thread(target=feed, args=(listener, [broker(1), *topic("a", [(1,)])]))
    thread.start()
    image = listener.wait_for(lambda image: "a" in image.topics, timeout_s=5)
    thread.join()
    assert "a" in image.topics


def test_leader_listeners() -> None:
    listener = MetadataListener()
    seen: list[tuple[int | None, int]] = []
    listener.add_leader_listener(lambda leader, epoch: seen.append((leader, epoch)))
    listener.on_leader_change(2, 5)
    assert seen == [(2, 5)] and listener.leader_id == 2 and listener.leader_epoch == 5


def test_restore_from_encoded_image() -> None:
    img = build([broker(1)])
    listener = MetadataListener()
    listener.restore(7, encode_image(img))
    assert listener.image.offset == 6 and listener.image.brokers == img.brokers
