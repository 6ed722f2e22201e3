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
"""
from __future__ import annotations

import os
import sys


def _format() -> str:
    """``SPARK_LOG_JOB_IMPL=jvm``: the JVM implementation (by class name), else the Python one."""
    from connectors.session import JVM_CLASS

    return JVM_CLASS if os.environ.get("SPARK_LOG_JOB_IMPL") == "jvm" else "spark-log"


def _session() -> object:
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
            # both sinks cut a task's rows into chunks of this many rows (one frame per chunk and partition)
            "spark.sql.execution.arrow.maxRecordsPerBatch": "100",
            "spark.sql.streaming.stopTimeout": "10s",
            **({"spark.jars": jar} if jar else {}),
        },
    )


def _read(bootstrap: str, topic: str, checkpoint: str, output: str, mode: str) -> None:
    spark = _session()
    df = (spark.readStream.format(_format()).option("bootstrap", bootstrap).option("subscribe", topic)  # type: ignore[attr-defined]
          .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "600").load()
          .selectExpr("cast(value as string) as value", "partition", "offset"))
    writer = df.writeStream.format("parquet").option("path", output).option("checkpointLocation", checkpoint)
    writer = writer.trigger(availableNow=True) if mode == "drain" else writer.trigger(processingTime="0 seconds")
    writer.start().awaitTermination()


def _write(bootstrap: str, input_dir: str, topic: str, checkpoint: str, gate_id: str, mode: str = "") -> None:
    from pyspark.sql import functions as F

    spark = _session()
    value = F.col("value")
    if gate_id:
        stall = F.expr("substr(reflect('java.lang.Thread', 'sleep', cast(3600000 as bigint)), 0, 0)")
        value = F.when(F.col("id") == int(gate_id), F.concat(value, stall)).otherwise(value)
    df = (spark.readStream.schema("id long, value string").option("maxFilesPerTrigger", "1").parquet(input_dir)  # type: ignore[attr-defined]
          .select(F.col("id").cast("string").alias("key"), value.alias("value")))
    writer = (df.writeStream.format(_format()).option("bootstrap", bootstrap).option("topic", topic)
              .option("checkpointLocation", checkpoint).trigger(availableNow=True))
    if mode == "transactional":
        writer = writer.option("transactional", "true").option("transactionTimeoutMs", "120000")
    query = writer.start()
    query.awaitTermination()


def main(argv: list[str]) -> None:
    if argv[0] == "read":
        _read(*argv[1:6])
    elif argv[0] == "write":
        _write(*argv[1:7])
    else:
        raise SystemExit(f"unknown mode {argv[0]!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
