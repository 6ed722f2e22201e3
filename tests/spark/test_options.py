"""Every reader/writer option through Spark, and bad options failing at start."""
from __future__ import annotations

import datetime as dt
import json
import re
from typing import Any, Callable

import pyarrow as pa
import pytest

from tests.support.jvm import require_jvm

pytestmark = pytest.mark.spark

UTC = dt.timezone.utc


def _fill(spark: Any, bootstrap: str, topic: str, n: int, *, base_ts: dt.datetime | None = None) -> None:
    base_ts = base_ts or dt.datetime(2024, 1, 1, tzinfo=UTC)
    rows = [(f"k{i}", f"v{i}", base_ts + dt.timedelta(seconds=i)) for i in range(n)]
    (spark.createDataFrame(rows, "key string, value string, timestamp timestamp").coalesce(1)
     .write.format("spark-log").option("bootstrap", bootstrap).option("topic", topic).mode("append").save())


def _reader(spark: Any, bootstrap: str, fmt: str = "spark-log", **options: str) -> Any:
    reader = spark.read.format(fmt).option("bootstrap", bootstrap)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader


@pytest.fixture
def filled(spark: Any, log_cluster: Any, admin: Any, topic_name: Callable[[], str]) -> str:
    """A 2-partition bytes topic with 20 records, key ``k<i>``, timestamps 1 s apart."""
    topic = topic_name()
    admin.create_topic(topic, partitions=2)
    _fill(spark, log_cluster.bootstrap, topic, 20)
    return topic


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"subscribe": "t", "subscirbe": "t"}, "subscirbe"),
        ({"subscribe": "t", "subscribePattern": "t.*"}, "subscribePattern"),
        ({"subscribe": "t", "startingOffsets": "soonest"}, "startingOffsets"),
        ({"subscribe": "t", "startingOffsets": "earliest", "startingTimestamp": "5"}, "startingTimestamp"),
        ({"subscribe": "t", "maxOffsetsPerTrigger": "-1"}, "maxOffsetsPerTrigger"),
        ({"subscribe": "t", "columns": "nope"}, "columns"),
    ],
)
def test_bad_reader_options_fail_at_start(spark: Any, log_cluster: Any, filled: str, options: dict, named: str,
                                          fmt: str) -> None:
    options = {k: (filled if v == "t" else v) for k, v in options.items()}
    with pytest.raises(Exception) as info:
        _reader(spark, log_cluster.bootstrap, fmt, **options).load()
    assert f"'{named}'" in str(info.value)


def test_stream_only_and_batch_only_options(spark: Any, log_cluster: Any, filled: str, tmp_path: Any, fmt: str) -> None:
    with pytest.raises(Exception, match="'maxOffsetsPerTrigger'"):
        _reader(spark, log_cluster.bootstrap, fmt, subscribe=filled, maxOffsetsPerTrigger="5").load().collect()
    with pytest.raises(Exception, match="'endingOffsets'"):
        stream = (spark.readStream.format(fmt).option("bootstrap", log_cluster.bootstrap)
                  .option("subscribe", filled).option("endingOffsets", "latest").load())
        stream.writeStream.format("noop").option("checkpointLocation", str(tmp_path)).start().awaitTermination(60)


def test_bad_writer_options_fail_at_start(spark: Any, log_cluster: Any, filled: str, fmt: str) -> None:
    df = spark.createDataFrame([("v",)], "value string")
    for options, named in [({"topic": filled, "akcs": "all"}, "akcs"), ({"topic": filled, "acks": "0"}, "acks"),
                           ({"topic": filled, "compression": "gzip"}, "compression"), ({}, "topic"),
                           ({"topic": filled, "keyColumns": "id"}, "keyColumns")]:
        writer = df.write.format(fmt).option("bootstrap", log_cluster.bootstrap).mode("append")
        for key, value in options.items():
            writer = writer.option(key, value)
        with pytest.raises(Exception) as info:
            writer.save()
        assert f"'{named}'" in str(info.value), str(info.value)[:500]
    with pytest.raises(Exception, match="(?i)overwrite"):
        df.write.format(fmt).option("bootstrap", log_cluster.bootstrap).option("topic", filled).mode("overwrite").save()


def test_starting_and_ending_offsets_json(spark: Any, log_cluster: Any, filled: str, fmt: str) -> None:
    start = json.dumps({filled: {"0": 2, "1": -2}})
    end = json.dumps({filled: {"0": 4, "1": -1}})
    got = _reader(spark, log_cluster.bootstrap, fmt, subscribe=filled, startingOffsets=start, endingOffsets=end).load()
    rows = got.select("partition", "offset").collect()
    latest = {r.partition: r.offset for r in _reader(spark, log_cluster.bootstrap, fmt, subscribe=filled).load()
              .groupBy("partition").agg({"offset": "max"}).withColumnRenamed("max(offset)", "offset").collect()}
    assert sorted(r.offset for r in rows if r.partition == 0) == [2, 3]
    assert sorted(r.offset for r in rows if r.partition == 1) == list(range(latest[1] + 1))


def test_starting_timestamp(spark: Any, log_cluster: Any, filled: str, fmt: str) -> None:
    cut = int(dt.datetime(2024, 1, 1, 0, 0, 15, tzinfo=UTC).timestamp() * 1000)
    got = _reader(spark, log_cluster.bootstrap, fmt, subscribe=filled, startingTimestamp=str(cut)).load()
    assert sorted(r.key.decode() for r in got.collect()) == sorted(f"k{i}" for i in range(15, 20))


def test_assign_and_pattern(spark: Any, log_cluster: Any, filled: str, fmt: str) -> None:
    one = _reader(spark, log_cluster.bootstrap, fmt, assign=json.dumps({filled: [1]})).load()
    assert {r.partition for r in one.collect()} == {1}
    everything = _reader(spark, log_cluster.bootstrap, fmt, subscribePattern=filled.replace("-", ".")).load()
    assert everything.count() == 20


def test_min_partitions_and_max_records_split_ranges(spark: Any, log_cluster: Any, filled: str, fmt: str) -> None:
    df = _reader(spark, log_cluster.bootstrap, fmt, subscribe=filled, minPartitions="5").load()
    assert df.rdd.getNumPartitions() >= 5
    assert sorted(r.key for r in df.collect()) == sorted(f"k{i}".encode() for i in range(20))
    df = _reader(spark, log_cluster.bootstrap, fmt, subscribe=filled, maxRecordsPerPartition="3").load()
    assert df.rdd.getNumPartitions() >= 7
    assert df.count() == 20


def test_isolation_level_and_poll_timeout(spark: Any, log_cluster: Any, filled: str, fmt: str) -> None:
    got = _reader(spark, log_cluster.bootstrap, fmt, subscribe=filled, isolationLevel="read_committed", pollTimeoutMs="30000").load()
    assert got.count() == 20


def test_filters_are_pushed_down(spark: Any, log_cluster: Any, filled: str, admin: Any, topic_name: Callable[[], str],
                                 fmt: str) -> None:
    def load(topic: str, push: str = "true") -> Any:
        return _reader(spark, log_cluster.bootstrap, fmt, subscribe=topic, pushFilters=push).load()

    got = load(filled).where("partition = 1 and offset >= 2 and offset < 4").select("partition", "offset")
    assert sorted((r.partition, r.offset) for r in got.collect()) == [(1, 2), (1, 3)]
    # pushed, not only filtered by Spark: the scan reads one range of partition 1 (each partition
    # holds 10 records; maxRecordsPerPartition=1 makes one Spark task per record read)
    pushed = load(filled).where("partition = 1 and offset >= 2 and offset < 4 and topic = '" + filled + "'")
    assert _reader(spark, log_cluster.bootstrap, fmt, subscribe=filled, pushFilters="true", maxRecordsPerPartition="1").load() \
        .where("partition = 1 and offset >= 2 and offset < 4").rdd.getNumPartitions() == 2
    assert pushed.count() == 2
    assert load(filled, "false").where("partition = 1 and offset < 4").count() == 4
    assert load(filled).where(f"topic in ('{filled}', 'other') and partition in (0, 7) and offset in (1, 3, 40)").count() == 2
    cut = dt.datetime(2024, 1, 1, 0, 0, 17, tzinfo=UTC)
    later = load(filled).where(f"timestamp >= '{cut.isoformat()}'").collect()
    assert sorted(r.key.decode() for r in later) == ["k17", "k18", "k19"]

    typed = topic_name()
    admin.create_topic(typed, partitions=2, schema=pa.schema([("n", pa.int64()), ("s", pa.string())]))
    (spark.createDataFrame([(i, f"s{i % 3}") for i in range(30)], "n long, s string")
     .write.format("spark-log").option("bootstrap", log_cluster.bootstrap).option("topic", typed).mode("append").save())
    assert sorted(r.n for r in load(typed).where("n >= 25 and s = 's1'").collect()) == [25, 28]
    assert sorted(r.n for r in load(typed).where("n in (3, 4) or s is null").collect()) == [3, 4]
    assert sorted(r.n for r in load(typed).where("n in (3, 4)").collect()) == [3, 4]
    with pytest.raises(Exception, match="'pushFilters'"):  # batch reads only
        (spark.readStream.format(fmt).option("bootstrap", log_cluster.bootstrap).option("subscribe", filled)
         .option("pushFilters", "true").load().writeStream.format("noop").start().awaitTermination(60))


def test_fail_on_data_loss(spark: Any, log_cluster: Any, admin: Any, topic_name: Callable[[], str], tmp_path: Any,
                           fmt: str) -> None:
    """A partition that vanishes under a stream fails it, unless failOnDataLoss=false."""
    keep, doomed = topic_name(), topic_name()
    for topic in (keep, doomed):
        admin.create_topic(topic, partitions=1)
        _fill(spark, log_cluster.bootstrap, topic, 3)

    def run(fail: str, checkpoint: str) -> Any:
        return (spark.readStream.format(fmt).option("bootstrap", log_cluster.bootstrap)
                .option("subscribePattern", f"({re.escape(keep)}|{re.escape(doomed)})").option("startingOffsets", "earliest").option("failOnDataLoss", fail)
                .load().writeStream.format("noop").option("checkpointLocation", checkpoint).trigger(availableNow=True).start())

    for fail in ("true", "false"):
        run(fail, str(tmp_path / fail)).awaitTermination(120)
    admin.delete_topic(doomed)
    _fill(spark, log_cluster.bootstrap, keep, 2)
    with pytest.raises(Exception, match="failOnDataLoss"):
        run("true", str(tmp_path / "true")).awaitTermination(120)
    query = run("false", str(tmp_path / "false"))
    query.awaitTermination(120)
    assert query.exception() is None
    assert json.loads(query.lastProgress["sources"][0]["endOffset"]) == {keep: {"0": 5}}


def test_the_jvm_implementation_refuses_what_it_lacks_by_name(spark: Any, log_cluster: Any, admin: Any,
                                                              topic_name: Callable[[], str]) -> None:
    """What the JVM implementation does not implement fails at start with a typed error: a typed
    write whose columns need a cast the Python sink applies and the JVM's Casts does not (text to
    numbers); the casts it has (int to bigint) it applies (test_typed_casts.py)."""
    JVM_CLASS = require_jvm()
    typed = topic_name()
    admin.create_topic(typed, partitions=1, schema=pa.schema([("n", pa.int64())]))
    with pytest.raises(Exception) as info:
        (spark.createDataFrame([("1",)], "n string").write.format(JVM_CLASS).option("bootstrap", log_cluster.bootstrap)
         .option("topic", typed).mode("append").save())
    assert "SchemaMismatchError" in str(info.value) and "'n'" in str(info.value) and "Python connector" in str(info.value)
    df = spark.createDataFrame([(1,)], "n int")
    df.write.format(JVM_CLASS).option("bootstrap", log_cluster.bootstrap).option("topic", typed).mode("append").save()
    assert spark.read.format(JVM_CLASS).option("bootstrap", log_cluster.bootstrap).option("subscribe", typed).load().count() == 1
