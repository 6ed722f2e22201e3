"""Property tests: whatever mix of appends, rolls, truncations, retention, flushes and
reopens hypothesis throws at a PartitionLog, it reads back exactly what was appended
(minus what was truncated or retained away), with dense offsets and consistent epochs.

The model is the list of appended frames ``(base_offset, record_count, body, epoch)``;
the visible part is every frame that ends after the log start.  Runs derandomized with a
bounded number of examples so CI is reproducible.
"""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pyarrow as pa
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from brokers.log import PartitionLog
from spark_log.clock import ManualClock
from spark_log.config import TopicConfig
from spark_log.frame import encode_batch, iter_frames

BASE_TS = 1_700_000_000_000


def _frame(records: int, value_bytes: int, ts: int, tag: int) -> bytes:
    values = [f"{tag}:{i}".encode().ljust(value_bytes, b"#") for i in range(records)]
    return encode_batch(pa.record_batch({"value": pa.array(values, pa.binary())}), compression=None, timestamp_ms=ts)


class LogMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="log-prop-"))
        self.clock = ManualClock(wall_ms=BASE_TS)
        self.frames: list[tuple[int, int, bytes, int]] = []
        self.epoch = 0
        self.tag = 0
        self.log: PartitionLog | None = None

    @initialize(
        index_interval=st.sampled_from([0, 100, 4096]),
        retention_bytes=st.sampled_from([-1, 0, 3000]),
        segment_bytes=st.sampled_from([1024, 2048, 100_000]),
    )
    def open_log(self, index_interval: int, retention_bytes: int, segment_bytes: int) -> None:
        self.config = TopicConfig(
            segment_bytes=segment_bytes,
            segment_ms=60_000,
            index_interval_bytes=index_interval,
            retention_ms=-1,
            retention_bytes=retention_bytes,
        )
        self.log = PartitionLog(self.root / "p", self.config, clock=self.clock)

    @property
    def visible(self) -> list[tuple[int, int, bytes, int]]:
        assert self.log is not None
        start = self.log.log_start_offset
        return [f for f in self.frames if f[0] + f[1] > start]

    @rule(
        sizes=st.lists(st.tuples(st.integers(1, 6), st.integers(1, 300)), min_size=1, max_size=4),
        bump=st.booleans(),
    )
    def append(self, sizes: list[tuple[int, int]], bump: bool) -> None:
        assert self.log is not None
        if bump:
            self.epoch += 1
        frames = []
        for records, value_bytes in sizes:
            self.tag += 1
            frames.append(_frame(records, value_bytes, self.clock.wall_ms(), self.tag))
        info = self.log.append_as_leader(b"".join(frames), leader_epoch=self.epoch)
        offset = info.first_offset
        assert offset == (self.frames[-1][0] + self.frames[-1][1] if self.frames else self.log.log_start_offset)
        for frame, (records, _) in zip(frames, sizes):
            self.frames.append((offset, records, frame[64:], self.epoch))
            offset += records
        assert info.last_offset == offset - 1

    @rule(ms=st.integers(0, 120_000))
    def time_passes(self, ms: int) -> None:
        assert self.log is not None
        self.clock.advance(ms)
        self.log.maybe_roll()

    @precondition(lambda self: self.frames)
    @rule(data=st.data())
    def truncate(self, data: st.DataObject) -> None:
        assert self.log is not None
        end = self.log.log_end_offset
        offset = data.draw(st.integers(max(0, self.log.log_start_offset - 2), end))
        start = self.log.log_start_offset
        self.log.truncate_to(offset)
        if offset >= end:
            return
        if offset <= start:
            self.frames = []
            assert self.log.log_start_offset == offset == self.log.log_end_offset
            return
        self.frames = [f for f in self.frames if f[0] + f[1] <= offset]
        expected_end = self.frames[-1][0] + self.frames[-1][1] if self.frames else start
        if expected_end < start:
            self.frames = []
            expected_end = start
        assert self.log.log_end_offset == expected_end

    @precondition(lambda self: self.frames)
    @rule(data=st.data())
    def advance_start(self, data: st.DataObject) -> None:
        assert self.log is not None
        offset = data.draw(st.integers(self.log.log_start_offset, self.log.log_end_offset))
        self.log.advance_log_start(offset)
        assert self.log.log_start_offset == offset

    @rule()
    def retention(self) -> None:
        assert self.log is not None
        before = self.log.log_start_offset
        self.log.apply_retention(high_watermark=self.log.log_end_offset)
        assert self.log.log_start_offset >= before
        if self.config.retention_bytes >= 0:
            bases = self.log.segment_base_offsets
            assert len(bases) == 1 or self.log.size_bytes - self.config.retention_bytes < self._first_segment_bytes()

    def _first_segment_bytes(self) -> int:
        assert self.log is not None
        return (self.log.directory / f"{self.log.segment_base_offsets[0]:020d}.log").stat().st_size

    @rule()
    def flush(self) -> None:
        assert self.log is not None
        self.log.flush()
        assert self.log.recovery_point == self.log.log_end_offset

    @rule(clean=st.booleans())
    def reopen(self, clean: bool) -> None:
        assert self.log is not None
        if clean:
            self.log.close()
        else:  # a process crash: no flush, no checkpoint; the page cache keeps the bytes
            for segment in self.log._segments:
                segment.close()
            self.log._release()
        self.log = PartitionLog(self.root / "p", self.config, clock=self.clock)
        if clean:
            assert self.log.recovery.clean

    @invariant()
    def reads_back_exactly_what_was_appended(self) -> None:
        if self.log is None:
            return
        log = self.log
        visible = self.visible
        expected_end = visible[-1][0] + visible[-1][1] if visible else log.log_start_offset
        assert log.log_end_offset == expected_end
        got: list[tuple[int, int, bytes, int]] = []
        offset = log.log_start_offset
        while offset < log.log_end_offset:
            result = log.read(offset, max_bytes=700, verify=True)
            assert result.first_offset <= offset < result.next_offset
            data = bytes(result.data)
            for position, header in iter_frames(data):
                got.append((header.base_offset, header.record_count, data[position + 64: position + header.frame_length],
                            header.partition_leader_epoch))
            offset = result.next_offset
        assert got == visible
        for base, _count, _body, epoch in visible:
            assert log.end_offset_for_epoch(epoch)[0] == epoch
        if visible:
            latest = visible[-1][3]
            assert log.latest_epoch == latest and log.end_offset_for_epoch(latest) == (latest, log.log_end_offset)

    def teardown(self) -> None:
        if self.log is not None:
            self.log.close()
        shutil.rmtree(self.root, ignore_errors=True)


LogMachine.TestCase.settings = settings(
    max_examples=40,
    stateful_step_count=25,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    database=None,
)
TestLogProperties = LogMachine.TestCase
