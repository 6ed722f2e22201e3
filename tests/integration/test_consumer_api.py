"""Consumer client contracts on the shared cluster: where assigned partitions of a group
consumer start (the rest is in tests/unit/spark_log/test_consumer_api.py)."""
from __future__ import annotations

import time
import uuid

import pytest

from spark_log import Admin, Consumer, Producer

pytestmark = pytest.mark.integration


def _drain(consumer: Consumer, want: int, timeout: float = 20) -> list[tuple[int, int]]:
    """``(partition, offset)`` of the records polled until there are ``want``, in order per partition."""
    got: list[tuple[int, int]] = []
    deadline = time.monotonic() + timeout
    while len(got) < want and time.monotonic() < deadline:
        got.extend((r.partition, r.offset) for r in consumer.poll(0.5))
    return sorted(got)


@pytest.mark.parametrize("reset", ["earliest", "latest"])
def test_assign_with_group_id_resumes_at_the_committed_offset(bootstrap: str, topic_name: str, reset: str) -> None:
    """Kafka's assign + group.id consumer starts a partition at the group's committed offset;
    ``auto_offset_reset`` applies only where the group has none (a partition without a
    commit), and a ``seek`` wins over both."""
    with Admin(bootstrap) as admin:
        admin.create_topic(topic_name, partitions=2)
    with Producer(bootstrap) as producer:
        for i in range(10):
            producer.send(topic_name, f"v{i}".encode(), partition=0)
            producer.send(topic_name, f"w{i}".encode(), partition=1)
        producer.flush()
    group = f"g-{uuid.uuid4().hex[:8]}"
    tp, other = (topic_name, 0), (topic_name, 1)
    with Consumer(bootstrap, group_id=group, auto_offset_reset=reset, enable_auto_commit=False) as first:
        first.assign([tp])
        first.commit({tp: 6})
    with Consumer(bootstrap, group_id=group, auto_offset_reset=reset, enable_auto_commit=False) as again:
        again.assign([tp, other])
        assert again.position(*tp) == 6
        assert again.position(*other) == (0 if reset == "earliest" else 10)   # no commit: the reset policy
        expected = [(0, o) for o in range(6, 10)] + ([(1, o) for o in range(10)] if reset == "earliest" else [])
        assert _drain(again, len(expected)) == expected
    with Consumer(bootstrap, group_id=group, auto_offset_reset=reset, enable_auto_commit=False) as sought:
        sought.assign([tp])
        sought.seek(topic_name, 0, 2)
        assert sought.position(*tp) == 2
