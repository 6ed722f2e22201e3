"""Offsets and offset ranges: the pure planning math of the spark-log source.

Nothing here does IO; every function is deterministic in its arguments, so a
micro-batch that Spark replays from its offset log plans exactly the same ranges.

Offsets as Spark checkpoints them
---------------------------------
An offset of the source is a JSON object ``{topic: {partition: next_offset}}``, the
shape of Spark's Kafka source (partition numbers are JSON strings).  ``next_offset`` is
the offset of the first record *not yet* covered.  ``to_json`` always emits topics and
partitions in sorted order, because Spark compares offsets by their JSON text.

In ``startingOffsets`` / ``endingOffsets`` JSON, ``-2`` means "earliest" and ``-1``
means "latest", as for Kafka.

Ranges
------
``plan_ranges(start, end)`` turns two offsets into half-open ``OffsetRange``\\ s
``[start, end)``, one per topic partition with new records, in sorted order, split so
that there are at least ``min_partitions`` ranges and none holds more than
``max_records_per_partition`` records.  A partition present in ``end`` and absent from
``start`` was discovered during the batch and is read from offset 0 (as Kafka's source
reads new partitions from the earliest offset).

Read limits
-----------
``limit_rows`` and ``limit_bytes`` cap how far ``latestOffset`` may advance, prorated
over partitions by their backlog as Spark's Kafka source does (a partition's share is
floored, or rounded up when below one record, so every partition with data advances).
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Mapping, NamedTuple

from spark_log.errors import InvalidConfigError

__all__ = [
    "EARLIEST",
    "LATEST",
    "TopicPartition",
    "Offsets",
    "JsonOffsets",
    "OffsetRange",
    "to_json",
    "from_json",
    "parse_spec",
    "resolve",
    "check_order",
    "from_group",
    "plan_ranges",
    "limit_rows",
    "limit_bytes",
    "cap",
]

EARLIEST = -2
LATEST = -1
MAX_OFFSET = 2**63 - 1  # offsets are 64-bit signed integers on the wire
MAX_PARTITION = 2**31 - 1  # partition numbers are 32-bit signed integers


class TopicPartition(NamedTuple):
    topic: str
    partition: int


Offsets = dict[TopicPartition, int]
JsonOffsets = dict[str, dict[str, int]]  # the checkpoint's form: {"topic": {"partition": next_offset}}


@dataclass(frozen=True, slots=True)
class OffsetRange:
    """Records ``[start, end)`` of one topic partition: one Spark task reads it."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start


def _sorted(offsets: Mapping[TopicPartition, int]) -> list[tuple[TopicPartition, int]]:
    return sorted(offsets.items(), key=lambda item: (item[0].topic, item[0].partition))


def to_json(offsets: Mapping[TopicPartition, int]) -> JsonOffsets:
    """The canonical JSON-able dict of ``offsets`` (sorted topics, sorted partitions)."""
    out: dict[str, dict[str, int]] = {}
    for tp, offset in _sorted(offsets):
        out.setdefault(tp.topic, {})[str(tp.partition)] = int(offset)
    return out


def from_json(value: Mapping[str, Mapping[str, int]] | str) -> Offsets:
    """Parse an offset dict (or its JSON text) written by ``to_json``.

    Raises ``InvalidConfigError`` when the shape is not ``{topic: {partition: int}}``.
    """
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise InvalidConfigError(f"offsets are not valid JSON: {exc}") from None
    if not isinstance(value, Mapping):
        raise InvalidConfigError(f"offsets must be a JSON object of topics, got {value!r}")
    out: Offsets = {}
    for topic, partitions in value.items():
        if not isinstance(partitions, Mapping):
            raise InvalidConfigError(f"offsets of topic {topic!r} must be a JSON object, got {partitions!r}")
        for partition, offset in partitions.items():
            try:
                number = int(partition)
            except (TypeError, ValueError):
                raise InvalidConfigError(f"partition {partition!r} of topic {topic!r} is not an integer") from None
            if isinstance(offset, bool) or not isinstance(offset, int):
                raise InvalidConfigError(f"offset of {topic}-{partition} must be an integer, got {offset!r}")
            out[TopicPartition(str(topic), number)] = offset
    return out


def parse_spec(option: str, text: str, *, allow: tuple[str, ...]) -> str | Offsets:
    """Parse a ``startingOffsets``/``endingOffsets`` value.

    Returns one of the words in ``allow`` ("earliest", "latest", "group") or a
    per-partition dict whose values are offsets in ``[0, MAX_OFFSET]`` or
    ``EARLIEST``/``LATEST``, partitions in ``[0, MAX_PARTITION]``.  Raises
    ``InvalidConfigError`` naming ``option`` for anything else.
    """
    word = text.strip().lower()
    if word in ("earliest", "latest", "group"):
        if word not in allow:
            raise InvalidConfigError(f"option '{option}': '{word}' is not allowed here", key=option)
        return word
    try:
        offsets = from_json(text)
    except InvalidConfigError as exc:
        raise InvalidConfigError(
            f"option '{option}' must be {' or '.join(repr(a) for a in allow)} or JSON like "
            f'{{"topic": {{"0": 23, "1": -2}}}}: {exc.message}',
            key=option,
        ) from None
    for tp, offset in offsets.items():
        if not 0 <= tp.partition <= MAX_PARTITION:
            raise InvalidConfigError(
                f"option '{option}': partition {tp.partition} of topic {tp.topic!r} is not in [0, {MAX_PARTITION}]", key=option)
        if offset > MAX_OFFSET:
            raise InvalidConfigError(
                f"option '{option}': offset {offset} of {tp.topic}-{tp.partition} is beyond {MAX_OFFSET} (a 64-bit integer)",
                key=option)
        if offset < EARLIEST:
            raise InvalidConfigError(f"option '{option}': offset {offset} of {tp.topic}-{tp.partition} is invalid", key=option)
        if offset == EARLIEST and "earliest" not in allow:
            raise InvalidConfigError(f"option '{option}': -2 (earliest) is not allowed here", key=option)
        if offset == LATEST and "latest" not in allow:
            raise InvalidConfigError(f"option '{option}': -1 (latest) is not allowed here", key=option)
    return offsets


def resolve(spec: str | Offsets, earliest: Offsets, latest: Offsets, *, option: str) -> Offsets:
    """Concrete offsets for every partition in ``latest`` given a parsed ``spec``.

    ``earliest``/``latest`` hold the log start and end offsets of the partitions read.
    A JSON spec must name every one of them (as Kafka requires) and nothing else;
    ``-2``/``-1`` become the partition's earliest/latest offset.
    """
    if spec == "earliest":
        return dict(earliest)
    if spec == "latest":
        return dict(latest)
    assert isinstance(spec, dict)
    unknown = sorted(set(spec) - set(latest))
    missing = sorted(set(latest) - set(spec))
    if unknown:
        names = ", ".join(f"{t}-{p}" for t, p in unknown)
        raise InvalidConfigError(f"option '{option}' names partitions that are not read: {names}", key=option)
    if missing:
        names = ", ".join(f"{t}-{p}" for t, p in missing)
        raise InvalidConfigError(f"option '{option}' does not give an offset for: {names}", key=option)
    out: Offsets = {}
    for tp, offset in spec.items():
        out[tp] = earliest[tp] if offset == EARLIEST else latest[tp] if offset == LATEST else offset
    return out


def check_order(begin: Mapping[TopicPartition, int], end: Mapping[TopicPartition, int], *, starting: str) -> None:
    """Refuse a batch read whose start is after its end in some partition (Kafka's source
    asserts ``fromOffset <= untilOffset``): ``InvalidConfigError`` naming ``starting`` (the
    option the start came from) and ``endingOffsets``, listing every such partition."""
    after = [(tp, offset, end[tp]) for tp, offset in _sorted(begin) if tp in end and offset > end[tp]]
    if after:
        names = ", ".join(f"{tp.topic}-{tp.partition} starts at {b} > {e}" for tp, b, e in after)
        raise InvalidConfigError(
            f"option '{starting}' starts after option 'endingOffsets' ends: {names}", key=starting)


def from_group(committed: Mapping[TopicPartition, int], earliest: Offsets, latest: Offsets) -> Offsets:
    """``startingOffsets=group``: every partition in ``latest`` starts at the group's
    committed offset, clamped to [earliest, latest] (records deleted by retention are gone;
    an offset past the end waits there); a partition the group has no offset for starts
    at its earliest offset (nothing skipped)."""
    out: Offsets = {}
    for tp, end in latest.items():
        start = earliest.get(tp, 0)
        out[tp] = min(max(committed.get(tp, start), start), end)
    return out


def plan_ranges(
    start: Mapping[TopicPartition, int],
    end: Mapping[TopicPartition, int],
    *,
    min_partitions: int = 1,
    max_records_per_partition: int | None = None,
) -> list[OffsetRange]:
    """Deterministic ``[start, end)`` ranges for one micro-batch (see module docstring).

    Partitions absent from ``end`` are not read; partitions absent from ``start`` start
    at 0.  Empty ranges are dropped.  When there are fewer than ``min_partitions``
    ranges, each range is split into pieces in proportion to its size (Spark's
    ``KafkaOffsetRangeCalculator`` rule); pieces never exceed
    ``max_records_per_partition``.  Pieces of one partition differ by at most one record.
    """
    whole = [
        OffsetRange(tp.topic, tp.partition, start.get(tp, 0), offset)
        for tp, offset in _sorted(end)
        if offset > start.get(tp, 0)
    ]
    total = sum(r.size for r in whole)
    needs_split = len(whole) < min_partitions or (
        max_records_per_partition is not None and any(r.size > max_records_per_partition for r in whole)
    )
    if not needs_split or total == 0:
        return whole
    out: list[OffsetRange] = []
    for r in whole:
        parts = 1
        if len(whole) < min_partitions:
            parts = max(parts, math.ceil(r.size / total * min_partitions))
        if max_records_per_partition is not None:
            parts = max(parts, math.ceil(r.size / max_records_per_partition))
        parts = min(parts, r.size)
        base, extra = divmod(r.size, parts)
        offset = r.start
        for i in range(parts):
            step = base + (1 if i < extra else 0)
            out.append(OffsetRange(r.topic, r.partition, offset, offset + step))
            offset += step
    return out


def _prorate(backlog: Mapping[TopicPartition, int], budget: float) -> dict[TopicPartition, int]:
    """Records each partition may advance: ``budget`` split by backlog share."""
    total = sum(backlog.values())
    out: dict[TopicPartition, int] = {}
    for tp, size in backlog.items():
        if total <= budget:
            out[tp] = size
            continue
        share = budget * size / total
        granted = math.ceil(share) if share < 1 else math.floor(share)
        out[tp] = min(size, granted)
    return out


def limit_rows(start: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int], max_rows: int) -> Offsets:
    """``latest`` capped so that at most about ``max_rows`` records are read.

    The cap may be exceeded by at most one record per partition (partitions whose
    share is below one record still advance by one, so a trigger always makes progress).
    """
    backlog = {tp: max(0, end - start.get(tp, 0)) for tp, end in latest.items()}
    grant = _prorate(backlog, max_rows)
    return {tp: start.get(tp, 0) + grant[tp] if backlog[tp] else latest[tp] for tp in latest}


def limit_bytes(
    start: Mapping[TopicPartition, int],
    latest: Mapping[TopicPartition, int],
    max_bytes: int,
    bytes_per_record: Mapping[TopicPartition, float],
) -> Offsets:
    """``latest`` capped so that about ``max_bytes`` are read, a soft limit.

    ``bytes_per_record`` is each partition's average stored record size (a missing or
    non-positive entry counts as 1 byte).  The byte budget is split by each partition's
    share of the backlog in bytes, then turned into records; every partition with
    data advances by at least one record.
    """
    backlog = {tp: max(0, end - start.get(tp, 0)) for tp, end in latest.items()}
    size = {tp: max(1.0, float(bytes_per_record.get(tp, 1.0))) for tp in latest}
    backlog_bytes = {tp: backlog[tp] * size[tp] for tp in latest}
    total = sum(backlog_bytes.values())
    out: Offsets = {}
    for tp in latest:
        begin = start.get(tp, 0)
        if not backlog[tp] or total <= max_bytes:
            out[tp] = latest[tp]
            continue
        records = math.floor(max_bytes * (backlog_bytes[tp] / total) / size[tp])
        out[tp] = begin + min(backlog[tp], max(1, records))
    return out


def cap(offsets: Mapping[TopicPartition, int], ceiling: Mapping[TopicPartition, int]) -> Offsets:
    """``offsets`` limited to ``ceiling`` (Trigger.AvailableNow's target).

    Partitions absent from ``ceiling`` are dropped: they appeared after the target was
    fixed and are left for a later query.
    """
    return {tp: min(offset, ceiling[tp]) for tp, offset in offsets.items() if tp in ceiling}
