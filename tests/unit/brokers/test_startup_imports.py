"""A broker or controller node starts without importing pandas: pandas is ~300 modules and
seconds of start-up on a loaded machine, and nodes that must start within a test's bound
never use it (``pa.array`` at module level imports it through pyarrow's pandas shim)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support.wait import wait_until

ROOT = Path(__file__).resolve().parents[3]


def test_importing_the_node_does_not_import_pandas() -> None:
    code = "import sys, brokers.node; print(sorted(m for m in sys.modules if m.split('.')[0] == 'pandas')[:3])"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          check=True)
    assert done.stdout.strip() == "[]", done.stdout


def _pandas_mapped(pid: int) -> list[str]:
    """The pandas files (its C extensions) mapped into process ``pid``: any import of pandas maps them."""
    maps = Path(f"/proc/{pid}/maps").read_text()
    return sorted({line.split()[-1] for line in maps.splitlines() if "/pandas/" in line})


def test_a_node_process_serves_a_write_and_a_read_without_pandas(tmp_path: Path) -> None:
    """``python -m brokers.node`` refuses pandas (``brokers.net.without_pandas``): its Arrow
    warm-up, a leader append of Python-built arrays and a fetch all run without it."""
    from brokers.launcher.local import LocalCluster
    from spark_log import Admin, Consumer, Producer

    cluster = LocalCluster(tmp_path / "cluster", brokers=1)
    try:
        bootstrap = cluster.up(timeout_s=120)
        cluster.wait_healthy(timeout_s=120)
        with Admin(bootstrap) as admin:
            admin.create_topic("t", partitions=1)
        with Producer(bootstrap) as producer:
            producer.send("t", value=b"v", key=b"k").result(timeout=60)
        with Consumer(bootstrap, auto_offset_reset="earliest") as consumer:
            consumer.assign([("t", 0)])
            seen: list[bytes] = []
            wait_until(lambda: seen.extend(r.value for r in consumer.poll(0.2)) or seen, timeout=60,
                       message="the record was not read back")
        assert seen == [b"v"]
        [(_, _, pid, alive)] = cluster.status()
        assert alive
        assert _pandas_mapped(pid) == []
        # the control: this test's own process has pandas, and the same check sees it
        import pandas  # noqa: F401

        assert _pandas_mapped(os.getpid())
    finally:
        cluster.down()


def test_refusing_pandas_keeps_pa_array_and_fails_only_pandas_imports() -> None:
    code = ("import sys; from brokers.net.without_pandas import refuse_pandas; refuse_pandas(); refuse_pandas()\n"
            "import pyarrow as pa\n"
            "assert pa.array([b'a', None], pa.binary()).to_pylist() == [b'a', None]\n"
            "assert pa.array([1, 2]).type == pa.int64()\n"
            "try:\n    import pandas\nexcept ModuleNotFoundError as exc:\n    print('refused', exc.name)\n"
            "try:\n    import pandas.core.frame\nexcept ModuleNotFoundError as exc:\n    print('refused', exc.name)\n"
            "print(sum(1 for m in sys.modules if m.split('.')[0] == 'pandas'))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          check=True)
    assert done.stdout.split("\n")[:3] == ["refused pandas", "refused pandas", "0"], done.stdout
