"""A producer's sends go on past sequences the broker will never append, for real.

1. The partition's leader forgot the producer's id (KIP-360).

Retention deletes every frame of an idle producer and the broker restarts: the broker
rebuilds its producer state from the log, so the producer's id is unknown there, and the
producer's next send (sequence n > 0) can never be appended under that id.  The producer
re-stamps it under a fresh id and it is delivered, once, in order.

One broker, a 1 KiB segment and 10 minutes' retention; the producer's records carry
timestamps an hour old, so retention deletes them as soon as their segment is closed.

2. A record too large for the topic fails alone: the records sent around it, in the same
   batch or pipelined behind it, are delivered once, in order.

Adds about 30 s (a restart, retention's 5 s maintenance tick, the broker's gap waits).
"""
from __future__ import annotations

import os
import time
from concurrent.futures import Future
from pathlib import Path

import pytest

from spark_log import Admin, Consumer, Producer, errors
from tests.support.cluster import local_cluster
from tests.support.wait import wait_until

TOPIC = "forgotten"


def _values(bootstrap: str, count: int, topic: str = TOPIC) -> list[bytes]:
    with Consumer(bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([(topic, 0)])
        values: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(values) < count and time.monotonic() < deadline:
            values += [record.value for record in consumer.poll(0.5)]
        return values


def test_a_producer_whose_id_the_leader_forgot_delivers_its_next_records(tmp_path: Path) -> None:
    hour_ago = int(time.time() * 1000) - 3_600_000
    with local_cluster(tmp_path, brokers=1) as cluster:
        with Admin(cluster.bootstrap) as admin:
            admin.create_topic(TOPIC, partitions=1, replication_factor=1,
                               config={"segment.bytes": "1024", "retention.ms": "600000"})
        # a short request timeout bounds the broker's wait for the sequences it never saw
        producer = Producer(cluster.bootstrap, linger_ms=0, request_timeout_ms=3_000, delivery_timeout_ms=60_000)
        try:
            for i in range(3):
                producer.send(TOPIC, b"old-%d" % i + b"." * 600, partition=0, timestamp=hour_ago).result(timeout=30)
            with Producer(cluster.bootstrap) as filler:  # rolls the old records' segments closed
                for i in range(3):
                    filler.send(TOPIC, b"filler-%d" % i + b"." * 600, partition=0).result(timeout=30)
            with Admin(cluster.bootstrap) as admin:
                wait_until(lambda: admin.list_offsets(TOPIC, "earliest")[0] >= 3, timeout=60,
                           message="retention never deleted the old records")
            cluster.down()
            cluster.up(timeout_s=90)

            acks = [producer.send(TOPIC, b"new-%d" % i, partition=0) for i in range(3)]
            offsets = [future.result(timeout=60)[1] for future in acks]
        finally:
            producer.close(timeout=10)

        assert offsets == sorted(offsets) and len(set(offsets)) == 3
        values = _values(cluster.bootstrap, 6)
        assert [v for v in values if v.startswith(b"new-")] == [b"new-0", b"new-1", b"new-2"]
        assert not any(v.startswith(b"old-") for v in values)


def test_a_record_too_large_for_the_topic_fails_alone(tmp_path: Path) -> None:
    with local_cluster(tmp_path, brokers=1) as cluster:
        with Admin(cluster.bootstrap) as admin:
            admin.create_topic("small", partitions=1, replication_factor=1, config={"max.message.bytes": "4096"})
        sent: list[tuple[bytes, Future[tuple[int, int]]]] = []
        with Producer(cluster.bootstrap, request_timeout_ms=5_000, delivery_timeout_ms=60_000) as producer:
            for i in range(10):  # incompressible, so the frame stays too large
                sent.append((b"big", producer.send("small", os.urandom(20_000), partition=0)))
                sent += [(b"s%d-%d" % (i, j), producer.send("small", b"s%d-%d" % (i, j), partition=0))
                         for j in range(5)]
            for value, future in sent:
                if value == b"big":
                    with pytest.raises(errors.RecordTooLargeError) as refused:
                        future.result(timeout=60)
                    assert refused.value.maybe_written is False
                else:
                    future.result(timeout=60)
        smalls = [value for value, _ in sent if value != b"big"]
        assert _values(cluster.bootstrap, len(smalls), "small") == smalls
