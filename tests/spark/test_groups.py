"""Reader option ``groupId``: a query's progress as a member-less consumer group (issue 13).

A running query publishes every completed micro-batch, including the last one of a drained,
idle query, so ``spark-log groups describe`` shows lag 0; the group can be reset (it has no
members); ``startingOffsets=group`` starts a new query at the group's offsets; a query
restarted from its checkpoint ignores the group (the checkpoint is the source of truth).
Run over both implementations (``fmt``); adds about 25 s each.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import pytest

from spark_log import Producer, errors
from spark_log.cli import main
from tests.support.wait import wait_until

pytestmark = pytest.mark.spark


def _produce(bootstrap: str, topic: str, start: int, count: int) -> None:
    with Producer(bootstrap) as producer:
        for n in range(start, start + count):
            producer.send(topic, f"v{n}".encode(), partition=n % 2)
        producer.flush()


def _reader(spark: Any, bootstrap: str, topic: str, group: str, starting: str, fmt: str) -> Any:
    return (spark.readStream.format(fmt).option("bootstrap", bootstrap).option("subscribe", topic)
            .option("groupId", group).option("startingOffsets", starting).load())


def test_group_id_publishes_progress_resets_and_starts_from_the_group(
        spark: Any, log_cluster: Any, admin: Any, topic_name: Callable[[], str], tmp_path: Path,
        capsys: pytest.CaptureFixture[str], fmt: str) -> None:
    bootstrap, topic, group = log_cluster.bootstrap, topic_name(), f"query-{topic_name()}"
    admin.create_topic(topic, partitions=2)
    _produce(bootstrap, topic, 0, 40)
    rows: list[tuple[int, int]] = []

    def sink(batch: Any, batch_id: int) -> None:
        rows.extend((r.partition, r.offset) for r in batch.select("partition", "offset").collect())

    checkpoint = tmp_path / "first"
    query = (_reader(spark, bootstrap, topic, group, "earliest", fmt).writeStream.foreachBatch(sink)
             .option("checkpointLocation", str(checkpoint)).start())
    try:
        def lag() -> int | None:
            if not query.isActive:  # pytest.fail is not an Exception: wait_until does not swallow it
                pytest.fail(f"the query stopped: {query.exception()}")
            d = admin.describe_group(group)  # GroupIdNotFoundError until its first commit: "not yet"
            done = sum(p.committed_offset or 0 for p in d.partitions.values())
            return d.total_lag if done == expected and len(d.partitions) == 2 else None

        def seen() -> str:
            try:
                return f"group lag {lag()}, {len(rows)} rows read"
            except errors.SparkLogError as exc:
                return f"{exc}, {len(rows)} rows read"

        expected = 40
        wait_until(lambda: lag() == 0, timeout=120, message=seen)
        _produce(bootstrap, topic, 40, 10)
        expected = 50
        wait_until(lambda: lag() == 0, timeout=120, message=lambda: f"the drained query's last batch was not published: {seen()}")
        assert query.isActive and query.exception() is None
        assert main(["--bootstrap", bootstrap, "groups", "describe", group, "--json"]) == 0
        described = json.loads(capsys.readouterr().out)
        assert described["total_lag"] == 0 and described["members"] == [] and described["state"] == "Empty"
        assert {p["metadata"] for p in described["partitions"]} == {"spark-log streaming query"}
    finally:
        query.stop()
    assert sorted(rows) == sorted({(n % 2, n // 2) for n in range(50)})

    # a member-less group can be reset; a new query (no checkpoint) starts where the group says
    ends = admin.list_offsets(topic, "latest")
    assert admin.reset_group_offsets(group, topic, to_offset=15) == {(topic, p): 15 for p in range(2)}
    resumed: list[tuple[int, int]] = []

    def collect(batch: Any, batch_id: int) -> None:
        resumed.extend((r.partition, r.offset) for r in batch.select("partition", "offset").collect())

    fresh = (_reader(spark, bootstrap, topic, group, "group", fmt).writeStream.foreachBatch(collect)
             .option("checkpointLocation", str(tmp_path / "second")).trigger(availableNow=True).start())
    fresh.awaitTermination(180)
    assert fresh.exception() is None
    assert sorted(resumed) == [(p, o) for p in range(2) for o in range(15, ends[p])]
    assert admin.describe_group(group).total_lag == 0  # its last batch was published before it ended

    # the checkpoint, not the group, is the truth for a query that has one
    admin.reset_group_offsets(group, topic, to="earliest")
    again: list[int] = []
    restarted = (_reader(spark, bootstrap, topic, group, "group", fmt).writeStream
                 .foreachBatch(lambda batch, _id: again.append(batch.count()))
                 .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    restarted.awaitTermination(180)
    assert restarted.exception() is None and sum(again) == 0


def test_group_id_is_for_streams_and_group_needs_it(spark: Any, log_cluster: Any, admin: Any,
                                                    topic_name: Callable[[], str], fmt: str) -> None:
    topic = topic_name()
    admin.create_topic(topic, partitions=1)
    batch = spark.read.format(fmt).option("bootstrap", log_cluster.bootstrap).option("subscribe", topic)
    with pytest.raises(Exception, match="'groupId'"):
        batch.option("groupId", "g").load().collect()
    with pytest.raises(Exception, match="'groupId'"):
        batch.option("groupId", " ").load().collect()
    with pytest.raises(Exception, match="'startingOffsets'"):
        (spark.readStream.format(fmt).option("bootstrap", log_cluster.bootstrap).option("subscribe", topic)
         .option("startingOffsets", "group").load().writeStream.format("noop").start().awaitTermination(60))
