"""Streaming queries run in their own process, so tests can kill -9 them mid-flight.

    python -m tests.spark.kill_job read  BOOTSTRAP TOPIC CHECKPOINT OUTPUT_DIR {run|drain}
    python -m tests.spark.kill_job write BOOTSTRAP INPUT_DIR TOPIC CHECKPOINT GATE_ID [transactional]

``read``: spark-log topic -> parquet file sink (exactly-once through its metadata log);
``run`` keeps going until killed, ``drain`` stops once caught up (Trigger.AvailableNow).

``SPARK_LOG_JOB_IMPL=jvm`` runs either through the JVM implementation (its jar on spark.jars,
the format by class name) instead of the Python one.

``write``: parquet files (``id``, ``value``; one file per micro-batch) -> spark-log topic,
Trigger.AvailableNow.  The task that meets row GATE_ID ("" for none) stalls there (a
JVM-side ``Thread.sleep`` in the projection, no Python UDF), after the rows before it went
out in Arrow batches of 100: the test sees a half-written micro-batch in the topic and
kills the process.

A test restarts the last query from a killed job's checkpoint in its own session
(``finish_in_session`` with ``read_query`` or ``write_query``): the same query, without a
Spark application's start.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Callable


#: Every kill job's query cuts a task's rows into chunks of this many rows (both sinks write one
#: frame per chunk and partition); a test that finishes a query in its own session sets it too.
JOB_CONF = {"spark.sql.execution.arrow.maxRecordsPerBatch": "100"}


def write_input_files(folder: Path, files: int, rows_per_file: int, *, value_bytes: int) -> None:
    """The ``write`` job's input: file ``k`` holds ids ``k * rows_per_file`` up to the next
    file's first, values ``v<id>-`` and ``value_bytes`` of ``x``.  ``maxFilesPerTrigger=1``
    makes file ``k`` micro-batch ``k`` only when the files' modification times are in that
    order: Spark's file source sorts by them, and breaks a tie in the directory's listing
    order (hash order on ext4: part-001 before part-000).  Files written back to back can
    share a time (the kernel stamps them from a clock that ticks every 4 ms here, and one of
    the kill tests' files takes 4-16 ms to write), so each gets its own second, in order."""
    import time

    import pyarrow as pa
    import pyarrow.parquet as pq

    folder.mkdir(parents=True, exist_ok=True)
    first = int(time.time()) - files
    for k in range(files):
        ids = list(range(k * rows_per_file, (k + 1) * rows_per_file))
        path = folder / f"part-{k:03d}.parquet"
        pq.write_table(pa.table({"id": ids, "value": [f"v{i}-" + "x" * value_bytes for i in ids]}), path)
        os.utime(path, (first + k, first + k))


def _format() -> str:
    """``SPARK_LOG_JOB_IMPL=jvm``: the JVM implementation (by class name), else the Python one."""
    from connectors.session import JVM_CLASS

    return JVM_CLASS if os.environ.get("SPARK_LOG_JOB_IMPL") == "jvm" else "spark-log"


def _session() -> Any:
    import tempfile

    from connectors.session import local_session, unregistered_jvm_jar

    jar = unregistered_jvm_jar(tempfile.mkdtemp(prefix="kill-job-jar-")) if _format() != "spark-log" else None
    return local_session(
        os.environ.get("SPARK_LOG_BOOTSTRAP"),
        app_name="spark-log-kill-job",
        connector="python",  # ``spark-log`` is the Python data source; the JVM one by class name (_format)
        conf={
            "spark.sql.shuffle.partitions": "2",
            "spark.driver.memory": "512m",
            "spark.sql.streaming.stopTimeout": "10s",
            **JOB_CONF,
            **({"spark.jars": jar} if jar else {}),
        },
    )


def read_query(spark: Any, fmt: str, bootstrap: str, topic: str, checkpoint: str, output: str, mode: str) -> Any:
    """The ``read`` job's query, started in ``spark`` with the format name ``fmt``."""
    df = (spark.readStream.format(fmt).option("bootstrap", bootstrap).option("subscribe", topic)
          .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "600").load()
          .selectExpr("cast(value as string) as value", "partition", "offset"))
    writer = df.writeStream.format("parquet").option("path", output).option("checkpointLocation", checkpoint)
    writer = writer.trigger(availableNow=True) if mode == "drain" else writer.trigger(processingTime="0 seconds")
    return writer.start()


def write_query(spark: Any, fmt: str, bootstrap: str, input_dir: str, topic: str, checkpoint: str, gate_id: str,
                mode: str = "") -> Any:
    """The ``write`` job's query, started in ``spark`` with the format name ``fmt``."""
    from pyspark.sql import functions as F

    value = F.col("value")
    if gate_id:
        stall = F.expr("substr(reflect('java.lang.Thread', 'sleep', cast(3600000 as bigint)), 0, 0)")
        value = F.when(F.col("id") == int(gate_id), F.concat(value, stall)).otherwise(value)
    df = (spark.readStream.schema("id long, value string").option("maxFilesPerTrigger", "1").parquet(input_dir)
          .select(F.col("id").cast("string").alias("key"), value.alias("value")))
    writer = (df.writeStream.format(fmt).option("bootstrap", bootstrap).option("topic", topic)
              .option("checkpointLocation", checkpoint).trigger(availableNow=True))
    if mode == "transactional":
        writer = writer.option("transactional", "true").option("transactionTimeoutMs", "120000")
    return writer.start()


def finish_in_session(spark: Any, start: Callable[[Any], Any], timeout: float = 300) -> None:
    """The last restart from a killed job's checkpoint, which nothing kills, run in a test's own
    session (saving a Spark application's start) with the jobs' ``JOB_CONF``: ``start(spark)``
    starts the query (``read_query`` in ``drain`` mode or ``write_query`` without a gate, both
    Trigger.AvailableNow); it must end on its own within ``timeout`` and without an error."""
    before = {key: spark.conf.get(key) for key in JOB_CONF}
    for key, value in JOB_CONF.items():
        spark.conf.set(key, value)
    try:
        query = start(spark)
        try:
            finished = query.awaitTermination(timeout)
        finally:
            query.stop()
    finally:
        for key, value in before.items():
            spark.conf.set(key, value)
    assert finished, f"the restarted query did not finish in {timeout} s"
    assert query.exception() is None, query.exception()


def main(argv: list[str]) -> None:
    if argv[0] == "read":
        read_query(_session(), _format(), *argv[1:6]).awaitTermination()
    elif argv[0] == "write":
        write_query(_session(), _format(), *argv[1:7]).awaitTermination()
    else:
        raise SystemExit(f"unknown mode {argv[0]!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
