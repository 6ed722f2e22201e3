"""Tiering while producers write, and while a partition's leader is killed (SIGKILL) and
comes back: every acknowledged record reads back once from offset 0 (tier, then brokers),
the Delta table holds each record once with no gap, and the tier's range as the brokers
know it survives the leader change (the TIERED frame is replicated)."""
from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import pytest

from brokers.launcher.local import LocalCluster
from jobs.tier import consumer_reader, tier_topic
from spark_log import Admin, Producer
from spark_log.errors import SparkLogError
from spark_log.tier import TierTable
from tests.support.tiering import TIERED, read_all, tier_rows
from tests.support.wait import wait_until

pytestmark = pytest.mark.fault

KILL_ROUNDS = int(os.environ.get("SPARK_LOG_TIER_KILL_ROUNDS", "1"))   # make tier-soak: more
FAST = {"heartbeat_interval_ms": 200, "session_timeout_ms": 2000, "replica_lag_time_max_ms": 2000}


class Writer(threading.Thread):
    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.topic = bootstrap, topic
        self.stop = threading.Event()
        self.acked: list[tuple[int, int, bytes]] = []
        self.lock = threading.Lock()

    def run(self) -> None:
        i = 0
        with Producer(self.bootstrap, linger_ms=1, batch_size=600, delivery_timeout_ms=60_000) as producer:
            while not self.stop.is_set():
                values = [f"w{i + j:06d}-".encode() + b"y" * 40 for j in range(20)]
                futures = [(v, producer.send(self.topic, v, key=v, partition=(i + j) % 2)) for j, v in enumerate(values)]
                i += 20
                for value, future in futures:
                    try:
                        partition, offset = future.result(timeout=90)
                    except SparkLogError:
                        continue   # not acknowledged (it may still be in the log: read back, never required)
                    with self.lock:
                        self.acked.append((partition, offset, value))

    def count(self) -> int:
        with self.lock:
            return len(self.acked)


class Tierer(threading.Thread):
    """The continuous job, in-process: a round every 0.3 s; retriable errors (a leader
    moving) end a round early, the next one starts over from what Delta holds."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.topic = bootstrap, topic
        self.stop = threading.Event()
        self.rounds = 0
        self.failed: list[str] = []
        self.fatal: BaseException | None = None

    def run(self) -> None:
        with Admin(self.bootstrap) as admin:
            while not self.stop.is_set():
                try:
                    tier_topic(admin, self.topic, reader=consumer_reader(self.bootstrap, timeout_s=20))
                    self.rounds += 1
                except (SparkLogError, TimeoutError) as exc:
                    if isinstance(exc, SparkLogError) and not exc.retriable:
                        self.fatal = exc
                        return
                    self.failed.append(repr(exc))
                self.stop.wait(0.3)


def test_tiering_while_writing_and_while_the_leader_fails_over(tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path / "cluster", brokers=3, extra_config=FAST)
    cluster.up(timeout_s=45)
    topic = "tier-failover"
    try:
        with Admin(cluster.bootstrap) as admin:
            admin.create_topic(topic, partitions=2, replication_factor=3, config={**TIERED, "min.insync.replicas": "2"})
            writer, tierer = Writer(cluster.bootstrap, topic), Tierer(cluster.bootstrap, topic)
            writer.start()
            wait_until(lambda: writer.count() > 200, timeout=60, message="first acknowledgements")
            tierer.start()
            wait_until(lambda: tierer.rounds >= 2, timeout=60, message=lambda: f"two rounds ({tierer.failed})")
            for round_ in range(KILL_ROUNDS):
                before = admin.describe_tier(topic).partitions[(topic, 0)]
                leader = admin.describe_topic(topic).partitions[0].leader
                node = next(n for n in cluster.nodes if n.node_id == leader)
                cluster.stop_node(node, kill=True)
                wait_until(lambda: admin.describe_topic(topic).partitions[0].leader not in (None, leader), timeout=30,
                           message=f"round {round_}: a new leader")
                after = admin.describe_tier(topic).partitions[(topic, 0)]
                assert after.tiered_end >= before.tiered_end and after.tier_start == before.tier_start  # replicated
                acked, rounds = writer.count(), tierer.rounds
                wait_until(lambda: writer.count() > acked + 200 and tierer.rounds > rounds + 1, timeout=60,
                           message=lambda: f"writes and tiering go on without broker {leader} ({tierer.failed[-3:]})")
                cluster.start_node(node)
                wait_until(lambda: all(len(p.isr) == 3 for p in admin.describe_topic(topic).partitions.values()),
                           timeout=45, message=f"round {round_}: the killed broker back in every ISR")
                rounds = tierer.rounds
                wait_until(lambda: tierer.rounds > rounds + 1, timeout=60, message="tiering after the restart")
            writer.stop.set()
            writer.join(timeout=120)
            tierer.stop.set()
            tierer.join(timeout=120)
            assert tierer.fatal is None, tierer.fatal
            tier_topic(admin, topic, reader=consumer_reader(cluster.bootstrap))   # a last round after the writes
            table = TierTable(admin.describe_tier(topic).location, topic)

            def settled() -> Any:
                """The brokers' view once it caught up with the table: eventual, so waited for.
                Local retention runs in the leaders' periodic upkeep, after the round above.  And
                a leader elected at the end (the preferred leader back from its restart) acts on
                the tier frame below its own high watermark, which can lag the old leader's for a
                fetch round (in CI run s-1 the test failed right after such an election landed
                during the last round).  A frame that never reached it would time out."""
                tiers = admin.describe_tier(topic)
                for p in (0, 1):
                    held, info = table.range(p), tiers.partitions[(topic, p)]
                    if info.log_start_offset <= 0 or (held.start, held.end) != (info.tier_start, info.tiered_end):
                        return None
                return tiers

            tiers = wait_until(settled, timeout=60, message=lambda: f"the brokers' view of the tier and local "
                               f"retention on every partition: {admin.describe_tier(topic)}, the table holds "
                               f"{[table.range(p) for p in (0, 1)]}")
        everything = read_all(cluster.bootstrap, topic, timeout=120)
        offsets = [(p, o) for p, o, _, _ in everything]
        assert len(offsets) == len(set(offsets))
        got = {(p, o): v for p, o, _, v in everything}
        for p, o, v in writer.acked:                     # every acknowledged record, where it was acknowledged
            assert got.get((p, o)) == v, (p, o)
        rows = tier_rows(tiers.location, topic)
        assert len(rows) == len(set(rows))
        for p in (0, 1):
            held = table.range(p)
            info = tiers.partitions[(topic, p)]
            assert (held.start, held.end) == (info.tier_start, info.tiered_end) and held.end > 0
            assert info.log_start_offset > 0                      # local retention ran
            assert [o for q, o in rows if q == p] == [o for q, o in offsets if q == p and o < held.end]
    finally:
        cluster.down(timeout_s=15)
