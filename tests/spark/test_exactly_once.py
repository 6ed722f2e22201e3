"""Exactly-once across process kills (kill -9 of the whole query process group).

- A reading query (topic -> parquet file sink with a checkpoint) is killed and restarted
  several times while a producer keeps writing: the output holds every record once.
- A writing query (parquet files -> topic) is killed in the middle of a micro-batch,
  after some of that batch's rows reached the topic, twice: the topic holds every input
  row once.
"""
from __future__ import annotations

import subprocess
import threading
from pathlib import Path
from typing import Any, Callable

import pyarrow as pa
import pytest

from tests.spark.job_process import kill_job, start_job
from tests.spark.kill_job import finish_in_session, read_query, write_input_files, write_query
from tests.support.wait import wait_until

pytestmark = [pytest.mark.spark, pytest.mark.slow]



def _start(log: Path, *args: str, impl: str = "python") -> subprocess.Popen[bytes]:
    """A kill job (``tests.spark.job_process``) using the ``impl`` implementation of spark-log
    (``python`` or ``jvm``)."""
    return start_job(log, {"SPARK_LOG_JOB_IMPL": impl}, *args)


_kill = kill_job


def _commits(checkpoint: Path) -> int:
    folder = checkpoint / "commits"
    return len([p for p in folder.iterdir() if p.name.isdigit()]) if folder.exists() else 0


def _total(admin: Any, topic: str) -> int:
    return sum(admin.list_offsets(topic, "latest").values())


def _impl(fmt: str) -> str:
    return "python" if fmt == "spark-log" else "jvm"


def test_reader_killed_and_restarted_reads_every_record_once(
    spark: Any, log_cluster: Any, admin: Any, topic_name: Callable[[], str], tmp_path: Path, fmt: str
) -> None:
    from spark_log import Producer

    topic = topic_name()
    admin.create_topic(topic, partitions=2)
    checkpoint, output, log = tmp_path / "checkpoint", tmp_path / "out", tmp_path / "job.log"
    produced: list[str] = []
    stop = threading.Event()
    errors: list[BaseException] = []

    def produce() -> None:
        producer = Producer(log_cluster.bootstrap)
        try:
            chunk = 0
            while not stop.is_set() and chunk < 80:
                values = [f"r{chunk}-{i}" for i in range(25)]
                batch = pa.RecordBatch.from_pydict({"key": [v.encode() for v in values], "value": [v.encode() for v in values]})
                for future in producer.send_batch(topic, batch, partition=chunk % 2):
                    future.result(timeout=60)
                produced.extend(values)
                chunk += 1
                stop.wait(0.1)  # pacing: a steady trickle of records, not synchronisation
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)
        finally:
            producer.close()

    writer = threading.Thread(target=produce, daemon=True)
    writer.start()
    try:
        for _ in range(3):
            before = _commits(checkpoint)
            job = _start(log, "read", log_cluster.bootstrap, topic, str(checkpoint), str(output), "run", impl=_impl(fmt))
            try:
                wait_until(lambda: _commits(checkpoint) >= before + 1 or job.poll() is not None, timeout=240,
                           message=lambda: "the reading query committed no new micro-batch:\n" + log.read_text(errors="replace")[-2000:])
                assert job.poll() is None, "the reading query died on its own"
            finally:
                _kill(job)
    finally:
        stop.set()
        writer.join(timeout=60)
    assert not errors, errors
    # the last restart from the killed jobs' checkpoint, which nothing kills, in the test's own session
    finish_in_session(spark, lambda session: read_query(session, fmt, log_cluster.bootstrap, topic, str(checkpoint),
                                                        str(output), "drain"))

    values = [r.value for r in spark.read.parquet(str(output)).select("value").collect()]
    assert len(values) == len(set(values)), "duplicates in the output"
    assert sorted(values) == sorted(produced)


def test_writer_killed_mid_batch_writes_every_row_once(
    spark: Any, log_cluster: Any, admin: Any, topic_name: Callable[[], str], tmp_path: Path, fmt: str
) -> None:
    topic = topic_name()
    admin.create_topic(topic, partitions=3)
    inputs, checkpoint, log = tmp_path / "in", tmp_path / "checkpoint", tmp_path / "job.log"
    rows_per_file, files = 500, 4
    # one file per micro-batch, in order; 1 KiB values: an Arrow batch of 100 rows overflows
    # Spark's 64 KiB socket buffer to the Python writer, so the rows before a stall really reach it
    write_input_files(inputs, files, rows_per_file, value_bytes=1024)

    for gate in (700, 1850):  # row 200 of the 2nd file, row 350 of the 4th
        job = _start(log, "write", log_cluster.bootstrap, str(inputs), topic, str(checkpoint), str(gate), impl=_impl(fmt))
        floor = gate // rows_per_file * rows_per_file
        try:
            # the stalled task has sent the rows before the gate: that micro-batch is half written
            wait_until(lambda: job.poll() is not None or (_total(admin, topic) > floor and _total(admin, topic) % rows_per_file != 0),
                       timeout=300, message=lambda: f"no half-written micro-batch before row {gate}:\n" + log.read_text(errors="replace")[-2000:])
            assert job.poll() is None, "the writing query died on its own:\n" + log.read_text(errors="replace")[-2000:]
        finally:
            _kill(job)
    finish_in_session(spark, lambda session: write_query(session, fmt, log_cluster.bootstrap, str(inputs), topic,
                                                         str(checkpoint), ""))

    out = spark.read.format("spark-log").option("bootstrap", log_cluster.bootstrap).option("subscribe", topic).load()
    keys = [int(r.key) for r in out.select("key").collect()]
    assert len(keys) == len(set(keys)), f"{len(keys) - len(set(keys))} rows appended twice"
    assert sorted(keys) == list(range(files * rows_per_file))
