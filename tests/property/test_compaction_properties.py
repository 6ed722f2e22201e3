"""Property test of compaction against a model: after any sequence of keyed writes,
tombstones, cleans (by the dirty ratio or on request), restarts (clean or crashed) and clock
advances, a full read of the partition gives exactly the model's records
(``tests/support/compaction.expected`` for the applied plan): the latest record of every
key below the cleaned offset, tombstones removed only once older than
``delete.retention.ms``, every record at or past the cleaned offset, in offset order, at
the offsets they were written at.  The producer keeps appending after every restart (its
state survives compaction).

Runs derandomized with a bounded number of examples (about 10 s); ``make compaction-soak``
runs many more (``SPARK_LOG_COMPACTION_EXAMPLES``).
"""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from brokers.log.append import check_frames
from brokers.log.cleaner.records import KeySpec
from brokers.log.cleaner.throttle import Throttler
from brokers.partition import LeaderAndIsr, Partition
from spark_log.clock import ManualClock
from spark_log.config import TopicConfig
from spark_log.schemas import BYTES_SCHEMA
from tests.support.compaction import Record, expected, keyed_frame, log_records

SPEC = KeySpec("bytes", (), "", lambda schema_id: BYTES_SCHEMA if schema_id == 0 else None)
NOW = 1_800_000_000_000
EXAMPLES = int(os.environ.get("SPARK_LOG_COMPACTION_EXAMPLES", "20"))


class CompactionMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="compaction-prop-"))
        self.clock = ManualClock(monotonic_ms=0, wall_ms=NOW)
        self.written: list[Record] = []
        self.sequence = 0
        self.epoch = 1
        self.partition: Partition | None = None

    @initialize(segment_bytes=st.sampled_from([1024, 2500, 1 << 20]),
                retention=st.sampled_from([0, 5_000, 10**9]),
                ratio=st.sampled_from([0.1, 0.5, 1.0]),
                lag=st.sampled_from([0, 3_000]))
    def open(self, segment_bytes: int, retention: int, ratio: float, lag: int) -> None:
        self.config = TopicConfig(segment_bytes=segment_bytes, segment_ms=20_000, index_interval_bytes=200,
                                  cleanup_policy="compact", delete_retention_ms=retention,
                                  min_cleanable_dirty_ratio=ratio, min_compaction_lag_ms=lag)
        self._start()

    def _start(self) -> None:
        self.partition = Partition(topic="t", partition=0, topic_id="t-id", directory=self.root / "p",
                                   config=self.config, broker_id=1, clock=self.clock)
        self.partition.become(LeaderAndIsr(leader_id=1, leader_epoch=self.epoch, partition_epoch=self.epoch,
                                           replicas=(1,), isr=(1,)), config=self.config)

    @rule(keys=st.lists(st.tuples(st.integers(0, 6), st.booleans()), min_size=1, max_size=5),
          keyless=st.booleans())
    def write(self, keys: list[tuple[int, bool]], keyless: bool) -> None:
        assert self.partition is not None
        names: list[bytes | None] = [f"k{k}".encode() for k, _ in keys]
        values: list[bytes | None] = [None if tomb else f"v{len(self.written) + i}".encode() * 4
                                      for i, (_, tomb) in enumerate(keys)]
        if keyless:  # a record without a key (an old one, from before the topic was compacted): never removed
            names.append(None)
            values.append(b"keyless")
        stamp = self.clock.wall_ms()
        frame = keyed_frame(names, values, timestamp=stamp, producer_id=5, producer_epoch=0,
                            base_sequence=self.sequence)
        outcome = self.partition.append_as_leader(check_frames(frame, max_message_bytes=1 << 20))
        assert not outcome.duplicate and outcome.base_offset == self.partition.offsets().log_end_offset - len(names)
        self.written += [Record(outcome.base_offset + i, k, v, stamp) for i, (k, v) in enumerate(zip(names, values))]
        self.sequence += len(names)

    @rule(request=st.booleans())
    def clean(self, request: bool) -> None:
        assert self.partition is not None
        if request:
            self.partition.request_compaction()
        throttle = Throttler(0, clock=self.clock, wait=lambda s: False)
        for _ in range(8):
            if self.partition.clean(SPEC, throttle=throttle, budget_bytes=1 << 20, stop=lambda: False) is None:
                break

    @rule(ms=st.sampled_from([500, 4_000, 30_000]))
    def time_passes(self, ms: int) -> None:
        assert self.partition is not None
        self.clock.advance(ms)
        self.partition.maintenance()

    @rule(crash=st.booleans())
    def restart(self, crash: bool) -> None:
        assert self.partition is not None
        if crash:  # a process crash between operations: no flush, no checkpoints (the page cache keeps bytes)
            log = self.partition._log
            for segment in log._segments:
                segment.close()
            log._release()
        else:
            self.partition.close()
        self.epoch += 1
        self._start()

    @invariant()
    def a_full_read_is_the_model(self) -> None:
        if self.partition is None:
            return
        applied = self.partition._cleaning.state.applied
        end, horizon = (applied.plan.end_offset, applied.plan.tombstone_horizon_ms) if applied else (0, -(2**63))
        assert horizon <= self.clock.wall_ms() - self.config.delete_retention_ms  # tombstones only when old enough
        assert end <= self.partition.offsets().high_watermark
        assert log_records(self.partition._log) == expected(self.written, end=end, tombstone_horizon_ms=horizon)

    def teardown(self) -> None:
        if self.partition is not None:
            self.partition.close()
        shutil.rmtree(self.root, ignore_errors=True)


CompactionMachine.TestCase.settings = settings(
    max_examples=EXAMPLES,
    stateful_step_count=25,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    database=None,
)
TestCompactionProperties = CompactionMachine.TestCase
