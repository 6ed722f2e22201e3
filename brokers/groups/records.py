"""The records of the internal topic ``__consumer_offsets`` and their byte encoding.

The topic is compacted (``cleanup.policy=compact``), so every record is keyed and the
latest record of a key says everything about it:

- ``OffsetRecord``: key ``["offset", group, topic, partition]``, one per committed
  partition; value ``{"v": 1, "offset", "metadata", "ts", "epoch", "tid"}`` (``tid``: the
  topic id it was committed for; records without it, written before it was kept, read
  as ``""``, unknown).
- ``GroupRecord``: key ``["group", group]``, one per consumer group; value the whole
  group (epochs, assignor, subscription metadata, members with their current and target
  assignments).
- ``PendingRecord``: key ``["pending", group, transactional id]``, the partitions of the
  group an open transaction holds offsets for (``send_offsets_to_transaction``, KIP-447);
  value ``{"v": 1, "parts": [[topic, partition], ...], "until": wall ms, "tids": {topic:
  topic id}}`` (the ids the topics had when the offsets were added), tombstoned when the
  transaction's offsets are committed or it aborts.
- A null value is a tombstone: the offset, the group's membership state, or the hold is deleted.

Keys and values are compact UTF-8 JSON (keys as arrays, so their bytes are canonical:
the same key always encodes to the same bytes, which is what compaction compares).  A
record never affects another key (a group's tombstone does not delete its offsets; a
delete writes one tombstone per offset), so replaying a compacted log gives exactly the
state of replaying the whole log: compaction may drop any record whose key has a later
one, and tombstones, without changing the outcome.

Rows travel as frames of the bytes schema (``spark_log.schemas.BYTES_SCHEMA``: key,
value, headers, timestamp), one frame per coordinator decision, so a decision is
appended atomically.  ``decode`` raises ``CorruptRecordError`` on anything it cannot read.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Sequence

import pyarrow as pa

from spark_log.errors import CorruptRecordError
from spark_log.frame import Codec, decode_batch, encode_batch
from spark_log.schemas import BYTES_SCHEMA

from .model import CommittedOffset, Group, Member, MemberState, Subscription, TopicPartition

__all__ = ["GroupRecord", "OffsetRecord", "PendingRecord", "Record", "encode", "decode", "to_frame", "rows_frame",
           "from_frame"]

_VERSION = 1


@dataclass(frozen=True, slots=True)
class GroupRecord:
    group_id: str
    group: Group | None  # None: tombstone


@dataclass(frozen=True, slots=True)
class OffsetRecord:
    group_id: str
    topic: str
    partition: int
    offset: CommittedOffset | None  # None: tombstone


@dataclass(frozen=True, slots=True)
class PendingRecord:
    group_id: str
    transactional_id: str
    partitions: frozenset[TopicPartition] | None  # None: tombstone (released)
    until_ms: int = -1  # wall clock: the hold ends then at the latest
    topic_ids: tuple[tuple[str, str], ...] = ()  # (topic, its id when the offsets were added), sorted


Record = GroupRecord | OffsetRecord | PendingRecord


def _dumps(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False).encode("utf-8")


def _parts(assignment: Iterable[TopicPartition]) -> list[list[Any]]:
    return [[t, p] for t, p in sorted(assignment)]


def _member_json(m: Member) -> dict[str, Any]:
    return {
        "id": m.member_id, "instance": m.instance_id, "client": m.client_id, "host": m.client_host,
        "epoch": m.epoch, "prev": m.previous_epoch, "state": m.state.value,
        "assigned": _parts(m.assigned), "revoking": _parts(m.pending_revocation), "target": _parts(m.target),
        "topics": list(m.subscription.topics), "regex": m.subscription.regex, "assignor": m.assignor,
        "rebalance_ms": m.rebalance_timeout_ms, "session_ms": m.session_timeout_ms, "left": m.left,
    }


def _group_json(g: Group) -> dict[str, Any]:
    return {
        "v": _VERSION, "epoch": g.group_epoch, "assignment_epoch": g.assignment_epoch, "assignor": g.assignor,
        "topics": {t: [tid, n] for t, (tid, n) in sorted(g.topics.items())},
        "members": [_member_json(m) for _, m in sorted(g.members.items())],
    }


def encode(record: Record) -> tuple[bytes, bytes | None]:
    """``(key, value)`` bytes of ``record`` (value None for a tombstone)."""
    if isinstance(record, OffsetRecord):
        key = _dumps(["offset", record.group_id, record.topic, record.partition])
        o = record.offset
        value = None if o is None else _dumps(
            {"v": _VERSION, "offset": o.offset, "metadata": o.metadata, "ts": o.commit_timestamp_ms, "epoch": o.leader_epoch,
             "tid": o.topic_id})
        return key, value
    if isinstance(record, PendingRecord):
        key = _dumps(["pending", record.group_id, record.transactional_id])
        return key, None if record.partitions is None else _dumps(
            {"v": _VERSION, "parts": _parts(record.partitions), "until": record.until_ms,
             "tids": dict(record.topic_ids)})
    key = _dumps(["group", record.group_id])
    return key, None if record.group is None else _dumps(_group_json(record.group))


def _assignment(value: Any) -> frozenset[TopicPartition]:
    return frozenset((str(t), int(p)) for t, p in value)


def _member(m: dict[str, Any]) -> Member:
    return Member(
        member_id=str(m["id"]), instance_id=str(m["instance"]), client_id=str(m["client"]), client_host=str(m["host"]),
        epoch=int(m["epoch"]), previous_epoch=int(m["prev"]), state=MemberState(m["state"]),
        assigned=_assignment(m["assigned"]), pending_revocation=_assignment(m["revoking"]),
        target=_assignment(m["target"]),
        subscription=Subscription(tuple(str(t) for t in m["topics"]), str(m["regex"])), assignor=str(m["assignor"]),
        rebalance_timeout_ms=int(m["rebalance_ms"]), session_timeout_ms=int(m["session_ms"]), left=bool(m["left"]),
    )


def decode(key: bytes, value: bytes | None) -> Record:
    """The record stored as ``(key, value)``; ``CorruptRecordError`` if it is not one."""
    try:
        parts = json.loads(key)
        kind = parts[0]
        if kind == "offset" and len(parts) == 4:
            group_id, topic, partition = str(parts[1]), str(parts[2]), int(parts[3])
            if value is None:
                return OffsetRecord(group_id, topic, partition, None)
            v = json.loads(value)
            return OffsetRecord(group_id, topic, partition,
                                CommittedOffset(int(v["offset"]), str(v["metadata"]), int(v["ts"]), int(v["epoch"]),
                                                str(v.get("tid", ""))))
        if kind == "pending" and len(parts) == 3:
            group_id, transactional_id = str(parts[1]), str(parts[2])
            if value is None:
                return PendingRecord(group_id, transactional_id, None)
            v = json.loads(value)
            return PendingRecord(group_id, transactional_id, _assignment(v["parts"]), int(v["until"]),
                                 tuple(sorted((str(t), str(i)) for t, i in v.get("tids", {}).items())))
        if kind == "group" and len(parts) == 2:
            group_id = str(parts[1])
            if value is None:
                return GroupRecord(group_id, None)
            g = json.loads(value)
            members = [_member(m) for m in g["members"]]
            return GroupRecord(group_id, Group(
                group_id=group_id, group_epoch=int(g["epoch"]), assignment_epoch=int(g["assignment_epoch"]),
                assignor=str(g["assignor"]), members={m.member_id: m for m in members},
                topics={str(t): (str(tid), int(n)) for t, (tid, n) in g["topics"].items()}))
    except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
        raise CorruptRecordError(f"not a group coordinator record (key {key[:80]!r}): {exc}") from None
    raise CorruptRecordError(f"not a group coordinator record: unknown key {key[:80]!r}")


def to_frame(records: Sequence[Record], *, timestamp_ms: int) -> bytes:
    """One frame (LZ4, not idempotent) holding ``records`` in order."""
    return rows_frame([encode(record) for record in records], timestamp_ms=timestamp_ms)


def rows_frame(rows: Sequence[tuple[bytes, bytes | None]], *, timestamp_ms: int) -> bytes:
    """One frame (LZ4, not idempotent) of keyed ``(key, value)`` rows of the bytes schema: how a
    coordinator (groups, transactions) appends one decision's records atomically."""
    n = len(rows)
    batch = pa.RecordBatch.from_arrays(
        [pa.array([k for k, _ in rows], pa.binary()), pa.array([v for _, v in rows], pa.binary()),
         pa.nulls(n, BYTES_SCHEMA.field("headers").type), pa.array([timestamp_ms] * n, pa.timestamp("ms"))],
        schema=BYTES_SCHEMA)
    return encode_batch(batch, compression=Codec.LZ4, timestamp_ms=timestamp_ms)


def from_frame(frame: bytes | memoryview | pa.Buffer) -> Iterator[tuple[bytes, bytes | None]]:
    """The ``(key, value)`` rows of one stored frame, in order.  Columns are found by name,
    so frames that carry more (e.g. per-row offsets after compaction) read the same."""
    batch = decode_batch(frame, BYTES_SCHEMA)
    keys = batch.column("key").to_pylist()
    values = batch.column("value").to_pylist()
    for key, value in zip(keys, values):
        if key is None:
            raise CorruptRecordError("a group coordinator record without a key")
        yield key, value
