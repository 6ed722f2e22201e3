"""Table tests of the source's offset math (connectors.offsets)."""
from __future__ import annotations

import json

import pytest

from connectors import offsets as off
from connectors.offsets import OffsetRange, TopicPartition as TP
from spark_log.errors import InvalidConfigError

A0, A1, B0 = TP("a", 0), TP("a", 1), TP("b", 0)


def test_json_is_canonical_and_round_trips() -> None:
    offsets = {TP("b", 0): 5, TP("a", 10): 1, TP("a", 2): 7}
    as_json = off.to_json(offsets)
    assert json.dumps(as_json) == '{"a": {"2": 7, "10": 1}, "b": {"0": 5}}'
    assert off.from_json(json.dumps(as_json)) == offsets
    assert off.from_json(as_json) == offsets


@pytest.mark.parametrize("text", ["[1]", '{"a": 1}', '{"a": {"x": 1}}', '{"a": {"0": "1"}}', "{not json", '{"a": {"0": true}}'])
def test_from_json_refuses_bad_shapes(text: str) -> None:
    with pytest.raises(InvalidConfigError):
        off.from_json(text)


@pytest.mark.parametrize(
    ("text", "allow", "expected"),
    [
        ("earliest", ("earliest", "latest"), "earliest"),
        (" LATEST ", ("earliest", "latest"), "latest"),
        ('{"a": {"0": 3, "1": -2}}', ("earliest", "latest"), {A0: 3, A1: -2}),
        ('{"a": {"0": -1}}', ("latest",), {A0: -1}),
    ],
)
def test_parse_spec(text: str, allow: tuple[str, ...], expected: object) -> None:
    assert off.parse_spec("startingOffsets", text, allow=allow) == expected


@pytest.mark.parametrize(
    ("text", "allow"),
    [("earliest", ("latest",)), ('{"a": {"0": -2}}', ("latest",)), ('{"a": {"0": -3}}', ("earliest", "latest")), ("soon", ("earliest", "latest")),
     ('{"a": {"0": 9223372036854775808}}', ("latest",)), ('{"a": {"2147483648": 0}}', ("latest",)),
     ('{"a": {"-1": 0}}', ("latest",))],
)
def test_parse_spec_refuses(text: str, allow: tuple[str, ...]) -> None:
    with pytest.raises(InvalidConfigError, match="endingOffsets"):
        off.parse_spec("endingOffsets", text, allow=allow)


def test_resolve() -> None:
    earliest = {A0: 2, A1: 0}
    latest = {A0: 10, A1: 4}
    assert off.resolve("earliest", earliest, latest, option="o") == earliest
    assert off.resolve("latest", earliest, latest, option="o") == latest
    assert off.resolve({A0: -2, A1: -1}, earliest, latest, option="o") == {A0: 2, A1: 4}
    assert off.resolve({A0: 5, A1: 1}, earliest, latest, option="o") == {A0: 5, A1: 1}
    with pytest.raises(InvalidConfigError, match="does not give an offset for: a-1"):
        off.resolve({A0: 5}, earliest, latest, option="o")
    with pytest.raises(InvalidConfigError, match="not read: b-0"):
        off.resolve({A0: 5, A1: 1, B0: 1}, earliest, latest, option="o")


@pytest.mark.parametrize(
    ("start", "end", "min_partitions", "max_records", "expected"),
    [
        # one range per partition with data, sorted; empty ranges dropped
        ({A0: 0, A1: 5, B0: 3}, {B0: 4, A1: 5, A0: 2}, 1, None, [OffsetRange("a", 0, 0, 2), OffsetRange("b", 0, 3, 4)]),
        # a new partition (absent from start) is read from 0
        ({A0: 2}, {A0: 4, A1: 3}, 1, None, [OffsetRange("a", 0, 2, 4), OffsetRange("a", 1, 0, 3)]),
        # partitions absent from end are not read
        ({A0: 2, B0: 0}, {A0: 4}, 1, None, [OffsetRange("a", 0, 2, 4)]),
        # minPartitions splits in proportion to size
        ({A0: 0, A1: 0}, {A0: 30, A1: 10}, 4, None,
         [OffsetRange("a", 0, 0, 10), OffsetRange("a", 0, 10, 20), OffsetRange("a", 0, 20, 30), OffsetRange("a", 1, 0, 10)]),
        # uneven split: pieces differ by at most one record
        ({A0: 0}, {A0: 10}, 3, None, [OffsetRange("a", 0, 0, 4), OffsetRange("a", 0, 4, 7), OffsetRange("a", 0, 7, 10)]),
        # never more pieces than records
        ({A0: 0}, {A0: 2}, 5, None, [OffsetRange("a", 0, 0, 1), OffsetRange("a", 0, 1, 2)]),
        # maxRecordsPerPartition caps every piece
        ({A0: 0, A1: 0}, {A0: 5, A1: 2}, 1, 2,
         [OffsetRange("a", 0, 0, 2), OffsetRange("a", 0, 2, 4), OffsetRange("a", 0, 4, 5), OffsetRange("a", 1, 0, 2)]),
        # nothing new
        ({A0: 3}, {A0: 3}, 4, 1, []),
    ],
)
def test_plan_ranges(start: dict, end: dict, min_partitions: int, max_records: int | None, expected: list[OffsetRange]) -> None:
    ranges = off.plan_ranges(start, end, min_partitions=min_partitions, max_records_per_partition=max_records)
    assert ranges == expected
    # deterministic, whatever the dict order
    again = off.plan_ranges(dict(reversed(list(start.items()))), dict(reversed(list(end.items()))),
                            min_partitions=min_partitions, max_records_per_partition=max_records)
    assert again == ranges


@pytest.mark.parametrize(
    ("start", "latest", "max_rows", "expected"),
    [
        ({A0: 0, A1: 0}, {A0: 10, A1: 10}, 100, {A0: 10, A1: 10}),   # under the limit: everything
        ({A0: 0, A1: 0}, {A0: 30, A1: 10}, 20, {A0: 15, A1: 5}),     # prorated by backlog
        ({A0: 0, A1: 0}, {A0: 1000, A1: 1}, 10, {A0: 9, A1: 1}),     # share < 1 rounds up: progress
        ({A0: 5}, {A0: 5, A1: 8}, 4, {A0: 5, A1: 4}),                # new partition starts at 0
        ({A0: 7}, {A0: 7}, 1, {A0: 7}),                              # no backlog
    ],
)
def test_limit_rows(start: dict, latest: dict, max_rows: int, expected: dict) -> None:
    assert off.limit_rows(start, latest, max_rows) == expected


@pytest.mark.parametrize(
    ("start", "latest", "max_bytes", "sizes", "expected"),
    [
        ({A0: 0, A1: 0}, {A0: 10, A1: 10}, 10_000, {A0: 100, A1: 100}, {A0: 10, A1: 10}),
        ({A0: 0, A1: 0}, {A0: 10, A1: 10}, 1_000, {A0: 100, A1: 100}, {A0: 5, A1: 5}),
        ({A0: 0, A1: 0}, {A0: 10, A1: 10}, 1_000, {A0: 100, A1: 10}, {A0: 9, A1: 9}),
        ({A0: 0}, {A0: 10}, 1, {A0: 500}, {A0: 1}),                  # always at least one record
        ({A0: 0}, {A0: 10}, 50, {}, {A0: 10}),                        # unknown size counts as 1 byte
    ],
)
def test_limit_bytes(start: dict, latest: dict, max_bytes: int, sizes: dict, expected: dict) -> None:
    assert off.limit_bytes(start, latest, max_bytes, sizes) == expected


def test_cap_drops_partitions_born_after_the_target() -> None:
    assert off.cap({A0: 10, A1: 3, B0: 1}, {A0: 8, A1: 9}) == {A0: 8, A1: 3}


def test_check_order_refuses_a_start_after_the_end() -> None:
    """Kafka's source asserts fromOffset <= untilOffset; a read of nothing was silent here."""
    a0, a1 = off.TopicPartition("a", 0), off.TopicPartition("a", 1)
    off.check_order({a0: 3, a1: 5}, {a0: 3, a1: 9}, starting="startingOffsets")  # start == end: empty, fine
    off.check_order({a0: 3}, {a1: 0}, starting="startingOffsets")  # not in both: nothing to compare
    with pytest.raises(InvalidConfigError, match=r"'startingTimestamp'.*'endingOffsets'.*a-1 starts at 9 > 5"):
        off.check_order({a0: 3, a1: 9}, {a0: 3, a1: 5}, starting="startingTimestamp")
