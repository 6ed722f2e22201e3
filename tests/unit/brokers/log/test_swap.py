"""The crash-safe swap of cleaned segments and what recovery makes of each state it can leave."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from brokers.log import PartitionLog, swap
from tests.support.compaction import Record, keyed_frame, log_records

from .support import files, small_config


def _log(directory: Path) -> tuple[list[int], list[Record]]:
    """A log of three closed segments and an active one; returns (segment bases, records)."""
    with PartitionLog(directory, small_config(segment_bytes=1500)) as log:
        for i in range(40):
            log.append_as_leader(keyed_frame([f"k{i % 4}".encode()], [b"v" * 40], timestamp=i, compression=None),
                                 leader_epoch=1)
        return log.segment_base_offsets, log_records(log)


def _cleaned_copies(directory: Path, bases: list[int]) -> list[tuple[int, list[int]]]:
    """``.cleaned`` files for two groups, segments 0-1 and 2 (here: their frames as they are)."""
    groups = [(bases[0], bases[:2]), (bases[2], bases[2:3])]
    for base, old in groups:
        data = b"".join((directory / f"{b:020d}.log").read_bytes() for b in old)
        swap.cleaned_path(directory, base).write_bytes(data)
    return groups


def _swap_file(directory: Path, base: int) -> Path:
    return directory / f"{base:020d}.log.swap"


@pytest.mark.parametrize("state, committed", [("cleaned", False), ("one-renamed", False), ("renamed", True),
                                              ("old-deleted", True), ("one-completed", True), ("completed", True)])
def test_recovery_rolls_back_or_completes_a_whole_clean(tmp_path: Path, state: str, committed: bool) -> None:
    directory = tmp_path / "p"
    bases, records = _log(directory)
    assert len(bases) >= 4
    groups = _cleaned_copies(directory, bases)
    if state != "cleaned":
        for base, _ in groups[: 1 if state == "one-renamed" else 2]:
            swap.cleaned_path(directory, base).rename(_swap_file(directory, base))
    if state in ("old-deleted", "one-completed", "completed"):
        for base, old in groups:
            for b in old:
                for suffix in (".index", ".timeindex") + ((".log",) if b != base else ()):
                    (directory / f"{b:020d}{suffix}").unlink(missing_ok=True)
    if state in ("one-completed", "completed"):
        for base, _ in groups[: 1 if state == "one-completed" else 2]:
            _swap_file(directory, base).rename(directory / f"{base:020d}.log")
    with PartitionLog(directory, small_config(segment_bytes=1500)) as log:
        assert log_records(log) == records
        assert log.segment_base_offsets == ([bases[0], *bases[2:]] if committed else bases)
        assert bool(log.recovery.swaps) is (state != "completed")
        assert log.recovery.clean
    assert not [name for name in files(directory) if name.endswith((".cleaned", ".swap"))]


def test_commit_swaps_replaces_the_groups_and_leaves_no_side_files(tmp_path: Path) -> None:
    directory = tmp_path / "p"
    bases, records = _log(directory)
    groups = _cleaned_copies(directory, bases)
    targets = swap.commit_swaps(directory, groups)
    assert [t.name for t in targets] == [f"{bases[0]:020d}.log", f"{bases[2]:020d}.log"]
    assert not (directory / f"{bases[1]:020d}.log").exists()
    assert not [name for name in files(directory) if name.endswith((".cleaned", ".swap"))]
    with PartitionLog(directory, small_config(segment_bytes=1500)) as log:
        assert log_records(log) == records


def test_a_missing_cleaned_file_changes_nothing(tmp_path: Path) -> None:
    directory = tmp_path / "p"
    bases, records = _log(directory)
    groups = _cleaned_copies(directory, bases)
    swap.cleaned_path(directory, groups[1][0]).unlink()
    before = files(directory)
    with pytest.raises(FileNotFoundError):
        swap.commit_swaps(directory, groups)
    assert files(directory) == before


def test_a_damaged_swap_file_is_left_to_the_logs_recovery(tmp_path: Path) -> None:
    directory = tmp_path / "p"
    bases, records = _log(directory)
    _cleaned_copies(directory, bases)
    for base in (bases[0], bases[2]):
        swap.cleaned_path(directory, base).rename(_swap_file(directory, base))
    swap_file = _swap_file(directory, bases[0])
    data = bytearray(swap_file.read_bytes())
    data[9] ^= 0xFF  # an impossible frame length in the first header
    swap_file.write_bytes(bytes(data))
    shutil.copy(swap_file, tmp_path / "evidence")
    with PartitionLog(directory, small_config(segment_bytes=1500)) as log:
        assert not log.recovery.clean  # cut, and what followed dropped: disk damage, reported
        assert log.log_end_offset < records[-1].offset + 1
