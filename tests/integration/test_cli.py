"""The ``spark-log`` command line, run as a subprocess against real clusters."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


def _cli(*args: str, bootstrap: str | None = None, stdin: str | bytes | None = None,
         env: dict[str, str] | None = None, timeout: float = 120, binary: bool = False
         ) -> subprocess.CompletedProcess[Any]:
    """Runs ``spark-log ARGS``; text in and out, or bytes when ``binary`` or ``stdin`` is bytes."""
    full = dict(os.environ, PYTHONPATH=str(REPO), **(env or {}))
    if bootstrap:
        full["SPARK_LOG_BOOTSTRAP"] = bootstrap
    return subprocess.run([sys.executable, "-m", "spark_log.cli", *args], input=stdin, capture_output=True,
                          text=not (binary or isinstance(stdin, bytes)), timeout=timeout, env=full, cwd=REPO)


def _read_all(bootstrap: str, topic: str, count: int, partitions: int = 1) -> list[tuple[bytes | None, bytes | None]]:
    """The first ``count`` (key, value) pairs of ``topic`` (fewer if they do not come in 30 s)."""
    from spark_log import Consumer

    got: list[tuple[bytes | None, bytes | None]] = []
    with Consumer(bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([(topic, p) for p in range(partitions)])
        deadline = time.monotonic() + 30
        while len(got) < count and time.monotonic() < deadline:
            got.extend((r.key, r.value) for r in consumer.poll(0.5))
    return got


def test_topics_produce_consume(bootstrap: str, topic_name: str) -> None:
    created = _cli("topics", "create", topic_name, "--partitions", "2", "--config", "retention.ms=3600000",
                   bootstrap=bootstrap)
    assert created.returncode == 0, created.stderr
    assert topic_name in _cli("topics", "list", bootstrap=bootstrap).stdout.split()
    described = _cli("topics", "describe", topic_name, bootstrap=bootstrap)
    assert "partitions 2" in described.stdout and "retention.ms=3600000" in described.stdout
    lines = "".join(f"user{i % 3}:event {i}\n" for i in range(20))
    produced = _cli("produce", topic_name, "--key-separator", ":", bootstrap=bootstrap, stdin=lines)
    assert produced.returncode == 0 and "sent 20 records" in produced.stderr
    consumed = _cli("consume", topic_name, "--from-beginning", "--max-records", "20", "--print-key",
                    bootstrap=bootstrap)
    assert consumed.returncode == 0, consumed.stderr
    got = sorted(consumed.stdout.splitlines())
    assert got == sorted(f"user{i % 3}\tevent {i}" for i in range(20))
    one = _cli("consume", topic_name, "--partition", "0", "--offset", "1", "--max-records", "1", bootstrap=bootstrap)
    assert one.returncode == 0 and len(one.stdout.splitlines()) == 1
    assert _cli("topics", "delete", topic_name, bootstrap=bootstrap).returncode == 0
    assert topic_name not in _cli("topics", "list", bootstrap=bootstrap).stdout.split()


@pytest.mark.parametrize(("args", "needle"), [
    (("topics", "describe", "no-such-topic"), "UNKNOWN_TOPIC_OR_PARTITION"),
    (("topics", "create", "bad-config-topic", "--config", "retention.ms=soon"), "INVALID_CONFIG"),
    (("topics", "create", "bad-config-topic", "--config", "novalue"), "KEY=VALUE"),
    (("consume", "no-such-topic", "--max-records", "1"), "UNKNOWN_TOPIC_OR_PARTITION"),
])
def test_errors_are_one_line(bootstrap: str, args: tuple[str, ...], needle: str) -> None:
    result = _cli(*args, bootstrap=bootstrap)
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1 and needle in result.stderr and "Traceback" not in result.stderr


def test_no_cluster_is_a_clear_error(tmp_path: Path) -> None:
    result = _cli("topics", "list", env={"SPARK_LOG_DATA_DIR": str(tmp_path)})
    assert result.returncode == 1 and "spark-log dev up" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.slow
def test_dev_up_status_down_keeps_data(tmp_path: Path) -> None:
    data_dir = str(tmp_path / "dev")
    env = {"SPARK_LOG_DATA_DIR": data_dir}
    try:
        up = _cli("dev", "up", "--brokers", "1", "--progress", env=env, timeout=180)
        assert up.returncode == 0, up.stderr
        # the bar on stderr: 1 node answering + 1 broker live everywhere, out of 2
        assert "starting the local cluster: healthy" in up.stderr and "2/2" in up.stderr and "100%" in up.stderr
        bootstrap = up.stdout.strip()
        assert bootstrap == Path(data_dir, "bootstrap").read_text().strip()
        assert _cli("dev", "status", env=env).returncode == 0
        assert _cli("topics", "create", "kept", env=env).returncode == 0  # found through the bootstrap file
        assert _cli("produce", "kept", env=env, stdin="hello\nworld\n").returncode == 0
        down = _cli("dev", "down", env=env)
        assert down.returncode == 0 and "data kept" in down.stderr
        assert _cli("dev", "status", env=env).returncode == 1
        again_up = _cli("dev", "up", "--brokers", "1", "--no-progress", env=env, timeout=180)
        assert again_up.returncode == 0 and "starting the local cluster" not in again_up.stderr
        again = _cli("consume", "kept", "--from-beginning", "--max-records", "2", env=env)
        assert again.stdout.splitlines() == ["hello", "world"]
    finally:
        _cli("dev", "down", env=env)


def test_spark_cluster_subcommand_reaches_the_hosting_application(tmp_path: Path) -> None:
    """`spark-log spark-cluster ...` runs `python -m jobs.spark_cluster ...` with every flag."""
    helped = _cli("spark-cluster", "--help")
    assert helped.returncode == 0 and "start" in helped.stdout
    status = _cli("spark-cluster", "status", "--data-dir", str(tmp_path / "none"))
    assert status.returncode == 1 and "absent" in status.stdout


def test_produce_from_stdin_ships_in_chunks_and_loses_nothing(bootstrap: str, topic_name: str) -> None:
    """Input larger than two of ``produce``'s chunks (4 Mi characters each): each chunk ships
    while the acknowledgements of the one before are awaited; every line arrives once, in
    order within its key's partition."""
    from spark_log import Admin, Consumer
    from spark_log.cli import _STDIN_CHUNK_BYTES

    with Admin(bootstrap) as admin:
        admin.create_topic(topic_name, partitions=3)
    count = 9_000
    lines = [f"k{i % 40},{i:06d}{'v' * 1_000}" for i in range(count)]
    assert sum(len(line) + 1 for line in lines) > 2 * _STDIN_CHUNK_BYTES
    produced = _cli("produce", topic_name, "--key-separator", ",", bootstrap=bootstrap, stdin="\n".join(lines) + "\n")
    assert produced.returncode == 0 and f"sent {count} records" in produced.stderr, produced.stderr
    got: list[tuple[bytes, bytes]] = []
    with Consumer(bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([(topic_name, p) for p in range(3)])
        deadline = time.monotonic() + 60
        while len(got) < count and time.monotonic() < deadline:
            for batch in consumer.poll_arrow(0.5):
                got.extend(zip(batch.column("key").to_pylist(), batch.column("value").to_pylist()))
    assert len(got) == count
    by_key: dict[bytes, list[int]] = {}
    for key, value in got:
        by_key.setdefault(key, []).append(int(value[:6]))
    assert sorted(i for seen in by_key.values() for i in seen) == list(range(count))
    assert all(seen == sorted(seen) and all(i % 40 == int(key[1:]) for i in seen) for key, seen in by_key.items())


def test_produce_sends_the_bytes_of_stdin_lines_as_they_are(bootstrap: str, topic_name: str) -> None:
    """Lines that are not UTF-8 are sent unchanged (as Kafka's console producer does), keys
    too; a line loses only its ``\\n`` or ``\\r\\n``."""
    from spark_log import Admin

    with Admin(bootstrap) as admin:
        admin.create_topic(topic_name, partitions=1)
    produced = _cli("produce", topic_name, bootstrap=bootstrap, stdin=b"ok\n\xff\xfe\x00bin\n")
    assert produced.returncode == 0 and b"sent 2 records" in produced.stderr, produced.stderr
    produced = _cli("produce", topic_name, "--key-separator", ":", bootstrap=bootstrap, stdin=b"k\xff:v\x80\r\n")
    assert produced.returncode == 0 and b"sent 1 records" in produced.stderr, produced.stderr
    assert _read_all(bootstrap, topic_name, 3) == [(None, b"ok"), (None, b"\xff\xfe\x00bin"), (b"k\xff", b"v\x80")]


def test_produce_refuses_a_line_without_the_key_separator(bootstrap: str, topic_name: str) -> None:
    """As Kafka's console producer: a line meant to carry a key but without the separator is
    an error (it was sent without a key); the lines before it are sent, none after."""
    from spark_log import Admin

    with Admin(bootstrap) as admin:
        admin.create_topic(topic_name, partitions=1)
    produced = _cli("produce", topic_name, "--key-separator", ":", bootstrap=bootstrap, stdin=b"a:1\nnosep\nb:2\n")
    assert produced.returncode == 1 and b"line 2 has no key separator" in produced.stderr, produced.stderr
    assert produced.stderr.count(b"\n") == 1, produced.stderr   # one line, no traceback
    assert _read_all(bootstrap, topic_name, 1) == [(b"a", b"1")]
    with Admin(bootstrap) as admin:
        assert admin.list_offsets(topic_name, "latest") == {0: 1}


def _main(capsys: pytest.CaptureFixture[str], bootstrap: str, *args: str) -> tuple[int, str, str]:
    """``spark-log ARGS`` in this process: (exit code, stdout, stderr)."""
    from spark_log.cli import main

    code = main(["--bootstrap", bootstrap, *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_consume_refuses_from_beginning_with_offset(bootstrap: str, topic_name: str,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """Both say where to start: refused, as Kafka's console consumer refuses them together
    (--offset used to win silently)."""
    from spark_log import Admin

    with Admin(bootstrap) as admin:
        admin.create_topic(topic_name, partitions=1)
    code, out, err = _main(capsys, bootstrap, "consume", topic_name, "--from-beginning", "--partition", "0",
                           "--offset", "0", "--max-records", "1", "--timeout-ms", "0")
    assert code == 1 and out == "" and err.count("\n") == 1 and "--from-beginning and --offset" in err, err


@pytest.mark.parametrize(("flags", "needle"), [
    (("--max-records", "-1", "--timeout-ms", "0"), "--max-records must be >= 1"),
    (("--max-records", "0", "--timeout-ms", "0"), "--max-records must be >= 1"),
    (("--timeout-ms", "-5", "--max-records", "1"), "--timeout-ms must be >= 0"),
])
def test_consume_refuses_negative_limits(bootstrap: str, topic_name: str, capsys: pytest.CaptureFixture[str],
                                         flags: tuple[str, ...], needle: str) -> None:
    """They used to end the command at once, exit code 0, nothing read."""
    from spark_log import Admin

    with Admin(bootstrap) as admin:
        admin.create_topic(topic_name, partitions=1)
    code, out, err = _main(capsys, bootstrap, "consume", topic_name, "--from-beginning", *flags)
    assert code == 1 and out == "" and err.count("\n") == 1 and needle in err, err
