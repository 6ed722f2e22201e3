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


def _cleaned_copy(directory: Path, bases: list[int]) -> None:
    """A ``.cleaned`` file for the group of the first two segments (here: their frames as they are)."""
    data = b"".join((directory / f"{b:020d}.log").read_bytes() for b in bases[:2])
    swap.cleaned_path(directory, bases[0]).write_bytes(data)


@pytest.mark.parametrize("state", ["cleaned", "renamed", "old-deleted", "completed"])
def test_recovery_finishes_or_drops_an_interrupted_swap(tmp_path: Path, state: str) -> None:
    directory = tmp_path / "p"
    bases, records = _log(directory)
    assert len(bases) >= 4
    _cleaned_copy(directory, bases)
    cleaned = swap.cleaned_path(directory, bases[0])
    swap_file = directory / f"{bases[0]:020d}.log.swap"
    if state != "cleaned":
        cleaned.rename(swap_file)
    if state in ("old-deleted", "completed"):
        for base in bases[:2]:
            for suffix in (".index", ".timeindex") + ((".log",) if base != bases[0] else ()):
                (directory / f"{base:020d}{suffix}").unlink(missing_ok=True)
    if state == "completed":
        swap_file.rename(directory / f"{bases[0]:020d}.log")
    with PartitionLog(directory, small_config(segment_bytes=1500)) as log:
        assert log_records(log) == records
        assert log.segment_base_offsets == ([bases[0], *bases[2:]] if state != "cleaned" else bases)
        assert bool(log.recovery.swaps) is (state in ("cleaned", "renamed", "old-deleted"))
        assert log.recovery.clean
    assert not [name for name in files(directory) if name.endswith((".cleaned", ".swap"))]


def test_commit_swap_replaces_the_group_and_leaves_no_side_files(tmp_path: Path) -> None:
    directory = tmp_path / "p"
    bases, records = _log(directory)
    _cleaned_copy(directory, bases)
    target = swap.commit_swap(directory, bases[0], bases[:2])
    assert target.name == f"{bases[0]:020d}.log"
    assert not (directory / f"{bases[1]:020d}.log").exists()
    assert not [name for name in files(directory) if name.endswith((".cleaned", ".swap"))]
    with PartitionLog(directory, small_config(segment_bytes=1500)) as log:
        assert log_records(log) == records


def test_a_missing_cleaned_file_changes_nothing(tmp_path: Path) -> None:
    directory = tmp_path / "p"
    bases, records = _log(directory)
    before = files(directory)
    with pytest.raises(FileNotFoundError):
        swap.commit_swap(directory, bases[0], bases[:2])
    assert files(directory) == before


def test_a_damaged_swap_file_is_left_to_the_logs_recovery(tmp_path: Path) -> None:
    directory = tmp_path / "p"
    bases, records = _log(directory)
    _cleaned_copy(directory, bases)
    swap_file = directory / f"{bases[0]:020d}.log.swap"
    swap.cleaned_path(directory, bases[0]).rename(swap_file)
    data = bytearray(swap_file.read_bytes())
    data[9] ^= 0xFF  # an impossible frame length in the first header
    swap_file.write_bytes(bytes(data))
    shutil.copy(swap_file, tmp_path / "evidence")
    with PartitionLog(directory, small_config(segment_bytes=1500)) as log:
        assert not log.recovery.clean  # cut, and what followed dropped: disk damage, reported
        assert log.log_end_offset < records[-1].offset + 1
