"""bench.memory_limit: the memory cgroup the replication bench's steady-state run puts the
brokers in.  The file layout of cgroup v1 and v2 on a directory of the test's own, and the
real thing where this machine allows it (root, a memory controller)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bench.memory_limit import MemoryCgroup, MemoryCgroupUnavailable

MiB = 1 << 20


def test_v1_layout(tmp_path: Path) -> None:
    home = tmp_path / "memory" / "box"
    home.mkdir(parents=True)
    cgroup = MemoryCgroup(64 * MiB, "t", root=tmp_path, proc_cgroup=["4:memory:/box", "0::/"])
    assert cgroup.version == 1 and cgroup.path.parent == home
    assert (cgroup.path / "memory.limit_in_bytes").read_text() == str(64 * MiB)
    cgroup.add(4242)
    assert (cgroup.path / "cgroup.procs").read_text() == "4242"
    (cgroup.path / "memory.usage_in_bytes").write_text("1234\n")
    (cgroup.path / "memory.failcnt").write_text("7\n")
    assert cgroup.usage_bytes() == 1234 and cgroup.limit_hits() == 7
    cgroup.close()
    assert (home / "cgroup.procs").read_text() == "4242"  # moved back where this process is


def test_v2_layout(tmp_path: Path) -> None:
    (tmp_path / "cgroup.controllers").write_text("cpu io memory pids\n")
    home = tmp_path / "user.slice"
    home.mkdir()
    cgroup = MemoryCgroup(32 * MiB, "t", root=tmp_path, proc_cgroup=["0::/user.slice"])
    assert cgroup.version == 2 and cgroup.path.parent == home
    assert (cgroup.path / "memory.max").read_text() == str(32 * MiB)
    (cgroup.path / "memory.current").write_text("99\n")
    (cgroup.path / "memory.events").write_text("low 0\nhigh 0\nmax 3\noom 0\noom_kill 0\n")
    assert cgroup.usage_bytes() == 99 and cgroup.limit_hits() == 3


def test_refused_without_a_memory_controller(tmp_path: Path) -> None:
    (tmp_path / "cgroup.controllers").write_text("cpu io\n")
    with pytest.raises(MemoryCgroupUnavailable, match="no cgroup memory controller"):
        MemoryCgroup(MiB, root=tmp_path, proc_cgroup=["0::/", "3:cpu:/"])
    with pytest.raises(ValueError, match="positive"):
        MemoryCgroup(0, root=tmp_path, proc_cgroup=["0::/"])


def test_a_real_cgroup_caps_a_writers_page_cache(tmp_path: Path) -> None:
    """A process put in a cgroup of 64 MiB writes 160 MiB to a file: its page cache stays
    under the limit (the cgroup reclaims), and close() takes the process out and removes the
    cgroup.  The writer syncs every 32 MiB, so the reclaim never waits long on dirty pages
    on a busy disk."""
    try:
        cgroup = MemoryCgroup(64 * MiB, "spark-log-test")
    except MemoryCgroupUnavailable as exc:
        pytest.skip(f"no memory cgroup here: {exc}")
    script = ("import os, sys\nsys.stdin.readline()\nchunk = os.urandom(1 << 20)\n"
              f"with open({str(tmp_path / 'data.bin')!r}, 'wb') as f:\n"
              "    for i in range(160):\n        f.write(chunk)\n"
              "        if i % 32 == 31:\n            f.flush()\n            os.fdatasync(f.fileno())\n"
              "print('done', flush=True)\nsys.stdin.readline()\n")
    child = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdin is not None and child.stdout is not None
        cgroup.add(child.pid)
        child.stdin.write("go\n")
        child.stdin.flush()
        assert child.stdout.readline() == "done\n"
        assert cgroup.limit_hits() > 0
        assert cgroup.usage_bytes() <= 64 * MiB
        path = cgroup.path
        cgroup.close()
        assert not path.exists()
        assert path.name not in Path(f"/proc/{child.pid}/cgroup").read_text()
    finally:
        cgroup.close()
        child.kill()
        child.wait()


def test_fill_produces_until_the_limit_is_reached(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "memory" / "box").mkdir(parents=True)
    cgroup = MemoryCgroup(64 * MiB, "t", root=tmp_path, proc_cgroup=["4:memory:/box"])
    calls: list[int] = []

    def produce() -> int:
        calls.append(1)
        if len(calls) == 3:  # the kernel's count of reclaims, as it would grow
            (cgroup.path / "memory.failcnt").write_text("5\n")
        return 1000

    cgroup.fill(produce, "the brokers")
    assert len(calls) == 3
    assert "memory: the brokers in a memory cgroup of 64 MiB (cgroup v1), filled by 3,000 records" in capsys.readouterr().out
    with pytest.raises(RuntimeError, match="the memory cgroup of the brokers did not reach its 64 MiB limit"):
        (cgroup.path / "memory.failcnt").write_text("0\n")
        cgroup.fill(lambda: 0, "the brokers", deadline_s=0.0)
