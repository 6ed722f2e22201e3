"""Per-frame cleaning rules and the cleaned output (fillers tile the offsets, cut by epoch)."""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from brokers.log.cleaner.filter import KEEP, REMOVE, CleanedOutput, FrameCleaner
from brokers.log.cleaner.offset_map import OffsetMap
from brokers.log.cleaner.plan import CompactionPlan, plan_frame
from brokers.log.cleaner.records import KeySpec
from spark_log.frame import (encode_control, encode_marker, iter_frames, parse_header, record_offsets,
                             set_offset_and_epoch)
from spark_log.schemas import BYTES_SCHEMA
from tests.support.compaction import frames_records, keyed_frame

SPEC = KeySpec("bytes", (), "", lambda schema_id: BYTES_SCHEMA if schema_id == 0 else None)


def _at(frame: bytes, base: int, epoch: int = 1) -> memoryview:
    data = bytearray(frame)
    set_offset_and_epoch(data, base, epoch)
    return memoryview(bytes(data))


def _cleaner(latest: dict[bytes, int], *, end: int = 100, horizon: int = 0, producer_horizon: int = -(2**62),
             last_frame_of: dict[int, int] | None = None) -> FrameCleaner:
    offsets = OffsetMap(start=0, budget_bytes=1 << 20)
    offsets.add(pa.array(list(latest), pa.binary()), np.array(list(latest.values()), dtype=np.int64), end=end)
    offsets.fold()
    return FrameCleaner(CompactionPlan(end, horizon, producer_horizon), SPEC, offsets, last_frame_of or {})


def test_superseded_records_go_and_the_rest_keep_offsets_and_fields() -> None:
    frame = _at(keyed_frame([b"a", b"b", b"c", None], [b"1", b"2", b"3", b"4"], timestamp=[7, 8, 9, 10],
                            producer_id=5, producer_epoch=2, base_sequence=40), 20)
    out = _cleaner({b"a": 20, b"b": 30, b"c": 22}).clean(frame, parse_header(frame))
    assert isinstance(out, bytes)
    header = parse_header(out)
    assert (header.version, header.base_offset, header.next_offset, header.record_count) == (2, 20, 24, 3)
    assert (header.producer_id, header.producer_epoch, header.base_sequence, header.last_sequence) == (5, 2, 40, 43)
    assert header.codec == parse_header(frame).codec and header.partition_leader_epoch == 1
    assert [(r.offset, r.key, r.value, r.timestamp) for r in frames_records(out)] == [
        (20, b"a", b"1", 7), (22, b"c", b"3", 9), (23, None, b"4", 10)]  # the keyless record stays
    assert (header.first_timestamp, header.max_timestamp) == (7, 10)


def test_whole_frames_are_kept_byte_for_byte_or_removed() -> None:
    frame = _at(keyed_frame([b"a", b"b"], [b"1", b"2"], timestamp=5), 10)
    assert _cleaner({b"a": 10, b"b": 11}).clean(frame, parse_header(frame)) == KEEP
    assert _cleaner({b"a": 50, b"b": 51}).clean(frame, parse_header(frame)) == REMOVE
    late = _at(keyed_frame([b"a"], [b"1"], timestamp=5), 100)  # at the plan's end: untouched
    assert _cleaner({b"a": 50}).clean(late, parse_header(late)) == KEEP


def test_tombstones_go_only_past_the_horizon_and_only_below_the_end() -> None:
    frame = _at(keyed_frame([b"a", b"b"], [None, None], timestamp=[100, 200]), 10)
    kept = _cleaner({b"a": 10, b"b": 11}, horizon=150).clean(frame, parse_header(frame))
    assert isinstance(kept, bytes) and [r.key for r in frames_records(kept)] == [b"b"]
    assert _cleaner({b"a": 10, b"b": 11}, horizon=100).clean(frame, parse_header(frame)) == KEEP
    assert _cleaner({b"a": 10, b"b": 11}, horizon=150, end=11).clean(frame, parse_header(frame)) != REMOVE


def test_a_producers_last_frame_stays_empty_with_its_producer_fields() -> None:
    frame = _at(keyed_frame([b"a", b"b"], [b"1", b"2"], timestamp=500, producer_id=9, producer_epoch=3,
                            base_sequence=70), 10)
    header = parse_header(frame)
    cleaner = _cleaner({b"a": 60, b"b": 61}, last_frame_of={9: 10}, producer_horizon=400)
    emptied = cleaner.clean(frame, header)
    assert isinstance(emptied, bytes)
    empty = parse_header(emptied)
    assert (empty.record_count, empty.base_offset, empty.next_offset, empty.last_sequence) == (0, 10, 12, 71)
    assert (empty.producer_id, empty.producer_epoch, cleaner.stats.producer_frames_kept) == (9, 3, 1)
    assert cleaner.clean(memoryview(emptied), empty) == KEEP  # a later clean keeps it while it is the last
    assert _cleaner({b"a": 60, b"b": 61}, last_frame_of={9: 40}).clean(frame, header) == REMOVE  # a later frame exists
    expired = _cleaner({b"a": 60, b"b": 61}, last_frame_of={9: 10}, producer_horizon=501)
    assert expired.clean(frame, header) == REMOVE and expired.clean(memoryview(emptied), empty) == REMOVE


def test_applied_plan_frames_go_other_control_frames_stay() -> None:
    plan = _at(plan_frame(CompactionPlan(5, 0, 0), timestamp_ms=1), 30)
    assert _cleaner({}, end=40).clean(plan, parse_header(plan)) == REMOVE
    assert _cleaner({}, end=30).clean(plan, parse_header(plan)) == KEEP
    marker = _at(encode_control(1, b"commit", timestamp_ms=1), 30)
    assert _cleaner({}, end=40).clean(marker, parse_header(marker)) == KEEP


def test_removed_runs_become_fillers_that_tile_the_offsets_and_keep_epoch_starts() -> None:
    frames = [_at(keyed_frame([b"x"] * 3, [b"v"] * 3, timestamp=t), base, epoch)
              for base, epoch, t in [(0, 1, 5), (3, 1, 6), (6, 2, 7), (9, 2, 8), (12, 3, 9)]]
    written: list[bytes] = []
    output = CleanedOutput(lambda data: written.append(bytes(data)))
    for i, frame in enumerate(frames):
        output.take(frame, parse_header(frame), KEEP if i == 4 else REMOVE)
    output.finish()
    data = b"".join(written)
    tiles = [(h.base_offset, h.next_offset, h.partition_leader_epoch, h.record_count, h.producer_id)
             for _, h in iter_frames(data)]
    assert tiles == [(0, 6, 1, 0, -1), (6, 12, 2, 0, -1), (12, 15, 3, 3, -1)]
    assert output.changed and [h.max_timestamp for _, h in iter_frames(data)][:2] == [6, 8]
    assert record_offsets(data, parse_header(data)).size == 0


def test_an_unchanged_output_says_so() -> None:
    frame = _at(keyed_frame([b"a"], [b"1"], timestamp=1), 0)
    output = CleanedOutput(lambda data: None)
    output.take(frame, parse_header(frame), KEEP)
    output.finish()
    assert not output.changed and output.frames == 1


def test_an_old_filler_alone_in_its_run_is_no_change() -> None:
    frames = [_at(keyed_frame([b"x"], [b"v"], timestamp=1), base) for base in (0, 1)]
    first: list[bytes] = []
    output = CleanedOutput(lambda data: first.append(bytes(data)))
    for frame in frames:
        output.take(frame, parse_header(frame), REMOVE)
    output.finish()
    (filler,) = first
    again: list[bytes] = []
    second = CleanedOutput(lambda data: again.append(bytes(data)))
    second.take(memoryview(filler), parse_header(filler), REMOVE)
    second.finish()
    assert again == [filler] and not second.changed


def _txn(keys: list[bytes], base: int, *, producer_id: int = 9, timestamp: int = 5) -> memoryview:
    return _at(keyed_frame(keys, [b"v"] * len(keys), timestamp=timestamp, producer_id=producer_id, producer_epoch=0,
                           base_sequence=0, transactional=True), base)


def _marker(base: int, *, commit: bool = True, producer_id: int = 9, timestamp: int = 5) -> memoryview:
    return _at(encode_marker(commit, producer_id=producer_id, producer_epoch=1, coordinator_epoch=0,
                             timestamp_ms=timestamp), base)


def _outcomes(cleaner: FrameCleaner, frames: list[memoryview]) -> list[object]:
    return [cleaner.clean(frame, parse_header(frame)) for frame in frames]


def test_a_marker_goes_once_its_transaction_has_no_record_left_and_it_is_past_the_horizon() -> None:
    frames = [_txn([b"a", b"b"], 10), _marker(12), _txn([b"a"], 13), _marker(14, commit=False)]
    cleaner = _cleaner({b"a": 50, b"b": 51}, horizon=6, last_frame_of={9: 60})  # both keys written again later
    assert _outcomes(cleaner, frames) == [REMOVE, REMOVE, REMOVE, REMOVE]
    assert cleaner.stats.markers_removed == 2


def test_a_marker_stays_while_a_record_of_its_transaction_stays() -> None:
    frames = [_txn([b"a", b"b"], 10), _marker(12), _txn([b"c"], 13), _marker(14)]
    outcomes = _outcomes(_cleaner({b"a": 10, b"b": 51, b"c": 52}, horizon=6, last_frame_of={9: 60}), frames)
    assert isinstance(outcomes[0], bytes) and outcomes[1:] == [KEEP, REMOVE, REMOVE]  # "a" at 10 is still the latest


def test_a_marker_stays_before_the_horizon_below_the_end_and_as_its_producers_last_frame() -> None:
    data, marker = _txn([b"a"], 10), _marker(11)
    assert _outcomes(_cleaner({b"a": 50}, horizon=5, last_frame_of={9: 60}), [data, marker]) == [REMOVE, KEEP]
    assert _outcomes(_cleaner({b"a": 50}, horizon=6, end=11, last_frame_of={9: 60}), [data, marker]) == [REMOVE, KEEP]
    last = _cleaner({b"a": 50}, horizon=6, last_frame_of={9: 11}, producer_horizon=5)  # it holds the bumped epoch
    assert _outcomes(last, [data, marker]) == [REMOVE, KEEP]
    expired = _cleaner({b"a": 50}, horizon=6, last_frame_of={9: 11}, producer_horizon=6)  # the producer expired
    assert _outcomes(expired, [data, marker]) == [REMOVE, REMOVE]


def test_an_aborted_transactions_marker_goes_with_its_records() -> None:
    frames = [_txn([b"a"], 10), _marker(11, commit=False)]
    cleaner = FrameCleaner(CompactionPlan(100, 6, -(2**62)), SPEC, _cleaner({b"a": 10}).offset_map, {9: 60},
                           aborted=((9, 10, 11),))
    assert _outcomes(cleaner, frames) == [REMOVE, REMOVE]  # "a" at 10 is the latest, but aborted: never written
