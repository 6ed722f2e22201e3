"""EpochCache: Kafka's LeaderEpochFileCache rules and its checkpoint file."""
from __future__ import annotations

from pathlib import Path

import pytest

from brokers.log.epoch_cache import EpochCache


@pytest.fixture
def cache(tmp_path: Path) -> EpochCache:
    cache = EpochCache(tmp_path / "leader-epoch-checkpoint")
    cache.assign(1, 0)
    cache.assign(3, 10)
    cache.assign(4, 25)
    return cache


def test_assign_only_moves_forward(cache: EpochCache) -> None:
    assert not cache.assign(4, 30)
    assert not cache.assign(2, 40)
    assert cache.assign(6, 20)  # newer epoch starting earlier replaces the entries after it
    assert cache.entries() == [(1, 0), (3, 10), (6, 20)]


@pytest.mark.parametrize(
    "epoch, expected",
    [
        (4, (4, 100)),  # the latest: the log end
        (3, (3, 25)),
        (2, (1, 10)),  # unknown epoch between known ones: the floor epoch, next start
        (1, (1, 10)),
        (0, (0, 0)),  # below every known epoch
        (5, (-1, -1)),  # above the latest
        (-1, (-1, -1)),
    ],
)
def test_end_offset_for(cache: EpochCache, epoch: int, expected: tuple[int, int]) -> None:
    assert cache.end_offset_for(epoch, 100) == expected


def test_truncation_from_both_ends(cache: EpochCache) -> None:
    cache.truncate_from_end(25)
    assert cache.entries() == [(1, 0), (3, 10)]
    cache.truncate_from_start(12)
    assert cache.entries() == [(3, 12)]
    assert cache.epoch_for_offset(11) is None and cache.epoch_for_offset(50) == 3


def test_persisted_and_reloaded(cache: EpochCache) -> None:
    assert EpochCache.load(cache.path) is None  # assign alone writes no file
    assert cache.unsynced
    cache.sync()
    loaded = EpochCache.load(cache.path)
    assert loaded is not None and loaded.entries() == cache.entries()
    assert cache.assign(9, 60)
    again = EpochCache.load(cache.path)  # the file stays as synced until the next sync
    assert again is not None and again.entries() == loaded.entries() != cache.entries()
    cache.path.write_text("0\n2\n1 0\n")  # truncated file
    assert EpochCache.load(cache.path) is None
    cache.path.write_text("0\n2\n3 0\n1 5\n")  # epochs going back
    assert EpochCache.load(cache.path) is None
    cache.path.unlink()
    assert EpochCache.load(cache.path) is None
