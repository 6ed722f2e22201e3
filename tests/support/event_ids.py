"""Read back every record of a topic with a plain ``Consumer`` (the jobs' tests check the
stored facts themselves rather than a job's own "OK" line)."""
from __future__ import annotations

import pyarrow as pa

from spark_log import Admin, Consumer
from tests.support.wait import wait_until


def stored_event_ids(bootstrap: str, topic: str, column: str = "event_id") -> list[object]:
    """The ``column`` value of every record stored in ``topic`` (all partitions, up to the
    latest offsets when called); raises if they are not all read within two minutes."""
    with Admin(bootstrap) as admin:
        latest = admin.list_offsets(topic, "latest")
    ids: list[object] = []
    with Consumer(bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([(topic, p) for p in latest])

        def drained() -> bool:
            for batch in consumer.poll_arrow(0.5):
                ids.extend(pa.Table.from_batches([batch]).column(column).to_pylist())
            return all(consumer.position(topic, p) >= end for p, end in latest.items())

        wait_until(drained, timeout=120, message=f"every record of {topic} read back")
    return ids
