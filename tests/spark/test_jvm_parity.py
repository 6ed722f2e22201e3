"""The JVM connector agrees with the Python one (``fmt``): key routing of typed sinks, refusals,
offset pushdown at the edge of the long range, and the bytes sink's integer-ms timestamps."""
from __future__ import annotations

import datetime as dt
import decimal
import json
from typing import Any, Callable

import pyarrow as pa
import pytest

from spark_log import Producer
from spark_log.partitioner import key_array, partitions_for_keys

pytestmark = pytest.mark.spark

_UTC = dt.timezone.utc


def _ten_records(bootstrap: str, topic: str) -> None:
    with Producer(bootstrap) as p:
        for i in range(10):
            p.send(topic, b"v%d" % i, partition=0)
        p.flush()


def _read(spark: Any, fmt: str, bootstrap: str, topic: str, **opts: str) -> Any:
    r = spark.read.format(fmt).option("bootstrap", bootstrap).option("subscribe", topic)
    for k, v in opts.items():
        r = r.option(k, v)
    return r.load()


# (Spark type, the Arrow type Spark hands the Python sink, values: edge cases of each type's text)
_KEYS: dict[str, tuple[str, Any, list[Any]]] = {
    "date": ("date", pa.date32(), [dt.date(2024, 1, d) for d in range(1, 6)]
             + [dt.date(1969, 12, 31), dt.date(1, 1, 1), dt.date(9999, 12, 31), dt.date(1970, 1, 1)]),
    "timestamp": ("timestamp", pa.timestamp("us", tz="UTC"),
                  [dt.datetime(2024, 1, d, tzinfo=_UTC) for d in range(1, 6)]
                  + [dt.datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=_UTC),
                     dt.datetime(1970, 1, 1, 0, 0, 0, 123456, tzinfo=_UTC),
                     dt.datetime(1, 1, 1, tzinfo=_UTC), dt.datetime(9999, 12, 31, 23, 59, 59, tzinfo=_UTC)]),
    "decimal": ("decimal(20,10)", pa.decimal128(20, 10),
                [decimal.Decimal(x) for x in ("1.5", "-0.01", "0", "0.0000000001", "-0.0000001", "0.000001",
                                              "1234567890.1234567890", "-7")]),
    "int": ("int", pa.int32(), [0, -1, 1, 2**31 - 1, -2**31, 42]),
    "long": ("long", pa.int64(), [0, -1, 2**63 - 1, -2**63, 10**12]),
    "short": ("short", pa.int16(), [0, -1, 32767, -32768]),
    "boolean": ("boolean", pa.bool_(), [True, False, True]),
    "string": ("string", pa.string(), ["a", "", "é€", "k1"]),
}


@pytest.mark.parametrize("kind", sorted(_KEYS))
def test_typed_key_routing_matches_the_partitioner(spark: Any, log_cluster: Any, admin: Any,
                                                   topic_name: Callable[[], str], fmt: str, kind: str) -> None:
    """A typed topic's key column places each row where spark_log.partitioner places its key
    (Arrow's text of the value, as the Python sink and the Producer hash it), from either sink."""
    ddl, arrow, values = _KEYS[kind]
    schema = pa.schema([("k", arrow), ("i", pa.int64())])
    topic = topic_name()
    admin.create_topic(topic, partitions=8, schema=schema, key_columns=["k"])
    (spark.createDataFrame([(v, i) for i, v in enumerate(values)], f"k {ddl}, i long").coalesce(1).write.format(fmt)
     .option("bootstrap", log_cluster.bootstrap).option("topic", topic).mode("append").save())
    read = _read(spark, "spark-log", log_cluster.bootstrap, topic).select("i", "partition")  # year 1 has no local datetime
    placed = {r.i: r.partition for r in read.collect()}
    keys, _ = key_array(pa.table({"k": pa.array(values, arrow)}), ["k"])
    assert placed == {i: int(p) for i, p in enumerate(partitions_for_keys(keys, 8))}


@pytest.mark.parametrize("ddl,arrow", [("double", pa.float64()), ("float", pa.float32())])
def test_floating_key_column_routes_as_the_partitioner_or_is_refused(spark: Any, log_cluster: Any, admin: Any,
                                                                      topic_name: Callable[[], str], fmt: str,
                                                                      ddl: str, arrow: pa.DataType) -> None:
    """The Python sink hashes a float key as Arrow's shortest text ('1', '1e+20'); the JVM sink
    cannot reproduce that text exactly, so it refuses the key column at start rather than
    route a key to another partition."""
    values = [1.0, 2.0, 0.1, 1e20, 1e-7, -0.0, 123456789.123, 3.0]
    topic = topic_name()
    admin.create_topic(topic, partitions=8, schema=pa.schema([("k", arrow), ("i", pa.int64())]), key_columns=["k"])
    df = spark.createDataFrame([(v, i) for i, v in enumerate(values)], f"k {ddl}, i long").coalesce(1)
    write = df.write.format(fmt).option("bootstrap", log_cluster.bootstrap).option("topic", topic).mode("append")
    if fmt != "spark-log":
        with pytest.raises(Exception, match="SchemaMismatchError") as refused:
            write.save()
        assert "cast the key column to string" in str(refused.value)
        assert _read(spark, "spark-log", log_cluster.bootstrap, topic).count() == 0
        return
    write.save()
    placed = {r.i: r.partition for r in _read(spark, "spark-log", log_cluster.bootstrap, topic).collect()}
    keys, _ = key_array(pa.table({"k": pa.array(values, arrow)}), ["k"])
    assert placed == {i: int(p) for i, p in enumerate(partitions_for_keys(keys, 8))}


@pytest.mark.parametrize("where,want", [
    ("offset <= 9223372036854775807", list(range(10))),
    ("offset in (3, 9223372036854775807)", [3]),
    ("offset = 9223372036854775807", []),
    ("offset > 9223372036854775807", []),
])
def test_offset_pushdown_at_long_max(spark: Any, log_cluster: Any, admin: Any, topic_name: Callable[[], str],
                                     fmt: str, where: str, want: list[int]) -> None:
    """Bounds at Long.MAX_VALUE: no overflow of 'offset + 1' turning a bound into an empty range."""
    topic = topic_name()
    admin.create_topic(topic, partitions=1)
    _ten_records(log_cluster.bootstrap, topic)
    df = _read(spark, fmt, log_cluster.bootstrap, topic, pushFilters="true").where(where)
    assert sorted(r.offset for r in df.collect()) == want


def test_batch_start_after_end_refused(spark: Any, log_cluster: Any, admin: Any, topic_name: Callable[[], str],
                                       fmt: str) -> None:
    """A partition whose start is after its end is refused (InvalidConfigError), as Kafka does:
    with or without a pushed offset filter (checked before narrowing)."""
    topic = topic_name()
    admin.create_topic(topic, partitions=1)
    _ten_records(log_cluster.bootstrap, topic)
    for push in ("false", "true"):
        df = _read(spark, fmt, log_cluster.bootstrap, topic, startingOffsets=json.dumps({topic: {"0": 8}}),
                   endingOffsets=json.dumps({topic: {"0": 3}}), pushFilters=push).where("offset >= 0")
        with pytest.raises(Exception, match="InvalidConfigError") as refused:
            df.count()
        assert "startingOffsets" in str(refused.value) and "endingOffsets" in str(refused.value)


@pytest.mark.parametrize("given", [-1, 2])
def test_partition_column_out_of_range_refused(spark: Any, log_cluster: Any, admin: Any,
                                               topic_name: Callable[[], str], fmt: str, given: int) -> None:
    topic = topic_name()
    admin.create_topic(topic, partitions=2)
    df = spark.createDataFrame([(b"v", given)], "value binary, partition int")
    with pytest.raises(Exception, match="InvalidConfigError") as refused:
        df.write.format(fmt).option("bootstrap", log_cluster.bootstrap).option("topic", topic).mode("append").save()
    assert "0 to 1" in str(refused.value)
    assert _read(spark, "spark-log", log_cluster.bootstrap, topic).count() == 0


@pytest.mark.parametrize("ddl", ["long", "int"])
def test_integer_ms_timestamp_column(spark: Any, log_cluster: Any, admin: Any, topic_name: Callable[[], str],
                                     fmt: str, ddl: str) -> None:
    """A bytes topic's 'timestamp' column may be a timestamp or integer milliseconds."""
    topic = topic_name()
    admin.create_topic(topic, partitions=1)
    ms = 1_700_000_000_123 if ddl == "long" else 1_234_567
    (spark.createDataFrame([(b"v", ms)], f"value binary, timestamp {ddl}").write.format(fmt)
     .option("bootstrap", log_cluster.bootstrap).option("topic", topic).mode("append").save())
    got = _read(spark, "spark-log", log_cluster.bootstrap, topic).selectExpr("value", "unix_millis(timestamp) AS ms")
    assert [(bytes(r.value), r.ms) for r in got.collect()] == [(b"v", ms)]
