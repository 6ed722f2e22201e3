"""Helpers of the tiering tests: a tiered topic with small segments, produced records, the
whole of a partition read through a Consumer (union read), the Delta table's rows."""
from __future__ import annotations

from typing import Any

from spark_log import Admin, Consumer, Producer
from spark_log.tier import TierTable
from tests.support.wait import wait_until

TIERED = {"remote.storage.enable": "true", "segment.bytes": "1024", "local.retention.ms": "0",
          "retention.ms": "-1"}

Row = tuple[int, int, bytes | None, bytes]   # partition, offset, key, value


def create_tiered(bootstrap: str, topic: str, *, partitions: int = 2, config: dict[str, str] | None = None) -> None:
    with Admin(bootstrap) as admin:
        admin.create_topic(topic, partitions=partitions, replication_factor=3, config={**TIERED, **(config or {})})


def produce(bootstrap: str, topic: str, count: int, *, start: int = 0, partitions: int = 2,
            keys: int | None = None) -> list[Row]:
    """``count`` records, round robin over ``partitions`` (``keys``: key i % keys); the rows as written."""
    out: list[Row] = []
    with Producer(bootstrap, linger_ms=1, batch_size=600) as producer:
        futures = []
        for i in range(start, start + count):
            key = f"k{i % keys}".encode() if keys else f"k{i}".encode()
            value = f"value-{i:06d}-".encode() + b"x" * 40
            futures.append((key, value, producer.send(topic, value, key=key, partition=i % partitions)))
        for key, value, future in futures:
            partition, offset = future.result(timeout=60)
            out.append((partition, offset, key, value))
    return sorted(out)


def read_all(bootstrap: str, topic: str, *, partitions: int = 2, start: int = 0,
             isolation_level: str = "read_uncommitted", timeout: float = 60.0) -> list[Row]:
    """Every record from ``start`` to the high watermark of each partition, through a Consumer."""
    with Admin(bootstrap) as admin:
        ends = admin.list_offsets(topic, "latest", isolation_level=isolation_level)
    out: list[Row] = []
    with Consumer(bootstrap, auto_offset_reset="none", isolation_level=isolation_level) as consumer:
        consumer.assign([(topic, p) for p in range(partitions)])
        for p in range(partitions):
            consumer.seek(topic, p, start, end=ends[p])

        def done() -> bool:
            out.extend((r.partition, r.offset, r.key, r.value) for r in consumer.poll(0.2))
            return all(consumer.position(topic, p) >= ends[p] for p in range(partitions))

        wait_until(done, timeout=timeout, message=f"reading {topic} to {ends}")
    return sorted(out)


def tier_rows(location: str, topic: str, storage_options: dict[str, str] | None = None) -> list[tuple[int, int]]:
    """(partition, offset) of every row of the topic's Delta table."""
    table = TierTable(location, topic, storage_options=storage_options).load()
    if table is None:
        return []
    data = table.to_pyarrow_table(columns=["partition", "offset"])
    return sorted(zip(data.column("partition").to_pylist(), data.column("offset").to_pylist()))


def wait_local_start(bootstrap: str, topic: str, partition: int, at_least: int, timeout: float = 30.0) -> Any:
    """Wait until the leader's local log starts at or past ``at_least`` (local retention ran)."""
    with Admin(bootstrap) as admin:
        return wait_until(lambda: (lambda info: info if info.log_start_offset >= at_least else None)(
            admin.describe_tier(topic).partitions[(topic, partition)]), timeout=timeout,
            message=f"{topic}-{partition}: local log start never reached {at_least}")
