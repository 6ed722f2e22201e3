"""A typed topic's sink refuses a DataFrame 'timestamp' column, in both implementations: a
typed frame carries one timestamp, and the sinks stamp the write time, so the column would
be dropped (a typed topic copied through Spark lost its event times: the JVM sink still
dropped it silently after the Python one refused it).  Adds about 4 s."""
from __future__ import annotations

import datetime as dt
from typing import Any, Callable

import pyarrow as pa
import pytest

pytestmark = pytest.mark.spark


def test_a_typed_sink_refuses_a_timestamp_column(spark: Any, log_cluster: Any, admin: Any,
                                                 topic_name: Callable[[], str], fmt: str) -> None:
    topic = topic_name()
    admin.create_topic(topic, partitions=1, schema=pa.schema([("n", pa.int64())]))
    when = dt.datetime(2020, 1, 1, tzinfo=dt.timezone.utc)
    frame = spark.createDataFrame([(1, when)], "n long, timestamp timestamp")
    with pytest.raises(Exception, match=r"drop the column") as refused:
        frame.write.format(fmt).option("bootstrap", log_cluster.bootstrap).option("topic", topic).mode("append").save()
    assert "SchemaMismatchError" in str(refused.value) or "SCHEMA_MISMATCH" in str(refused.value)
    frame.drop("timestamp").write.format(fmt).option("bootstrap", log_cluster.bootstrap).option("topic", topic) \
        .mode("append").save()
    rows = spark.read.format(fmt).option("bootstrap", log_cluster.bootstrap).option("subscribe", topic).load()
    assert [r.n for r in rows.collect()] == [1]   # the refused write appended nothing
