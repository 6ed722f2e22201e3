"""``message.timestamp.type=LogAppendTime`` through both implementations of the ``spark-log``
source: every row's ``timestamp`` is the leader's append time, not the producer's CreateTime
(the leader stamps only the frame's header; the stored records keep the producer's), and a
filter on ``timestamp`` sees the append time too."""
from __future__ import annotations

import datetime as dt
import time
from typing import Any, Callable

import pytest

from spark_log import Producer

pytestmark = pytest.mark.spark

OLD = 1_000_000_000_000  # 2001-09-09: the producer's CreateTime


def test_rows_carry_the_append_time(spark: Any, log_cluster: Any, admin: Any, topic_name: Callable[[], str],
                                    fmt: str) -> None:
    topic = topic_name()
    admin.create_topic(topic, partitions=1, config={"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    with Producer(log_cluster.bootstrap) as producer:
        for value in (b"a", b"b", b"c"):
            producer.send(topic, value, partition=0, timestamp=OLD)
        producer.flush()
    after = int(time.time() * 1000)
    df = (spark.read.format(fmt).option("bootstrap", log_cluster.bootstrap).option("subscribe", topic).load()
          .selectExpr("value", "unix_millis(timestamp) AS ms", "timestampType"))
    rows = sorted(df.collect())
    assert [bytes(r.value) for r in rows] == [b"a", b"b", b"c"]
    assert all(before <= r.ms <= after and r.timestampType == 1 for r in rows), (rows, before, after)
    since = dt.datetime.fromtimestamp(before / 1000, dt.timezone.utc)   # pushed: the start by time (ListOffsets)
    pushed = (spark.read.format(fmt).option("bootstrap", log_cluster.bootstrap).option("subscribe", topic)
              .option("pushFilters", "true").load())
    assert pushed.where(f"timestamp >= timestamp'{since.isoformat()}'").count() == 3
