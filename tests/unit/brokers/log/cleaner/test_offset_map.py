"""OffsetMap: latest offset per key, its memory budget, and checking an offered map."""
from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from brokers.log.cleaner import offset_map
from brokers.log.cleaner.offset_map import OffsetMap
from spark_log.errors import InvalidOffsetMapError


def _keys(*names: str) -> pa.Array[Any]:
    return pa.array([n.encode() for n in names], pa.binary())


def test_latest_offset_per_key_across_folds() -> None:
    m = OffsetMap(start=10, budget_bytes=1 << 20)
    m.add(_keys("a", "b", "a"), np.array([10, 11, 12]), end=13)
    assert m.fold() and m.end == 13
    m.add(_keys("b", "c"), np.array([13, 14]), end=20)
    assert m.fold() and (len(m), m.end) == (3, 20)
    assert m.latest(pa.array([b"a", b"b", b"c", b"zz", None], pa.binary())).tolist() == [12, 13, 14, -1, -1]


def test_a_fold_past_the_budget_changes_nothing() -> None:
    m = OffsetMap(start=0, budget_bytes=200)
    m.add(_keys(*[f"k{i}" for i in range(5)]), np.arange(5), end=5)
    assert m.fold()
    m.add(_keys(*[f"x{i}" for i in range(50)]), np.arange(5, 55), end=55)
    assert not m.fold()
    assert (len(m), m.end, m.pending_records) == (5, 5, 0)
    assert m.nbytes <= 200


def test_an_offered_map_is_checked_record_by_record() -> None:
    table = pa.table({"key": _keys("a", "b"), "offset": pa.array([12, 11], pa.int64())})
    good = OffsetMap.from_arrow(table, start=10, end=13)
    for keys, offsets in ((["a", "b", "a"], [10, 11, 12]), (["a"], [5])):  # offset 5: below the range, not counted
        good.check(good.latest(_keys(*keys)), np.array(offsets), np.ones(len(keys), bool))
    good.verify()

    stale = OffsetMap.from_arrow(pa.table({"key": _keys("a"), "offset": pa.array([10], pa.int64())}), start=10, end=13)
    with pytest.raises(InvalidOffsetMapError, match="offset 12"):
        stale.check(stale.latest(_keys("a", "a")), np.array([10, 12]), np.ones(2, bool))
    unused = OffsetMap.from_arrow(table, start=10, end=13)
    unused.check(unused.latest(_keys("a")), np.array([12]), np.ones(1, bool))
    with pytest.raises(InvalidOffsetMapError, match="2 keys but 1"):
        unused.verify()


@pytest.mark.parametrize("table, match", [
    (pa.table({"k": _keys("a"), "offset": pa.array([1], pa.int64())}), "columns"),
    (pa.table({"key": _keys("a", "a"), "offset": pa.array([1, 2], pa.int64())}), "twice"),
    (pa.table({"key": pa.array([None], pa.binary()), "offset": pa.array([1], pa.int64())}), "nulls"),
    (pa.table({"key": _keys("a"), "offset": pa.array([99], pa.int64())}), "within"),
    (pa.table({"key": _keys("a"), "offset": pa.array(["x"])}), "int64"),
])
def test_malformed_offered_maps_are_refused(table: pa.Table, match: str) -> None:
    with pytest.raises(InvalidOffsetMapError, match=match):
        OffsetMap.from_arrow(table, start=0, end=10)


@pytest.mark.parametrize("width", [None, 6, 8, 16, 32, 40],
                         ids=["mixed-lengths", "padded-words", "one-word", "two-words", "four-words", "too-wide-to-sort"])
def test_folds_agree_with_a_model_whether_keys_share_a_length_or_not(width: int | None) -> None:
    rng = np.random.default_rng(7)
    numbers = rng.integers(0, 300, 4000)
    names = [f"{n:0{width}d}" if width else "k" * int(n % 5) + str(n) for n in numbers]
    model = {name.encode(): offset for offset, name in enumerate(names)}
    m = OffsetMap(start=0, budget_bytes=1 << 30)
    for at in range(0, len(names), 1000):  # four folds, each merging the map with new keys
        m.add(_keys(*names[at: at + 1000]), np.arange(at, at + 1000), end=at + 1000)
        assert m.fold()
    table = m.to_arrow()
    assert table.column("key").type == pa.binary()
    assert dict(zip(table.column("key").to_pylist(), table.column("offset").to_pylist())) == model
    assert table.column("offset").to_pylist() == sorted(model.values())  # the map stays in offset order


def test_grouping_by_hashing_agrees_with_arrows_grouping_and_never_rests_on_a_hash(
        monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(11)
    keys = _keys(*[f"{n:016d}" for n in rng.integers(0, 5000, 60_000)])
    offsets = np.arange(100, 60_100, dtype=np.int64)
    words = offset_map._fixed_width_words(keys)
    assert words is not None and words.shape == (60_000, 2)
    hashed_keys, hashed_offsets = offset_map._latest_by_hashing(keys, words, offsets) or (None, None)
    grouped_keys, grouped_offsets = offset_map._latest_by_grouping(keys, offsets)
    assert hashed_keys is not None and hashed_offsets is not None
    assert hashed_keys.to_pylist() == grouped_keys.to_pylist() and hashed_offsets.tolist() == grouped_offsets.tolist()
    # a hash that maps every key to one value: the comparison of the keys catches it, and the
    # fold answers by Arrow's grouping instead
    monkeypatch.setattr(offset_map, "_M1", np.uint64(0))
    assert offset_map._latest_by_hashing(keys, words, offsets) is None
    fallback_keys, fallback_offsets = offset_map._latest_per_key(keys, offsets)
    assert fallback_keys.to_pylist() == grouped_keys.to_pylist() and fallback_offsets.tolist() == grouped_offsets.tolist()


@pytest.mark.parametrize("numbering", ["by-value", "reversed"])
def test_grouping_by_hashing_never_rests_on_the_hash_tables_numbering(
        monkeypatch: pytest.MonkeyPatch, numbering: str) -> None:
    # the fold reads a hash's last row off the order in which Arrow numbers new hashes; a
    # table that numbered them otherwise must send the fold to the exact path, not answer
    rng = np.random.default_rng(5)
    keys = _keys(*[f"{n:08d}" for n in rng.integers(0, 300, 5000)])
    offsets = np.arange(5000, dtype=np.int64)
    words = offset_map._fixed_width_words(keys)
    assert words is not None
    real = offset_map.pc.dictionary_encode

    def renumbered(values: pa.Array[Any]) -> pa.DictionaryArray[Any, Any]:
        encoded = real(values)
        count = len(encoded.dictionary)
        if numbering == "by-value":
            order = np.argsort(np.argsort(encoded.dictionary.to_numpy()))
        else:
            order = np.arange(count)[::-1]
        indices = order[encoded.indices.to_numpy()].astype(np.int32)
        return pa.DictionaryArray.from_arrays(pa.array(indices), encoded.dictionary.take(np.argsort(order)))

    monkeypatch.setattr(offset_map.pc, "dictionary_encode", renumbered)
    assert offset_map._latest_by_hashing(keys, words, offsets) is None
    exact_keys, exact_offsets = offset_map._latest_by_grouping(keys, offsets)
    fallback_keys, fallback_offsets = offset_map._latest_per_key(keys, offsets)
    assert fallback_keys.to_pylist() == exact_keys.to_pylist() and fallback_offsets.tolist() == exact_offsets.tolist()


@pytest.mark.parametrize("names, wanted", [
    (["a", "bb"], None), (["ab", "cd"], (2, 1)), (["a" * 33] * 2, None), ([], None)])
def test_only_keys_of_one_length_are_grouped_as_words(names: list[str], wanted: tuple[int, int] | None) -> None:
    words = offset_map._fixed_width_words(_keys(*names) if names else pa.nulls(0, pa.binary()))
    assert (None if words is None else words.shape) == wanted


@pytest.mark.parametrize("keys", [40, 2], ids=["flags-per-offset", "sorted-search"])
def test_is_latest_answers_by_offset_inside_the_range_and_false_outside(keys: int) -> None:
    # 2 keys over 1000 offsets: more than 16 offsets per key, so the map searches its sorted offsets
    names = [f"k{i % keys}" for i in range(1000)]
    m = OffsetMap(start=100, budget_bytes=1 << 30)
    m.add(_keys(*names), np.arange(100, 1100), end=1100)
    assert m.fold()
    latest = {name: 100 + i for i, name in enumerate(names)}
    asked = np.array([0, 99, *range(100, 1100), 1100, 5000], dtype=np.int64)
    expected = [int(o) in set(latest.values()) for o in asked]
    assert m.is_latest(asked).tolist() == expected
    assert sum(expected) == keys


@pytest.mark.parametrize("spread", ["random", "crowded"])
def test_the_bucketed_search_answers_as_a_binary_search(spread: str) -> None:
    # a lookup steps through its hash's bucket; a crowded bucket (more entries than the steps)
    # is binary-searched: either way the position is numpy's searchsorted's
    rng = np.random.default_rng(3)
    m = OffsetMap(start=0, budget_bytes=1 << 30)
    names = [f"{n:016d}" for n in range(3000)]
    m.add(_keys(*names), np.arange(3000), end=3000)
    assert m.fold()
    m.latest(_keys("0"))  # builds the lookup
    hashes = m._hashes
    assert hashes is not None
    if spread == "crowded":  # every hash in the first bucket, some repeated
        m._hashes = hashes = np.sort(np.concatenate([hashes[:1500] >> np.uint64(20), hashes[:1500] >> np.uint64(20)]))
        m._starts = np.searchsorted(hashes >> m._shift, np.arange(len(m._starts), dtype=np.uint64)).astype(np.int32)
        assert int(m._starts[1]) == len(hashes) > offset_map._BUCKET_STEPS
    wanted = np.concatenate([hashes[rng.integers(0, len(hashes), 500)], rng.integers(0, 2**63, 500).astype(np.uint64),
                             np.array([0, hashes[0], hashes[-1], 2**64 - 1], dtype=np.uint64)])
    expected = np.minimum(np.searchsorted(hashes, wanted), len(hashes) - 1)
    assert m._search(wanted).tolist() == expected.tolist()


@pytest.mark.parametrize("width", [8, 12, 16, None], ids=["one-word", "padded-words", "two-words", "mixed-lengths"])
def test_lookups_find_every_key_of_the_map_and_no_other(width: int | None) -> None:
    # keys compared word by word when map and asked keys share a length that is a whole
    # number of words, by Arrow otherwise; a key one byte longer never matches
    names = [f"{n:0{width}d}" if width else "k" * (n % 3) + str(n) for n in range(2000)]
    m = OffsetMap(start=0, budget_bytes=1 << 30)
    m.add(_keys(*names), np.arange(2000), end=2000)
    assert m.fold()
    asked = names[::7] + [name + "x" for name in names[:50]] + ["absent"]
    expected = [names.index(a) if a in names else -1 for a in asked]
    assert m.latest(_keys(*asked)).tolist() == expected
    same_length = [a for a in asked if len(a) == len(names[0])]
    assert m.latest(_keys(*same_length)).tolist() == [names.index(a) if a in names else -1 for a in same_length]
