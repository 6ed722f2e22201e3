"""Consumer client contracts on the shared cluster: positions of assigned partitions,
fetch bookkeeping across ``assign``, and use after ``close``."""
from __future__ import annotations

import time
import uuid

import pytest

from spark_log import Admin, Consumer, Producer

pytestmark = pytest.mark.integration


def _fill(bootstrap: str, topic: str, n: int) -> None:
    with Admin(bootstrap) as admin:
        admin.create_topic(topic, partitions=1)
    with Producer(bootstrap) as producer:
        for i in range(n):
            producer.send(topic, f"v{i}".encode(), partition=0)
        producer.flush()


def _drain(consumer: Consumer, want: int, timeout: float = 20) -> list[int]:
    got: list[int] = []
    deadline = time.monotonic() + timeout
    while len(got) < want and time.monotonic() < deadline:
        got.extend(r.offset for r in consumer.poll(0.5))
    return got


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
        assert _drain(again, 4) == [6, 7, 8, 9]
    with Consumer(bootstrap, group_id=group, auto_offset_reset=reset, enable_auto_commit=False) as sought:
        sought.assign([tp])
        sought.seek(topic_name, 0, 2)
        assert sought.position(*tp) == 2
