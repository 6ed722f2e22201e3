"""Write then read: bytes and typed topics, nulls, nested types, timestamps, projections, routing."""
from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any, Callable

import pyarrow as pa
import pytest
from chispa import assert_df_equality

pytestmark = pytest.mark.spark

KAFKA_COLUMNS = ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]
UTC = dt.timezone.utc


def _read(spark: Any, bootstrap: str, topic: str, fmt: str = "spark-log", **options: str) -> Any:
    reader = spark.read.format(fmt).option("bootstrap", bootstrap).option("subscribe", topic)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def _write(df: Any, bootstrap: str, topic: str, fmt: str = "spark-log", **options: str) -> None:
    writer = df.write.format(fmt).option("bootstrap", bootstrap).option("topic", topic).mode("append")
    for key, value in options.items():
        writer = writer.option(key, value)
    writer.save()


def test_bytes_topic_round_trip(spark: Any, log_cluster: Any, admin: Any, topic_name: Callable[[], str], fmt: str) -> None:
    topic = topic_name()
    admin.create_topic(topic, partitions=2)
    ts = dt.datetime(2024, 5, 1, 12, 0, 0, 123000, tzinfo=UTC)
    rows = [
        ("k1", b"v1", [("h", b"x"), ("h2", None)], ts),
        (None, b"v2", None, ts + dt.timedelta(seconds=1)),
        ("k3", b"", [], ts + dt.timedelta(seconds=2)),
    ]
    df = spark.createDataFrame(rows, "key string, value binary, headers array<struct<key: string, value: binary>>, timestamp timestamp")
    _write(df, log_cluster.bootstrap, topic, fmt)

    out = _read(spark, log_cluster.bootstrap, topic, fmt, includeHeaders="true")
    assert out.columns == KAFKA_COLUMNS + ["headers"]
    assert _read(spark, log_cluster.bootstrap, topic, fmt).columns == KAFKA_COLUMNS
    expected = df.selectExpr("cast(key as binary) as key", "value", "headers", "timestamp")
    assert_df_equality(out.select("key", "value", "headers", "timestamp"), expected,
                       ignore_row_order=True, ignore_nullable=True)
    meta = out.select("topic", "partition", "offset", "timestampType").collect()
    assert {r.topic for r in meta} == {topic} and {r.timestampType for r in meta} == {0}
    by_partition: dict[int, list[int]] = {}
    for r in meta:
        by_partition.setdefault(r.partition, []).append(r.offset)
    assert all(sorted(v) == list(range(len(v))) for v in by_partition.values())


TYPED_SCHEMA = (
    "id long not null, name string, ts timestamp, day date, amount decimal(10,2), tags array<string>, "
    "attrs map<string,int>, point struct<x: double, y: double>, raw binary"
)


def _typed_rows() -> list[tuple[Any, ...]]:
    ts = dt.datetime(2024, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
    return [
        (1, "a", ts, dt.date(2024, 1, 2), Decimal("1.50"), ["x", None], {"k": 1}, (1.0, 2.0), b"\x00"),
        (2, None, None, None, None, None, None, None, None),
        (3, "c", ts, dt.date(1970, 1, 1), Decimal("-3.25"), [], {}, (None, 0.5), b""),
    ]


def _typed_topic(admin: Any, topic: str, df: Any, **options: Any) -> None:
    """A typed topic whose schema is the DataFrame's (as Spark hands it to the writer)."""
    from connectors.schema_mapping import spark_arrow_schema

    admin.create_topic(topic, schema=spark_arrow_schema(df.schema), **options)


def test_typed_topic_round_trip(spark: Any, log_cluster: Any, admin: Any, topic_name: Callable[[], str], fmt: str) -> None:
    topic = topic_name()
    df = spark.createDataFrame(_typed_rows(), TYPED_SCHEMA)
    _typed_topic(admin, topic, df, partitions=2, key_columns=["id"])
    _write(df, log_cluster.bootstrap, topic, fmt)

    out = _read(spark, log_cluster.bootstrap, topic, fmt)
    assert out.columns == df.columns + ["topic", "partition", "offset", "timestamp"]
    assert_df_equality(out.select(*df.columns).orderBy("id"), df.orderBy("id"))
    # a second write appends under the same schema
    _write(df, log_cluster.bootstrap, topic, fmt, keyColumns="name")
    assert _read(spark, log_cluster.bootstrap, topic, fmt).count() == 6


def test_typed_topic_created_with_a_schema(spark: Any, log_cluster: Any, admin: Any, topic_name: Callable[[], str],
                                           fmt: str) -> None:
    """The topic stores ms timestamps, the DataFrame has Spark's us ones: both sinks cast (test_typed_casts.py)."""
    topic = topic_name()
    schema = pa.schema([pa.field("user", pa.string()), pa.field("clicks", pa.int64()), pa.field("at", pa.timestamp("ms", tz="UTC"))])
    admin.create_topic(topic, partitions=3, schema=schema, key_columns=["user"])
    df = spark.createDataFrame(
        [("u1", 3, dt.datetime(2024, 1, 1, tzinfo=UTC)), ("u2", None, None), ("u1", 5, dt.datetime(2024, 1, 3, tzinfo=UTC))],
        "user string, clicks long, at timestamp",
    )
    _write(df, log_cluster.bootstrap, topic, fmt)
    out = _read(spark, log_cluster.bootstrap, topic, fmt)
    assert_df_equality(out.select("user", "clicks", "at"), df, ignore_row_order=True, ignore_nullable=True)
    # rows with the same key land in the same partition
    parts = {r.user: set() for r in out.collect()}
    for r in out.collect():
        parts[r.user].add(r.partition)
    assert all(len(p) == 1 for p in parts.values())


def test_writing_an_incompatible_dataframe_is_refused(spark: Any, log_cluster: Any, admin: Any, topic_name: Callable[[], str], fmt: str) -> None:
    typed, raw = topic_name(), topic_name()
    admin.create_topic(typed, schema=pa.schema([("a", pa.int64())]))
    admin.create_topic(raw)
    df = spark.createDataFrame([("x",)], "b string")
    with pytest.raises(Exception, match="does not match topic"):
        _write(df, log_cluster.bootstrap, typed, fmt)
    with pytest.raises(Exception, match="is a bytes topic"):
        _write(df, log_cluster.bootstrap, raw, fmt)


def test_projection_columns(spark: Any, log_cluster: Any, admin: Any, topic_name: Callable[[], str], fmt: str) -> None:
    topic = topic_name()
    admin.create_topic(topic, partitions=1)
    _write(spark.createDataFrame([(f"k{i}", f"v{i}") for i in range(5)], "key string, value string"), log_cluster.bootstrap, topic, fmt)
    out = _read(spark, log_cluster.bootstrap, topic, fmt, columns="offset,value")
    assert out.columns == ["offset", "value"]
    got = out.collect()
    assert sorted(r.offset for r in got) == list(range(5))
    assert sorted(r.value for r in got) == [f"v{i}".encode() for i in range(5)]
    only_meta = _read(spark, log_cluster.bootstrap, topic, fmt, columns="partition,offset")
    assert sorted(r.offset for r in only_meta.collect()) == list(range(5))

    typed = topic_name()
    df = spark.createDataFrame(_typed_rows(), TYPED_SCHEMA)
    _typed_topic(admin, typed, df, partitions=1)
    _write(df, log_cluster.bootstrap, typed, fmt)
    out = _read(spark, log_cluster.bootstrap, typed, fmt, columns="point,id")
    assert out.columns == ["point", "id"]
    assert sorted(r.id for r in out.collect()) == [1, 2, 3]


def test_partition_and_topic_columns_route_rows(spark: Any, log_cluster: Any, admin: Any, topic_name: Callable[[], str],
                                                tmp_path: Any, fmt: str) -> None:
    a, b, c = topic_name(), topic_name(), topic_name()
    admin.create_topic(a, partitions=3)
    admin.create_topic(b, partitions=2)
    admin.create_topic(c, partitions=1)
    df = spark.createDataFrame([(a, 2, "x"), (b, 1, "y"), (a, 0, "z"), (b, None, "w")], "topic string, partition int, value string")
    df.write.format(fmt).option("bootstrap", log_cluster.bootstrap).mode("append").save()
    got = spark.read.format(fmt).option("bootstrap", log_cluster.bootstrap).option("subscribe", f"{a},{b}").load()
    placed = {(r.topic, r.value.decode()): r.partition for r in got.collect()}
    assert {k: v for k, v in placed.items() if k[1] != "w"} == {(a, "x"): 2, (b, "y"): 1, (a, "z"): 0}
    assert (b, "w") in placed
    assert len(placed) == 4

    # a stream whose rows name their topic (no topic option): a's rows go to c, b's stay in b
    query = (spark.readStream.format(fmt).option("bootstrap", log_cluster.bootstrap).option("subscribe", f"{a},{b}")
             .option("startingOffsets", "earliest").load()
             .selectExpr(f"if(topic = '{a}', '{c}', topic) as topic", "value")
             .writeStream.format(fmt).option("bootstrap", log_cluster.bootstrap)
             .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(availableNow=True).start())
    query.awaitTermination(120)
    assert query.exception() is None
    moved = _read(spark, log_cluster.bootstrap, f"{b},{c}", fmt).collect()
    assert sorted((r.topic, r.value.decode()) for r in moved) == sorted([(c, "x"), (c, "z")] + [(b, "y"), (b, "w")] * 2)

    with pytest.raises(Exception, match="'topic'"):  # neither the option nor a column
        df.drop("topic").write.format(fmt).option("bootstrap", log_cluster.bootstrap).mode("append").save()
    with pytest.raises(Exception, match="'topic'"):  # a row without its topic
        (spark.createDataFrame([(None, "v")], "topic string, value string").write.format(fmt)
         .option("bootstrap", log_cluster.bootstrap).mode("append").save())


def test_large_lz4_frames_from_the_python_producer(spark: Any, log_cluster: Any, admin: Any,
                                                  topic_name: Callable[[], str], fmt: str) -> None:
    """A 20,000-row frame compressed by pyarrow (LZ4 frame format with linked blocks, whose
    matches reach into earlier blocks) reads back whole through both implementations."""
    from spark_log import Producer

    topic = topic_name()
    admin.create_topic(topic, partitions=1)
    n = 20_000
    batch = pa.record_batch({"key": pa.array([f"key-{i}".encode() for i in range(n)], pa.binary()),
                             "value": pa.array([f"{i:010d}-value-{i % 97}".encode() * 3 for i in range(n)], pa.binary())})
    with Producer(log_cluster.bootstrap, linger_ms=0, batch_size=1 << 20) as producer:
        producer.send_batch(topic, batch, partition=0)
        producer.flush()
    got = (spark.read.format(fmt).option("bootstrap", log_cluster.bootstrap).option("subscribe", topic).load()
           .selectExpr("offset", "cast(cast(substring(value, 1, 10) as string) as long) as id").collect())
    assert sorted(r.id for r in got) == list(range(n))
    assert all(r.offset == r.id for r in got)
