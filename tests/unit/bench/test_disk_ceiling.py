"""bench.ceilings.disk_write_ceiling and page_cache_ceiling: the disk and page-cache bounds the
replication bench prints."""
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


def test_page_cache_ceiling_writes_twice_into_fresh_then_recycled_pages(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The page-cache ceiling writes a file, deletes it, then writes another (into the pages
    the first freed): two ceilings, each of the whole size, and no file left."""
    written: list[tuple[str, int]] = []
    real_pwritev = os.pwritev

    def pwritev(fd: int, buffers: list[bytes], offset: int) -> int:
        written.append((os.readlink(f"/proc/self/fd/{fd}"), offset))
        return real_pwritev(fd, buffers, offset)

    monkeypatch.setattr(os, "pwritev", pwritev)
    first, recycled = ceilings.page_cache_ceiling(100, str(tmp_path), mib=3)
    assert [c.name for c in (first, recycled)] == ["page cache append, first write", "page cache append, recycled pages"]
    assert all(c.records_per_s > 0 and c.cpu_us_per_record >= 0 for c in (first, recycled))
    assert [offset for _, offset in written] == [0, 1 << 20, 2 << 20] * 2  # two files of 3 MiB
    assert list(tmp_path.iterdir()) == []
