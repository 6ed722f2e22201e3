"""A whole-cluster restart (clean stop of every node, then start) keeps every record, the
topics, and the idempotent-producer state."""
from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from spark_log import Admin, Consumer, Producer
from tests.support.cluster import local_cluster

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_restart_keeps_data_topics_and_producer_state(tmp_path: Path) -> None:
    typed = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("name", pa.string())])
    table = pa.table({"key": [f"k{i % 9}".encode() for i in range(3000)],
                      "value": [f"value-{i}".encode() for i in range(3000)]})
    with local_cluster(tmp_path, brokers=3) as cluster:
        with Admin(cluster.bootstrap) as admin:
            admin.create_topic("events", partitions=3)
            admin.create_topic("rows", partitions=1, schema=typed, config={"retention.ms": "-1"})
        with Producer(cluster.bootstrap, producer_id=77, producer_epoch=3) as producer:
            acks = sorted(f.result(timeout=30) for f in producer.send_batch("events", table))
            producer.send_batch("rows", pa.table({"id": [1, 2], "name": ["a", None]}, schema=typed))[0].result(30)
        with Admin(cluster.bootstrap) as admin:
            before = admin.list_offsets("events", "latest")

        cluster.down()
        assert all(not alive for *_, alive in cluster.status())
        cluster.up(timeout_s=90)

        with Admin(cluster.bootstrap) as admin:
            assert set(admin.list_topics()) >= {"events", "rows"}
            assert admin.describe_topic("rows").config["retention.ms"] == "-1"
            assert admin.list_offsets("events", "latest") == before
        with Producer(cluster.bootstrap, producer_id=77, producer_epoch=3) as producer:  # a replay after restart
            assert sorted(f.result(timeout=30) for f in producer.send_batch("events", table)) == acks
        with Admin(cluster.bootstrap) as admin:
            assert admin.list_offsets("events", "latest") == before
        with Consumer(cluster.bootstrap, auto_offset_reset="earliest") as consumer:
            consumer.assign([("events", p) for p in range(3)] + [("rows", 0)])
            batches = []
            for _ in range(60):
                batches += consumer.poll_arrow(0.5)
                if sum(b.num_rows for b in batches) >= 3002:
                    break
        values = sorted(v for b in batches if "value" in b.schema.names for v in b.column("value").to_pylist())
        assert values == sorted(f"value-{i}".encode() for i in range(3000))
        rows = [r for b in batches if "id" in b.schema.names for r in b.select(["id", "name"]).to_pylist()]
        assert rows == [{"id": 1, "name": "a"}, {"id": 2, "name": None}]
