"""Partition reassignment planning (brokers.controller.reassignment), records, delta and snapshots."""
from __future__ import annotations

import pytest

from brokers.controller.reassignment import (
    cancel_records,
    completion_changes,
    reassignment_records,
)
from brokers.metadata import records as r
from brokers.metadata.delta import MetadataDelta
from brokers.metadata.image import MetadataImage
from brokers.metadata.snapshot import decode_image, encode_image
from spark_log.errors import InvalidRequestError, UnknownTopicOrPartitionError
from tests.unit.brokers.metadata.helpers import broker, build, topic


def cluster(*partitions: tuple[int, ...]) -> MetadataImage:
    return build([broker(1), broker(2), broker(3), broker(4), *topic("a", list(partitions))])


def apply(image: MetadataImage, records: list[r.PartitionChangeRecord]) -> MetadataImage:
    return build(list(records), image)


def test_start_adds_target_first_and_records_the_pending_move() -> None:
    img = cluster((1, 2, 3))
    records = reassignment_records(img, "a", 0, [2, 3, 4])
    assert records == [r.PartitionChangeRecord(topic="a", partition=0, replicas=(2, 3, 4, 1),
                                                adding_replicas=(4,), removing_replicas=(1,))]
    info = apply(img, records).partition("a", 0)
    assert info is not None
    assert (info.replicas, info.isr, info.leader, info.leader_epoch, info.partition_epoch) == ((2, 3, 4, 1), (1, 2, 3), 1, 0, 1)
    assert info.reassigning and info.target == (2, 3, 4) and info.original == (2, 3, 1)


def test_completion_waits_for_every_target_replica_in_the_isr_then_moves_the_leader() -> None:
    img = apply(cluster((1, 2, 3)), reassignment_records(cluster((1, 2, 3)), "a", 0, [2, 3, 4]))
    assert completion_changes(img) == []  # 4 is not in the ISR yet
    img = apply(img, [r.PartitionChangeRecord(topic="a", partition=0, isr=(1, 2, 3, 4))])  # the leader expands
    done = completion_changes(img)
    assert done == [r.PartitionChangeRecord(topic="a", partition=0, leader=2, isr=(2, 3, 4), replicas=(2, 3, 4),
                                            adding_replicas=(), removing_replicas=())]
    info = apply(img, done).partition("a", 0)
    assert info is not None
    assert (info.replicas, info.isr, info.leader, info.leader_epoch, info.reassigning) == ((2, 3, 4), (2, 3, 4), 2, 1, False)


def test_completion_keeps_a_leader_that_stays_and_skips_dead_targets() -> None:
    img = cluster((1, 2))
    img = apply(img, reassignment_records(img, "a", 0, [1, 3]))
    img = apply(img, [r.PartitionChangeRecord(topic="a", partition=0, isr=(1, 2, 3))])
    assert completion_changes(img) == [r.PartitionChangeRecord(topic="a", partition=0, isr=(1, 3), replicas=(1, 3),
                                                               adding_replicas=(), removing_replicas=())]
    # the leader is removed and the only live target member ... is fenced: wait
    img2 = cluster((1,))
    img2 = apply(img2, reassignment_records(img2, "a", 0, [2]))
    img2 = apply(img2, [r.PartitionChangeRecord(topic="a", partition=0, isr=(1, 2))])
    fenced = build([r.FenceBrokerRecord(broker_id=2, broker_epoch=1)], img2)
    assert completion_changes(fenced) == []
    assert completion_changes(img2)[0].leader == 2
    assert completion_changes(img2, only=lambda t, p: t != "a") == []


def test_shrinking_to_a_subset_of_the_isr_completes_at_once() -> None:
    img = cluster((1, 2, 3))
    img = apply(img, reassignment_records(img, "a", 0, [3, 1]))
    assert completion_changes(img) == [r.PartitionChangeRecord(topic="a", partition=0, isr=(1, 3), replicas=(3, 1),
                                                               adding_replicas=(), removing_replicas=())]


def test_same_target_is_a_noop_and_a_new_target_replaces_keeping_the_original() -> None:
    img = cluster((1, 2, 3))
    assert reassignment_records(img, "a", 0, [1, 2, 3]) == []
    img = apply(img, reassignment_records(img, "a", 0, [2, 3, 4]))
    assert reassignment_records(img, "a", 0, [2, 3, 4]) == []
    replaced = reassignment_records(img, "a", 0, [4, 1])
    assert replaced == [r.PartitionChangeRecord(topic="a", partition=0, replicas=(4, 1, 2, 3),
                                                adding_replicas=(4,), removing_replicas=(2, 3))]
    # replacing drops an added replica that had joined the ISR from the ISR too
    joined = apply(img, [r.PartitionChangeRecord(topic="a", partition=0, isr=(1, 2, 3, 4))])
    again = reassignment_records(joined, "a", 0, [1, 2, 3])
    assert again[0].replicas == (1, 2, 3) and again[0].isr == (1, 2, 3) and again[0].adding_replicas == ()


def test_cancel_restores_the_original_replicas() -> None:
    img = cluster((1, 2, 3))
    assert cancel_records(img, "a", 0) == []  # nothing pending: a no-op
    assert reassignment_records(img, "a", 0, None) == []
    moving = apply(img, reassignment_records(img, "a", 0, [2, 3, 4]))
    joined = apply(moving, [r.PartitionChangeRecord(topic="a", partition=0, isr=(1, 2, 3, 4))])
    # an added replica that came to lead (failover) hands leadership back to an original one
    led_by_new = apply(joined, [r.PartitionChangeRecord(topic="a", partition=0, leader=4)])
    cancel = reassignment_records(led_by_new, "a", 0, [])
    assert cancel == [r.PartitionChangeRecord(topic="a", partition=0, leader=2, isr=(1, 2, 3), replicas=(2, 3, 1),
                                              adding_replicas=(), removing_replicas=())]
    info = apply(led_by_new, cancel).partition("a", 0)
    assert info is not None and set(info.replicas) == {1, 2, 3} and not info.reassigning
    orphan = apply(moving, [r.PartitionChangeRecord(topic="a", partition=0, leader=4, isr=(4,))])
    with pytest.raises(InvalidRequestError, match="no original replica"):
        cancel_records(orphan, "a", 0)


@pytest.mark.parametrize(
    ("topic_name", "partition", "target", "error", "text"),
    [
        ("nope", 0, [1], UnknownTopicOrPartitionError, "unknown topic"),
        ("a", 5, [1], UnknownTopicOrPartitionError, "no partition 5"),
        ("a", 0, [1, 2, 2], InvalidRequestError, "more than once"),
        ("a", 0, [1, 9], InvalidRequestError, r"\[9\] .* not registered"),
        ("a", 0, [-1], InvalidRequestError, "not valid broker ids"),
        ("a", 0, [1, "2"], InvalidRequestError, "must be broker ids"),
    ],
)
def test_refusals(topic_name: str, partition: int, target: list, error: type, text: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(error, match=text):
        reassignment_records(cluster((1, 2, 3)), topic_name, partition, target)


def test_records_snapshot_and_local_changes_keep_the_pending_move() -> None:
    img = cluster((1, 2, 3))
    (start,) = reassignment_records(img, "a", 0, [2, 3, 4])
    assert r.decode(r.encode(start)) == start
    plain = r.PartitionChangeRecord(topic="a", partition=0, isr=(1, 2))
    assert r.decode(r.encode(plain)) == plain and plain.adding_replicas is None
    # a record written before the fields existed decodes with defaults
    old = b'{"type":"partition","v":1,"topic":"a","partition":0,"replicas":[1],"isr":[1],"leader":1}'
    decoded = r.decode(old)
    assert isinstance(decoded, r.PartitionRecord) and decoded.adding_replicas == () == decoded.removing_replicas
    moving = apply(img, [start])
    assert decode_image(encode_image(moving)) == moving
    assert decode_image(encode_image(moving)).partition("a", 0).removing_replicas == (1,)  # type: ignore[union-attr]
    # broker 4 starts following; completing removes broker 1's replica
    delta = MetadataDelta(img)
    delta.replay(start)
    changes = delta.local_changes(4, delta.apply())
    assert [(t, p) for t, p, _ in changes.followers] == [("a", 0)] and changes.removed == []
    joined = apply(moving, [r.PartitionChangeRecord(topic="a", partition=0, isr=(1, 2, 3, 4))])
    delta = MetadataDelta(joined)
    for record in completion_changes(joined):
        delta.replay(record)
    after = delta.apply()
    assert delta.local_changes(1, after).removed == [("a", 0)]
    assert [(t, p) for t, p, _ in delta.local_changes(2, after).leaders] == [("a", 0)]
