"""Typed topics whose schema comes from their first write (issue 6): created without a
schema, the sink registers the DataFrame's (batch and streaming); a later incompatible
DataFrame is refused at start with nothing written; readers and plain producers of a
schemaless topic get clear errors; a missing topic is refused unless ``createTopic``."""
from __future__ import annotations

import datetime as dt
import threading
from decimal import Decimal
from pathlib import Path
from typing import Any, Callable

import pyarrow as pa
import pytest
from chispa import assert_df_equality

from spark_log import Producer, errors

pytestmark = pytest.mark.spark

UTC = dt.timezone.utc
SCHEMA = (
    "id long not null, name string, ts timestamp, day date, amount decimal(10,2), tags array<string>, "
    "attrs map<string,int>, point struct<x: double, y: double>, raw binary"
)


def _rows(base: int = 0) -> list[tuple[Any, ...]]:
    ts = dt.datetime(2024, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
    return [
        (base + 1, "a", ts, dt.date(2024, 1, 2), Decimal("1.50"), ["x", None], {"k": 1}, (1.0, 2.0), b"\x00"),
        (base + 2, None, None, None, None, None, None, None, None),
        (base + 3, "c", ts, dt.date(1970, 1, 1), Decimal("-3.25"), [], {}, (None, 0.5), b""),
    ]


def _read(spark: Any, bootstrap: str, topic: str, fmt: str = "spark-log") -> Any:
    return spark.read.format(fmt).option("bootstrap", bootstrap).option("subscribe", topic).load()


def _write(df: Any, bootstrap: str, topic: str, fmt: str = "spark-log", **options: str) -> None:
    writer = df.write.format(fmt).option("bootstrap", bootstrap).option("topic", topic).mode("append")
    for key, value in options.items():
        writer = writer.option(key, value)
    writer.save()


def _stored(admin: Any, topic: str) -> int:
    return sum(admin.list_offsets(topic, "latest").values())


def _data_schema(df: Any) -> pa.Schema:
    from connectors.schema_mapping import spark_arrow_schema

    return spark_arrow_schema(df.schema)


@pytest.mark.slow  # several Spark jobs: tens of seconds on a busy machine
def test_batch_write_sets_the_schema_then_refuses_an_incompatible_one(
        spark: Any, log_cluster: Any, admin: Any, topic_name: Callable[[], str]) -> None:
    topic = topic_name()
    admin.create_topic(topic, partitions=2, kind="typed", key_columns=["id"])
    with pytest.raises(Exception, match=f"{topic}.*no schema yet"):
        _read(spark, log_cluster.bootstrap, topic).columns
    with Producer(log_cluster.bootstrap) as producer, pytest.raises(errors.NoSchemaError, match=topic):
        producer.send(topic, {"id": 1})

    df = spark.createDataFrame(_rows(), SCHEMA)
    _write(df, log_cluster.bootstrap, topic)
    described = admin.describe_topic(topic)
    assert described.schema_id == 0 and described.schema.equals(_data_schema(df))
    out = _read(spark, log_cluster.bootstrap, topic)
    assert out.columns == df.columns + ["topic", "partition", "offset", "timestamp"]
    assert_df_equality(out.select(*df.columns).orderBy("id"), df.orderBy("id"))

    # the same columns again: appended under schema 0
    _write(spark.createDataFrame(_rows(10), SCHEMA), log_cluster.bootstrap, topic)
    assert _stored(admin, topic) == 6 and admin.describe_topic(topic).schema_id == 0
    # incompatible columns: refused at start, naming the columns, nothing written
    bad = spark.createDataFrame([("1", "a")], "id string, label string")
    with pytest.raises(Exception, match=r"does not match topic.*missing columns \[.*'ts'.*unexpected \['label'\]"):
        _write(bad, log_cluster.bootstrap, topic)
    with pytest.raises(Exception, match="column 'point'"):
        _write(df.withColumn("point", df["name"]), log_cluster.bootstrap, topic)
    assert _stored(admin, topic) == 6 and admin.describe_topic(topic).schema_id == 0


@pytest.mark.slow  # several Spark jobs: tens of seconds on a busy machine
def test_stream_write_sets_the_schema(spark: Any, log_cluster: Any, admin: Any, topic_name: Callable[[], str],
                                      tmp_path: Path) -> None:
    topic = topic_name()
    admin.create_topic(topic, partitions=3, kind="typed")
    source = spark.createDataFrame(_rows() + _rows(100), SCHEMA)
    source.write.parquet(str(tmp_path / "in"))
    stream = spark.readStream.schema(source.schema).parquet(str(tmp_path / "in"))
    query = (stream.writeStream.format("spark-log").option("bootstrap", log_cluster.bootstrap).option("topic", topic)
             .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(availableNow=True).start())
    try:
        query.awaitTermination(120)
    finally:
        query.stop()
    assert query.exception() is None
    assert admin.describe_topic(topic).schema.equals(_data_schema(stream))
    out = _read(spark, log_cluster.bootstrap, topic)
    assert_df_equality(out.select(*source.columns).orderBy("id"), source.orderBy("id"), ignore_nullable=True)


def test_missing_topic_is_refused_unless_create_topic(
        spark: Any, log_cluster: Any, admin: Any, topic_name: Callable[[], str], fmt: str) -> None:
    """Both implementations (the JVM one through the gRPC Admin.CreateTopic/RegisterSchema)."""
    topic = topic_name()
    df = spark.createDataFrame([("u1", 3, dt.datetime(2024, 1, 1, tzinfo=UTC)), ("u2", None, None)],
                               "user string, clicks long, at timestamp")
    with pytest.raises(Exception, match=f"topic '{topic}' does not exist.*createTopic=true"):
        _write(df, log_cluster.bootstrap, topic, fmt)
    assert topic not in admin.list_topics()
    _write(df, log_cluster.bootstrap, topic, fmt, createTopic="true", partitions="3", keyColumns="user")
    described = admin.describe_topic(topic)
    assert (described.kind, described.num_partitions, described.key_columns) == ("typed", 3, ("user",))
    assert described.schema.equals(_data_schema(df))
    assert_df_equality(_read(spark, log_cluster.bootstrap, topic, fmt).select("user", "clicks", "at"), df,
                       ignore_row_order=True, ignore_nullable=True)


def test_tombstone_column_creates_a_compacted_topic_and_is_checked(
        spark: Any, log_cluster: Any, admin: Any, topic_name: Callable[[], str], fmt: str) -> None:
    """tombstoneColumn: createTopic=true creates the topic compacted with it; a column that is not
    boolean, not the topic's tombstone.column, or on a bytes topic is refused at start."""
    bootstrap, topic, other, raw = log_cluster.bootstrap, topic_name(), topic_name(), topic_name()
    df = spark.createDataFrame([("u1", 1, False), ("u2", 2, False), ("u1", None, True)],
                               "user string, score long, deleted boolean").coalesce(1)
    _write(df, bootstrap, topic, fmt, createTopic="true", keyColumns="user", tombstoneColumn="deleted")
    config = admin.describe_topic(topic).config
    assert (config["cleanup.policy"], config["tombstone.column"]) == ("compact", "deleted")
    assert sorted((r.user, r.deleted) for r in _read(spark, bootstrap, topic, fmt).collect()) == [
        ("u1", False), ("u1", True), ("u2", False)]
    with pytest.raises(Exception, match="'tombstoneColumn'.*boolean"):
        _write(df, bootstrap, topic, fmt, tombstoneColumn="score")
    admin.create_topic(other, partitions=1, schema=pa.schema([("user", pa.string()), ("score", pa.int64()),
                                                             ("deleted", pa.bool_())]))
    with pytest.raises(Exception, match="'tombstoneColumn'.*none"):
        _write(df, bootstrap, other, fmt, tombstoneColumn="deleted")
    admin.create_topic(raw, partitions=1)
    with pytest.raises(Exception, match="'tombstoneColumn'.*bytes topic"):
        _write(spark.createDataFrame([("v", True)], "value string, deleted boolean"), bootstrap, raw, fmt,
               tombstoneColumn="deleted")
    assert _stored(admin, other) == 0 and _stored(admin, raw) == 0


def test_racing_first_writers(log_cluster: Any, admin: Any, topic_name: Callable[[], str]) -> None:
    """Driver-side start of two sinks at once: the same DataFrame schema -> both go on with
    schema 0; incompatible ones -> exactly one wins, the other is refused naming columns."""
    from connectors.options import WriterOptions
    from connectors.writer import resolve_target

    a = pa.schema([pa.field("id", pa.int64()), pa.field("name", pa.string())])
    b = pa.schema([pa.field("id", pa.string()), pa.field("other", pa.float64())])

    def race(topic: str, schemas: list[pa.Schema]) -> list[Any]:
        options = WriterOptions.parse({"bootstrap": log_cluster.bootstrap, "topic": topic})
        results: list[Any] = [None] * len(schemas)
        start = threading.Barrier(len(schemas))

        def run(i: int) -> None:
            start.wait()
            try:
                results[i] = resolve_target(options, schemas[i])
            except Exception as exc:  # noqa: BLE001 - collected and checked below
                results[i] = exc

        threads = [threading.Thread(target=run, args=(i,)) for i in range(len(schemas))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        return results

    same = topic_name()
    admin.create_topic(same, kind="typed")
    targets = race(same, [a, a])
    assert all(not isinstance(t, Exception) and t.schema.equals(a) for t in targets), targets
    assert admin.describe_topic(same).schema_id == 0

    different = topic_name()
    admin.create_topic(different, kind="typed")
    outcomes = race(different, [a, b])
    won = [i for i, t in enumerate(outcomes) if not isinstance(t, Exception)]
    assert len(won) == 1, outcomes
    loser = outcomes[1 - won[0]]
    assert isinstance(loser, errors.SchemaMismatchError) and "does not match topic" in loser.message
    assert admin.describe_topic(different).schema.equals([a, b][won[0]])


def test_pattern_reader_skips_a_schemaless_typed_topic_until_it_has_a_schema(
        log_cluster: Any, admin: Any, topic_name: Callable[[], str]) -> None:
    """Driver side of a running ``subscribePattern`` query: a new typed topic without a
    schema holds nothing and is left out; once it has a schema it is checked as any other."""
    from connectors.options import ReaderOptions
    from connectors.reader import _DriverSide
    from connectors.source import build_plan

    base = topic_name()
    admin.create_topic(f"{base}-a", partitions=2)
    plan = build_plan(ReaderOptions.parse({"bootstrap": log_cluster.bootstrap, "subscribePattern": f"{base}-.*"}))
    driver = _DriverSide(plan)
    try:
        admin.create_topic(f"{base}-b", kind="typed")
        assert driver.topics() == [f"{base}-a"]
        assert sorted(driver.latest()) == [(f"{base}-a", 0), (f"{base}-a", 1)]
        admin.register_schema(f"{base}-b", pa.schema([("id", pa.int64())]))
        with pytest.raises(errors.SchemaMismatchError, match=f"{base}-b"):
            driver.topics()
    finally:
        driver.close()
