"""A driver for the pure ``GroupShard``: heartbeats and ticks applied the way the shell
applies them (decide, then ``finish``), every record kept (for replay checks) and the
one-owner invariant checked after every step."""
from __future__ import annotations

from typing import Iterable

from brokers.groups.core import GroupShard
from brokers.groups.messages import CommitOffsets, Heartbeat, HeartbeatAnswer, Outcome
from brokers.groups.model import CommittedOffset, GroupConfig, Subscription, TopicPartition
from brokers.groups.records import GroupRecord, OffsetRecord, Record

TOPICS = {"t": ("id-t", 6), "u": ("id-u", 2), "logs-a": ("id-la", 2), "logs-b": ("id-lb", 1)}


class Driver:
    def __init__(self, topics: dict[str, tuple[str, int]] | None = None, config: GroupConfig | None = None) -> None:
        self.shard = GroupShard(config=config or GroupConfig(heartbeat_interval_ms=1000, min_session_timeout_ms=100))
        self.topics = dict(TOPICS if topics is None else topics)
        self.now = 0
        self.wall = 1_700_000_000_000
        self.log: list[Record] = []
        self.epochs: dict[str, int] = {}
        self.owned: dict[str, frozenset[TopicPartition]] = {}

    def _finish(self, outcome: Outcome[object]) -> None:
        self.shard.finish(outcome, self.now)
        self.log.extend(outcome.records)
        self.check_one_owner()

    def heartbeat(self, member: str, *, group: str = "g", epoch: int | None = None, topics: Iterable[str] = ("t",),
                  regex: str = "", owned: Iterable[TopicPartition] | None = None, instance: str = "",
                  session_ms: int = 3000, rebalance_ms: int = 5000, assignor: str = "") -> HeartbeatAnswer:
        """Heartbeat as a well-behaved client: the last epoch it got (0 first), owning what
        it was last given unless ``owned`` says otherwise."""
        use_epoch = self.epochs.get(member, 0) if epoch is None else epoch
        now_owned = frozenset(owned) if owned is not None else self.owned.get(member, frozenset())
        hb = Heartbeat(group_id=group, member_id=member, member_epoch=use_epoch, instance_id=instance,
                       subscription=Subscription(tuple(sorted(topics)), regex), assignor=assignor, owned=now_owned,
                       session_timeout_ms=session_ms, rebalance_timeout_ms=rebalance_ms)
        outcome = self.shard.heartbeat(hb, self.now, self.topics)
        self._finish(outcome)
        answer = outcome.answer
        if answer.member_epoch >= 0:
            self.epochs[member] = answer.member_epoch
            self.owned[member] = answer.assignment  # a good client takes/revokes at once
        else:
            self.epochs.pop(member, None)
            self.owned.pop(member, None)
        return answer

    def tick(self, advance_ms: int = 0) -> tuple[Record, ...]:
        self.now += advance_ms
        outcome = self.shard.tick(self.now)
        self._finish(outcome)
        return outcome.records

    def commit(self, offsets: dict[TopicPartition, int], *, group: str = "g", member: str = "",
               epoch: int = -1, metadata: str = "") -> tuple[Record, ...]:
        request = CommitOffsets(group_id=group, member_id=member, member_epoch=epoch,
                                offsets={tp: CommittedOffset(o, metadata) for tp, o in offsets.items()})
        outcome = self.shard.commit_offsets(request, wall_ms=self.wall, topics=self.topics)
        self._finish(outcome)
        return outcome.records

    def converge(self, members: Iterable[str], rounds: int = 6, **kwargs: object) -> None:
        for _ in range(rounds):
            for member in members:
                self.heartbeat(member, **kwargs)  # type: ignore[arg-type]

    def check_one_owner(self) -> None:
        for group_id in {r.group_id for r in self.log}:
            group = self.shard.group(group_id)
            if group is None:
                continue
            seen: dict[TopicPartition, str] = {}
            for member in group.members.values():
                for tp in member.owns:
                    assert tp not in seen, f"{tp} owned by {seen[tp]} and {member.member_id}"
                    seen[tp] = member.member_id

    def assigned(self, member: str, group: str = "g") -> frozenset[TopicPartition]:
        group_state = self.shard.group(group)
        assert group_state is not None
        return group_state.members[member].assigned


def compact(records: list[Record]) -> list[Record]:
    """What a compaction leaves: the last record of each key, tombstones dropped, in log order."""
    last: dict[tuple[object, ...], int] = {}
    for i, record in enumerate(records):
        last[_key(record)] = i
    out = []
    for i, record in enumerate(records):
        if last[_key(record)] != i:
            continue
        if (isinstance(record, GroupRecord) and record.group is None) or (
                isinstance(record, OffsetRecord) and record.offset is None):
            continue
        out.append(record)
    return out


def _key(record: Record) -> tuple[object, ...]:
    if isinstance(record, GroupRecord):
        return ("group", record.group_id)
    return ("offset", record.group_id, record.topic, record.partition)


def all_partitions(topic: str, count: int) -> frozenset[TopicPartition]:
    return frozenset((topic, p) for p in range(count))
