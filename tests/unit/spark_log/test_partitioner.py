"""The partitioner: Kafka's murmur2 (pinned values), vectorised == scalar, sticky partitions."""
from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_log._partitioner import (
    StickyPartitioner,
    key_array,
    murmur2,
    murmur2_array,
    partition_for_key,
    partitions_for_keys,
)

# Kafka's UtilsTest.testMurmur2: these values are what Kafka's default partitioner hashes.
KAFKA_VECTORS = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}


@pytest.mark.parametrize(("key", "expected"), sorted(KAFKA_VECTORS.items()))
def test_murmur2_matches_kafka(key: bytes, expected: int) -> None:
    assert murmur2(key) == expected


def test_partition_is_kafkas_positive_modulo() -> None:
    assert partition_for_key(b"foobar", 12) == (-790332482 & 0x7FFFFFFF) % 12
    assert partition_for_key("foobar", 12) == partition_for_key(b"foobar", 12)


@settings(max_examples=200, derandomize=True, deadline=None)
@given(st.lists(st.one_of(st.none(), st.binary(max_size=40)), min_size=1, max_size=60), st.integers(0, 5))
def test_vectorised_equals_scalar(keys: list[bytes | None], cut: int) -> None:
    array = pa.array(keys, pa.binary()).slice(min(cut, len(keys) - 1))  # non-zero array offsets too
    hashed = murmur2_array(array).view(np.int32).tolist()
    assert hashed == [murmur2(k or b"") for k in array.to_pylist()]
    parts = partitions_for_keys(array, 7).tolist()
    assert parts == [partition_for_key(k or b"", 7) for k in array.to_pylist()]


def test_string_keys_and_chunked_arrays() -> None:
    strings = pa.chunked_array([["a", "bb"], ["ccc"]])
    assert murmur2_array(strings).view(np.int32).tolist() == [murmur2(b"a"), murmur2(b"bb"), murmur2(b"ccc")]
    with pytest.raises(TypeError):
        murmur2_array(pa.array([1, 2]))


def test_key_array_for_typed_columns() -> None:
    table = pa.table({"user": ["u1", None, "u3"], "region": [1, 2, None]})
    single, present = key_array(table, ["user"])
    assert single.to_pylist() == [b"u1", b"", b"u3"] and present.tolist() == [True, False, True]
    joined, present = key_array(table, ["user", "region"])
    assert joined.to_pylist() == [b"u1\x1f1", b"\x1f2", b"u3\x1f"] and present.tolist() == [True, True, True]


def test_sticky_partitioner_sticks_until_next() -> None:
    sticky = StickyPartitioner(random.Random(1))
    first = sticky.partition("t", 5)
    assert all(sticky.partition("t", 5) == first for _ in range(10))
    moved = sticky.next("t", 5, previous=first)
    assert moved != first and sticky.partition("t", 5) == moved
    assert sticky.next("t", 5, previous=first) == moved  # someone else moved it already
    assert sticky.next("t", 1) == 0
