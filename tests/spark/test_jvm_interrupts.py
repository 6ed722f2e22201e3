"""The JVM connector on a thread whose interrupt flag is set, as Spark leaves its stream thread
when a query is stopped (``connectors/jvm``: MemoryChannels.java, Interrupts.java).

A benchmark's stopped query once ended as failed with "InvalidSchemaError: cannot read a
topic schema: ClosedByInterruptException": the schema was parsed through an interruptible
channel.  Parsing bytes in memory must not see the interrupt, and what a backoff sleep throws
on one must be what Spark takes for an interruption (a stopped query, not a failed one)."""
from __future__ import annotations

from typing import Any

import pyarrow as pa

from tests.support.jvm import require_jvm


def test_a_schema_parses_on_an_interrupted_thread(spark: Any) -> None:
    require_jvm()
    schema = pa.schema([("user", pa.string()), ("amount", pa.int64())])
    probe = spark.sparkContext._jvm.io.sparklog.spark.InterruptProbe
    parsed = probe.readSchemaInterrupted(bytearray(schema.serialize()))
    assert "user" in parsed and "amount" in parsed


def test_an_interrupted_backoff_reads_as_a_stop_to_spark(spark: Any) -> None:
    require_jvm()
    probe = spark.sparkContext._jvm.io.sparklog.spark.InterruptProbe
    recognised, flag_kept = list(probe.sleepInterrupted())
    assert recognised, "Spark would report a query stopped during a backoff as failed"
    assert flag_kept, "the thread's interrupt flag was swallowed"
