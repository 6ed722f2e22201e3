"""Compaction plans and the planning rules (pure: numbers in, decisions out).

A **plan** says what every replica of a partition makes of its log below ``end_offset``:

- for every key, only the record with the highest offset below ``end_offset`` stays;
- a tombstone that stays (the latest of its key) goes too when its timestamp is below
  ``tombstone_horizon_ms`` (the leader's clock minus ``delete.retention.ms`` when it made
  the plan);
- a producer's frame whose records all went stays as an empty frame (its producer id,
  epoch and sequences) when it is that producer's last frame below ``end_offset`` and its
  timestamp is not below ``producer_horizon_ms`` (the leader's clock minus
  ``producer.id.expiration.ms``): the producer state survives compaction (Kafka keeps an
  active producer's last batch the same way);
- offsets never change; records keep their order, timestamps, headers and producer fields.

Why a plan, and why in the log.  Replicas roll segments on their own clocks and restart at
different times, so "clean what is dirty now" would give each replica a different log.  The
leader alone decides plans and appends each as a **control frame** (``ControlType.
COMPACTION_PLAN``) to the partition itself; replication gives every replica the same plans
in the same order, durably, across leader changes.  A replica applies a plan only once the
plan frame is below its high watermark (committed: every future leader has it), never
before.  The result below ``end_offset`` is a pure function of the records below it and the
plan, and applying plan B after plan A gives what B alone gives, because both ends and
horizons only grow (``next_plan``): so every replica that applied the same latest plan
returns the same records at the same offsets below its ``end_offset``, whatever its segment
bounds, clocks or history, also after a leader change.

Planning (the leader's side):

- ``cleanable_end``: the highest offset a plan may end at: the last stable offset (the high
  watermark until transactions exist), the base of the active segment (it is never
  cleaned), and the first frame younger than ``min.compaction.lag.ms``;
- ``dirty_ratio``: dirty bytes (from the cleaned offset to the cleanable end) over all
  bytes below the cleanable end; a log is cleaned when it passes
  ``min.cleanable.dirty.ratio`` (strictly, as Kafka: 1.0 turns ratio-driven cleaning off), or when its first dirty record is older than
  ``max.compaction.lag.ms`` (KIP-354), or when asked (``topics compact``, the Spark job);
- ``next_plan``: the plan's horizons from the leader's clock, never below the previous
  plan's.

Thread-safety: pure values and functions.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

from spark_log.config import TopicConfig
from spark_log.errors import CorruptRecordError
from spark_log.frame import ControlType, FrameHeader, decode_control, encode_control

__all__ = [
    "CompactionPlan",
    "PRODUCER_ID_EXPIRATION_MS",
    "plan_frame",
    "read_plan",
    "next_plan",
    "cleanable_end",
    "dirty_ratio",
    "clean_reason",
]

PRODUCER_ID_EXPIRATION_MS = 7 * 24 * 3600 * 1000  # Kafka's producer.id.expiration.ms default
_PLAN = struct.Struct("<Bqqq")  # version, end_offset, tombstone_horizon_ms, producer_horizon_ms
_PLAN_VERSION = 1
_NO_TIME = -(2**63)


@dataclass(frozen=True, slots=True)
class CompactionPlan:
    """Clean every record below ``end_offset`` (module docstring); times in ms since the epoch."""

    end_offset: int
    tombstone_horizon_ms: int
    producer_horizon_ms: int

    def encode(self) -> bytes:
        return _PLAN.pack(_PLAN_VERSION, self.end_offset, self.tombstone_horizon_ms, self.producer_horizon_ms)

    @classmethod
    def decode(cls, data: bytes) -> "CompactionPlan":
        """Raises ``CorruptRecordError`` for bytes that are not a plan."""
        if len(data) != _PLAN.size:
            raise CorruptRecordError(f"a compaction plan is {_PLAN.size} bytes, not {len(data)}")
        version, end, horizon, producers = _PLAN.unpack(data)
        if version != _PLAN_VERSION or end < 0:
            raise CorruptRecordError(f"unknown compaction plan (version {version}, end {end})")
        return cls(end, horizon, producers)


def plan_frame(plan: CompactionPlan, *, timestamp_ms: int) -> bytes:
    """The control frame a leader appends to publish ``plan`` (version 1, offsets from the log)."""
    return encode_control(ControlType.COMPACTION_PLAN, plan.encode(), timestamp_ms=timestamp_ms)


def read_plan(buf: bytes | bytearray | memoryview, header: FrameHeader, position: int = 0) -> CompactionPlan | None:
    """The plan in the frame at ``position``; None if it is not a plan frame.  Raises
    ``CorruptRecordError`` for a damaged plan frame."""
    if not header.is_control or header.record_count != 1:
        return None
    kind, payload = decode_control(buf, header, position)
    return CompactionPlan.decode(payload) if kind == ControlType.COMPACTION_PLAN else None


def next_plan(*, previous: CompactionPlan | None, end_offset: int, now_ms: int, config: TopicConfig,
              producer_expiration_ms: int = PRODUCER_ID_EXPIRATION_MS) -> CompactionPlan:
    """The plan ending at ``end_offset`` made at ``now_ms`` (the leader's wall clock): its
    horizons never go below ``previous``'s, so later plans never keep what an earlier one
    removed."""
    tombstones = now_ms - config.delete_retention_ms
    producers = now_ms - producer_expiration_ms
    if previous is not None:
        tombstones = max(tombstones, previous.tombstone_horizon_ms)
        producers = max(producers, previous.producer_horizon_ms)
        end_offset = max(end_offset, previous.end_offset)
    return CompactionPlan(end_offset, tombstones, producers)


def cleanable_end(*, last_stable_offset: int, active_base_offset: int, young_from: int | None) -> int:
    """The highest offset a plan may end at: below the last stable offset, the active
    segment and (``young_from``, the first frame younger than ``min.compaction.lag.ms``;
    None: none is) every record still too young to compact."""
    end = min(last_stable_offset, active_base_offset)
    return end if young_from is None else min(end, young_from)


def dirty_ratio(*, clean_bytes: int, dirty_bytes: int) -> float:
    """Share of the cleanable bytes that are dirty (0.0 for an empty log)."""
    total = clean_bytes + dirty_bytes
    return dirty_bytes / total if total > 0 else 0.0


def clean_reason(*, ratio: float, dirty_bytes: int, first_dirty_timestamp_ms: int | None, now_ms: int,
                 config: TopicConfig, requested: bool) -> str | None:
    """Why the leader should plan a clean now (None: it should not): asked to, the dirty
    ratio passed ``min.cleanable.dirty.ratio``, or the first dirty record waited longer
    than ``max.compaction.lag.ms``.  Nothing dirty: never."""
    if dirty_bytes <= 0:
        return None
    if requested:
        return "requested"
    if ratio > config.min_cleanable_dirty_ratio:  # strictly, as Kafka: 1.0 never triggers by ratio
        return f"dirty ratio {ratio:.2f} > {config.min_cleanable_dirty_ratio}"
    if first_dirty_timestamp_ms is not None and first_dirty_timestamp_ms != _NO_TIME:
        waited = now_ms - first_dirty_timestamp_ms
        if waited > config.max_compaction_lag_ms:
            return f"first dirty record waited {waited} ms > max.compaction.lag.ms"
    return None
