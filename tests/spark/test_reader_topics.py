"""Streams whose topics change under them: a subscribed topic deleted mid-query, for both
implementations (``test_options.py::test_fail_on_data_loss`` does it with
``subscribePattern``)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import pyarrow as pa
import pytest

from spark_log import Producer

pytestmark = pytest.mark.spark


def _fill(log_cluster: Any, topic: str, n: int) -> None:
    with Producer(log_cluster.bootstrap, linger_ms=0) as producer:
        values = pa.array([f"v{i}".encode() for i in range(n)], pa.binary())
        producer.send_batch(topic, pa.table({"value": values}), partition=0)
        producer.flush()


def test_a_subscribed_topic_deleted_mid_query_is_skipped_with_fail_on_data_loss_false(
        spark: Any, log_cluster: Any, admin: Any, topic_name: Callable[[], str], tmp_path: Path, fmt: str) -> None:
    """As Kafka: with failOnDataLoss=false a deleted subscribed topic is skipped and the others
    keep flowing, across a restart too (load() no longer describes it).  failOnDataLoss=true:
    test_reader_driver.py::test_a_deleted_subscribed_topic_is_skipped_with_fail_on_data_loss_false."""
    keep, doomed = topic_name(), topic_name()
    for topic in (keep, doomed):
        admin.create_topic(topic, partitions=1)
        _fill(log_cluster, topic, 3)

    def run() -> Any:
        return (spark.readStream.format(fmt).option("bootstrap", log_cluster.bootstrap)
                .option("subscribe", f"{keep},{doomed}").option("startingOffsets", "earliest")
                .option("failOnDataLoss", "false").load()
                .writeStream.format("noop").option("checkpointLocation", str(tmp_path / f"c-{fmt}"))
                .trigger(availableNow=True).start())

    run().awaitTermination(120)
    admin.delete_topic(doomed)
    _fill(log_cluster, keep, 2)
    query = run()
    query.awaitTermination(120)
    assert query.exception() is None
    assert json.loads(query.lastProgress["sources"][0]["endOffset"]) == {keep: {"0": 5}}
