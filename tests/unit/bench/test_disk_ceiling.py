"""bench.ceilings.disk_write_ceiling: the sustained-disk bound the replication bench prints."""
from __future__ import annotations

import os
import shutil
from collections import namedtuple
from pathlib import Path

import pytest

from bench import ceilings


def test_writes_syncs_and_removes_its_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[int] = []
    real_fdatasync = os.fdatasync

    def fdatasync(fd: int) -> None:
        synced.append(os.fstat(fd).st_size)
        real_fdatasync(fd)

    monkeypatch.setattr(os, "fdatasync", fdatasync)
    got = ceilings.disk_write_ceiling(100, str(tmp_path), mib=4)
    assert got is not None and got.records_per_s > 0 and got.cpu_us_per_record >= 0
    assert synced == [4 << 20]  # every byte written before the clock stopped, then synced once
    assert list(tmp_path.iterdir()) == []  # the file is gone


def test_refuses_a_disk_without_room(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda _path: usage(1 << 30, 0, (2 * 4 << 20) - 1))
    assert ceilings.disk_write_ceiling(100, str(tmp_path), mib=4) is None
    assert list(tmp_path.iterdir()) == []
