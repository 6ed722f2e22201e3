"""``assign`` naming a partition number beyond a Java int is refused by both implementations
(the JVM one truncated 4294967296 to partition 0 and read it).  Adds about 3 s."""
from __future__ import annotations

from typing import Any, Callable

import pytest


def test_assign_of_a_partition_beyond_the_int_range_is_refused(
        spark: Any, log_cluster: Any, admin: Any, topic_name: Callable[[], str], fmt: str) -> None:
    topic = topic_name()
    admin.create_topic(topic, partitions=1)
    with pytest.raises(Exception, match="4294967296|assign") as refused:
        rows = (spark.read.format(fmt).option("bootstrap", log_cluster.bootstrap)
                .option("assign", f'{{"{topic}": [4294967296]}}').load().select("partition").collect())
        raise AssertionError(f"NOT REFUSED: {rows} for partition 4294967296")
    assert "NOT REFUSED" not in str(refused.value)
