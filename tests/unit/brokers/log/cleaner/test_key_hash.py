"""The cleaner's 64-bit key hash: equal keys hash equal, the byte layout of the array does
not matter, and a collision never gives a wrong answer in the offset map."""
from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pytest

from brokers.log.cleaner import key_hash
from brokers.log.cleaner.offset_map import OffsetMap


def test_equal_keys_hash_equal_whatever_their_array_layout() -> None:
    keys = [b"", b"a", b"abcdefgh", b"abcdefghi", b"k" * 40]
    plain = key_hash.hash64(pa.array(keys, pa.binary()))
    sliced = key_hash.hash64(pa.array([b"x", *keys], pa.binary()).slice(1))
    large = key_hash.hash64(pa.array(keys, pa.large_binary()))
    assert plain.tolist() == sliced.tolist() == large.tolist()
    assert len(set(plain.tolist())) == len(keys)
    fixed = key_hash.hash64(pa.array([b"%08d" % i for i in range(1000)], pa.binary()))  # the equal-length path
    assert len(set(fixed.tolist())) == 1000
    assert fixed[7] == key_hash.hash64(pa.array([b"zz", b"%08d" % 7], pa.binary()))[1]


def test_a_64_bit_collision_still_finds_the_right_key(monkeypatch: pytest.MonkeyPatch) -> None:
    real = key_hash.hash64

    def colliding(keys: pa.Array[Any], seed: int = 0) -> npt.NDArray[np.uint64]:  # every key shares its first 64 bits
        return real(keys, seed) if seed else np.zeros(len(keys), dtype=np.uint64)

    monkeypatch.setattr("brokers.log.cleaner.offset_map.hash64", colliding)
    offsets = OffsetMap(start=0, budget_bytes=1 << 20)
    offsets.add(pa.array([b"a", b"b", b"c"], pa.binary()), np.array([5, 6, 7], dtype=np.int64), end=8)
    assert offsets.fold()  # the keys themselves are grouped: three keys, not one
    assert len(offsets) == 3
    assert offsets.latest(pa.array([b"c", b"a", b"zz", None, b"b"], pa.binary())).tolist() == [7, 5, -1, -1, 6]
    offsets.add(pa.array([b"a"], pa.binary()), np.array([9], dtype=np.int64), end=10)
    assert offsets.fold() and offsets.latest(pa.array([b"a", b"b"], pa.binary())).tolist() == [9, 6]
