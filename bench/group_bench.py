"""Consumer groups: convergence time, commits per second, group consume throughput.

    python -m bench.group_bench [--members 2,5,10,20] [--session-ms 3000] [--records 300000]
                                [--commit-seconds 5] [--dir D]

One local cluster (3 brokers, ``__consumer_offsets`` with replication factor 3), members
as in-process ``Consumer``s each polling on its own thread.

1. *Convergence* for N members of one group over a 40-partition topic: from the moment the
   N-th member subscribes (a join), and from the moment one member dies (it stops without
   leaving: its heartbeats just stop), to a converged assignment: every partition owned by
   exactly one live member, balanced within one, each member fetching exactly what the
   coordinator assigned it, and the coordinator reporting the group Stable.  The limit it
   is judged against is the heartbeat interval the coordinator hands out (a member learns
   of a change at its next heartbeat) and, for a death, the session timeout before which
   nobody may take the dead member's partitions: the figures are printed as
   join / heartbeat interval and (death - session timeout) / heartbeat interval.
2. *Commits per second*: synchronous ``commit`` of one partition in a loop (each commit is
   a record appended to a replicated partition and acknowledged once every in-sync
   replica holds it), against its peer in the same run: synchronous ``Producer.send`` of
   one record with acks=all to a replication-factor-3 topic, the same replication path.
   Then 4 committing threads of 4 groups at once.
3. *Consume throughput*: the same topic (6 partitions, 100-byte incompressible values)
   read to its end by one ``Consumer`` with ``assign()`` and by one group member
   (``subscribe``, auto-commit on), alternating, 2 rounds each after one unmeasured read;
   ratio group / assign.

Prints a table per part.  Not part of the test pass/fail.
"""
from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable

from brokers.launcher.local import LocalCluster
from spark_log import Admin, Consumer, Producer

__all__ = ["main"]

TopicPartition = tuple[str, int]


class Member:
    """One in-process member polling on its own thread."""

    def __init__(self, bootstrap: str, group: str, topic: str, session_ms: int) -> None:
        self.consumer = Consumer(bootstrap, group_id=group, session_timeout_ms=session_ms, fetch_max_wait_ms=100,
                                 auto_offset_reset="latest")
        self.topic = topic
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self.consumer.subscribe([self.topic])
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            self.consumer.poll(0.05)

    def owned(self) -> set[TopicPartition]:
        return set(self.consumer.assignment())

    def die(self) -> None:
        """Stop without leaving: to the group, the process died."""
        self.consumer._group.membership.leave(send=False)  # type: ignore[union-attr]
        self.stop.set()
        self.thread.join(timeout=30)
        self.consumer._close_fetching()

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=30)
        self.consumer.close()


def _converged(admin: Admin, group: str, members: list[Member], partitions: int, topic: str) -> bool:
    owned = [m.owned() for m in members]
    flat = [tp for o in owned for tp in o]
    if len(flat) != partitions or set(flat) != {(topic, p) for p in range(partitions)}:
        return False
    if max(len(o) for o in owned) - min(len(o) for o in owned) > 1:
        return False
    d = admin.describe_group(group)
    assigned = sorted(tuple(m.assignment) for m in d.members)
    return d.state == "Stable" and assigned == sorted(tuple(sorted(o)) for o in owned)


def _wait(condition: Callable[[], bool], timeout_s: float = 120.0) -> float:
    start = time.monotonic()
    while not condition():
        if time.monotonic() - start > timeout_s:
            raise RuntimeError(f"not converged within {timeout_s:.0f} s")
        time.sleep(0.005)  # polling the members' state from the benchmark, not synchronisation
    return time.monotonic()


def convergence(bootstrap: str, admin: Admin, counts: list[int], session_ms: int) -> list[tuple[int, float, float]]:
    partitions = 40
    topic = "bench-groups-convergence"
    admin.create_topic(topic, partitions=partitions, replication_factor=1)
    rows = []
    for n in counts:
        group = f"bench-converge-{n}"
        members = [Member(bootstrap, group, topic, session_ms) for _ in range(n - 1)]
        try:
            for member in members:
                member.start()
            _wait(lambda: _converged(admin, group, members, partitions, topic))
            joiner = Member(bootstrap, group, topic, session_ms)
            members.append(joiner)
            started = time.monotonic()
            joiner.start()
            join_ms = (_wait(lambda: _converged(admin, group, members, partitions, topic)) - started) * 1000
            victim = members.pop(len(members) // 2)
            started = time.monotonic()
            victim.die()
            death_ms = (_wait(lambda: _converged(admin, group, members, partitions, topic)) - started) * 1000
        finally:
            for member in members:
                member.close()
        rows.append((n, join_ms, death_ms))
        print(f"  {n:>2} members: join {join_ms:7.0f} ms, death {death_ms:7.0f} ms", flush=True)
    return rows


def commits_per_second(bootstrap: str, admin: Admin, seconds: float) -> tuple[float, float, float]:
    topic = "bench-groups-commits"
    admin.create_topic(topic, partitions=4, replication_factor=3)

    def commit_loop(group: str, partition: int, deadline: float, counts: list[int]) -> None:
        with Consumer(bootstrap, group_id=group, enable_auto_commit=False) as consumer:
            consumer.assign([(topic, partition)])
            n = 0
            while time.monotonic() < deadline:
                n += 1
                consumer.commit({(topic, partition): n})
            counts.append(n)

    def produce_loop(deadline: float) -> int:
        with Producer(bootstrap, acks="all", linger_ms=0) as producer:
            n = 0
            while time.monotonic() < deadline:
                producer.send(topic, os.urandom(100), partition=0).result()
                n += 1
            return n

    one: list[int] = []
    commit_loop("bench-commits-warmup", 0, time.monotonic() + 1.0, [])
    started = time.monotonic()
    commit_loop("bench-commits-1", 0, started + seconds, one)
    sync_commits = one[0] / (time.monotonic() - started)
    started = time.monotonic()
    acked = produce_loop(started + seconds) / (time.monotonic() - started)
    many: list[int] = []
    started = time.monotonic()
    threads = [threading.Thread(target=commit_loop, args=(f"bench-commits-c{i}", i, started + seconds, many))
               for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    parallel = sum(many) / (time.monotonic() - started)
    return sync_commits, acked, parallel


def consume_throughput(bootstrap: str, admin: Admin, records: int) -> tuple[list[float], list[float]]:
    topic = "bench-groups-consume"
    admin.create_topic(topic, partitions=6, replication_factor=1)
    with Producer(bootstrap, acks=1) as producer:
        import pyarrow as pa

        chunk = 20_000
        for start in range(0, records, chunk):
            values = [os.urandom(100) for _ in range(min(chunk, records - start))]
            producer.send_batch(topic, pa.table({"value": pa.array(values, pa.binary())}))
        producer.flush()
    total = sum(admin.list_offsets(topic, "latest").values())
    assert total == records, (total, records)

    def read(consumer: Consumer) -> float:
        started = time.monotonic()
        got = 0
        while got < records:
            got += sum(batch.num_rows for batch in consumer.poll_arrow(1.0))
            if time.monotonic() - started > 300:
                raise RuntimeError(f"read {got} of {records} in 300 s")
        return records / (time.monotonic() - started)

    with Consumer(bootstrap, auto_offset_reset="earliest") as warmup:  # page cache, channels: not measured
        warmup.assign([(topic, p) for p in range(6)])
        read(warmup)
    assigned: list[float] = []
    grouped: list[float] = []
    for round_ in range(2):
        with Consumer(bootstrap, auto_offset_reset="earliest") as consumer:
            consumer.assign([(topic, p) for p in range(6)])
            assigned.append(read(consumer))
        with Consumer(bootstrap, group_id=f"bench-consume-{round_}", auto_offset_reset="earliest") as member:
            member.subscribe([topic])
            grouped.append(read(member))
    return assigned, grouped


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", default="2,5,10,20")
    parser.add_argument("--session-ms", type=int, default=3000)
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--commit-seconds", type=float, default=5.0)
    parser.add_argument("--dir", default=None)
    args = parser.parse_args(argv)
    counts = [int(n) for n in args.members.split(",") if n.strip()]
    root = Path(args.dir or tempfile.mkdtemp(prefix="group-bench-"))
    cluster = LocalCluster(root / "cluster", brokers=3)
    load_before = os.getloadavg()[0]
    try:
        cluster.up(timeout_s=120)
        bootstrap = cluster.bootstrap
        with Admin(bootstrap) as admin:
            heartbeat_ms = min(1000, args.session_ms // 3)  # the brokers' default interval, capped at a third
            print(f"convergence (session timeout {args.session_ms} ms, heartbeat interval {heartbeat_ms} ms):")
            rows = convergence(bootstrap, admin, counts, args.session_ms)
            print("commits per second:")
            sync_commits, acked, parallel = commits_per_second(bootstrap, admin, args.commit_seconds)
            print("consume throughput:")
            assigned, grouped = consume_throughput(bootstrap, admin, args.records)
    finally:
        cluster.down(timeout_s=30)
    load_after = os.getloadavg()[0]
    print()
    print(f"load average {load_before:.1f} -> {load_after:.1f}")
    print("| members | join to converged | / heartbeat | death to converged | (death - session) / heartbeat |")
    print("|---:|---:|---:|---:|---:|")
    for n, join_ms, death_ms in rows:
        print(f"| {n} | {join_ms:,.0f} ms | {join_ms / heartbeat_ms:.2f} | {death_ms:,.0f} ms | "
              f"{(death_ms - args.session_ms) / heartbeat_ms:.2f} |")
    print()
    print("| commits | per second | vs acks=all produce of one record (same run) |")
    print("|---|---:|---:|")
    print(f"| one committer, synchronous | {sync_commits:,.0f} | {sync_commits / acked:.2f} ({acked:,.0f}/s) |")
    print(f"| 4 committers (4 groups) | {parallel:,.0f} | {parallel / acked:.2f} |")
    print()
    ratio = statistics.mean(grouped) / statistics.mean(assigned)
    print("| consume, 100-byte records | rec/s (each round) | mean |")
    print("|---|---:|---:|")
    print(f"| assign() | {', '.join(f'{v:,.0f}' for v in assigned)} | {statistics.mean(assigned):,.0f} |")
    print(f"| group member (subscribe) | {', '.join(f'{v:,.0f}' for v in grouped)} | {statistics.mean(grouped):,.0f} |")
    print(f"ratio group / assign: {ratio:.2f}")


if __name__ == "__main__":
    main()
