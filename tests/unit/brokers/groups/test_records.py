"""Records of __consumer_offsets (brokers/groups/records.py): the byte codec, frames, and
the property the compacted topic relies on: replaying the log, or what compaction leaves
of it, gives the same groups and offsets."""
from __future__ import annotations

import random

import pytest

from brokers.groups.core import GroupShard
from brokers.groups.messages import LEAVE
from brokers.groups.model import CommittedOffset, Group, Member, MemberState, Subscription
from brokers.groups.records import GroupRecord, OffsetRecord, decode, encode, from_frame, to_frame
from spark_log.errors import CorruptRecordError
from spark_log.frame import iter_frames

from .support import Driver, compact


def _group() -> Group:
    member = Member(member_id="m-1", instance_id="i", client_id="c", client_host="h", epoch=4, previous_epoch=3,
                    state=MemberState.UNREVOKED, assigned=frozenset({("t", 0)}), pending_revocation=frozenset({("t", 1)}),
                    target=frozenset({("t", 0), ("u", 2)}), subscription=Subscription(("t", "u"), "x.*"),
                    assignor="range", rebalance_timeout_ms=9, session_timeout_ms=8, left=True)
    return Group(group_id="g", group_epoch=5, assignment_epoch=5, assignor="range", members={"m-1": member},
                 topics={"t": ("id-t", 2), "u": ("id-u", 3)})


@pytest.mark.parametrize("record", [
    OffsetRecord("g", "t", 3, CommittedOffset(42, "meta ü", 1700, 7)),
    OffsetRecord("g", "t", 3, CommittedOffset(42, "", 1700, 7, "id-t")),
    OffsetRecord("g", "t", 3, None),
    GroupRecord("g", _group()),
    GroupRecord("g", None),
    GroupRecord("g", Group(group_id="g")),
])
def test_records_round_trip(record: OffsetRecord | GroupRecord) -> None:
    key, value = encode(record)
    assert decode(key, value) == record


def test_an_offset_record_written_before_topic_ids_reads_without_one() -> None:
    key, _ = encode(OffsetRecord("g", "t", 3, None))
    old_value = b'{"epoch":7,"metadata":"","offset":42,"ts":1700,"v":1}'
    assert decode(key, old_value) == OffsetRecord("g", "t", 3, CommittedOffset(42, "", 1700, 7, ""))


def test_keys_are_canonical_bytes() -> None:
    """Compaction compares key bytes: the same key must always encode the same."""
    a, _ = encode(OffsetRecord("g", "t", 1, CommittedOffset(1)))
    b, _ = encode(OffsetRecord("g", "t", 1, None))
    c, _ = encode(OffsetRecord("g", "t", 2, None))
    assert a == b != c
    assert encode(GroupRecord("g", _group()))[0] == encode(GroupRecord("g", None))[0]


@pytest.mark.parametrize("key,value", [
    (b"not json", None),
    (b'["offset","g","t"]', b"{}"),
    (b'["offset","g","t",1]', b'{"v":1}'),
    (b'["group","g"]', b'{"members":"x"}'),
    (b'["what","g"]', None),
])
def test_undecodable_records_raise_corrupt_record(key: bytes, value: bytes | None) -> None:
    with pytest.raises(CorruptRecordError):
        decode(key, value)


def test_frames_hold_records_in_order_with_null_tombstones() -> None:
    records: list[OffsetRecord | GroupRecord] = [OffsetRecord("g", "t", 0, CommittedOffset(5)),
                                                 OffsetRecord("g", "t", 0, None), GroupRecord("g", None)]
    frame = to_frame(records, timestamp_ms=1234)
    [(position, header)] = list(iter_frames(frame))
    assert header.record_count == 3 and header.first_timestamp == 1234
    assert [decode(k, v) for k, v in from_frame(frame)] == records


def _replayed(records: list[OffsetRecord | GroupRecord]) -> GroupShard:
    shard = GroupShard()
    for record in records:
        # through the bytes, as a load does
        key, value = encode(record)
        shard.apply(decode(key, value), 0)
    return shard


@pytest.mark.parametrize("seed", range(10))
def test_replay_of_the_log_or_of_its_compaction_gives_the_same_state(seed: int) -> None:
    rng = random.Random(seed)
    d = Driver()
    members = ["a", "b", "c", "d"]
    live: set[str] = set()
    for _ in range(60):
        action = rng.random()
        member = rng.choice(members)
        try:
            if action < 0.45:
                d.heartbeat(member, group=rng.choice(["g1", "g2"]) if member not in live else "g1")
                live.add(member)
            elif action < 0.55 and member in live:
                d.heartbeat(member, group="g1", epoch=LEAVE)
                live.discard(member)
            elif action < 0.8:
                d.commit({("t", rng.randrange(6)): rng.randrange(1000)}, group="simple-" + str(rng.randrange(3)))
            elif action < 0.9:
                d.tick(rng.choice([0, 1000, 4000]))
                live = {m for m in live if (g := d.shard.group("g1")) is not None and m in g.members}
            else:
                group = "simple-" + str(rng.randrange(3))
                outcome = d.shard.delete_group(group)
                d.shard.finish(outcome, d.now)
                d.log.extend(outcome.records)
        except Exception as exc:  # typed refusals (unknown group, fenced...) are part of the walk
            assert exc.__class__.__module__ == "spark_log.errors", exc
    expected = d.shard.state_for_test()
    assert _replayed(d.log).state_for_test() == expected
    assert _replayed(compact(d.log)).state_for_test() == expected
    assert len(compact(d.log)) <= len(d.log)
