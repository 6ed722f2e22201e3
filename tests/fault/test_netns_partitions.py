"""Real network partitions: brokers and a client in their own network namespaces.

Three broker+controller processes and one writer process, each in a namespace of a
``NetworkLab`` (veth links to one bridge; cuts are nftables drop rules in both ends'
namespaces, so packets vanish as in a real partition).  The in-process fault hook of
``brokers.net.faults`` is not used: nothing in the product knows.

1. The partition leader is cut from the other brokers (the test process and the writer
   still reach it: the wrong side of a real partition).  It cannot acknowledge acks=all
   writes; the controller fences it and a new leader takes over; after healing it
   truncates what it appended alone and rejoins the ISR.
2. The writer is cut from the leader (the rest of the cluster stays reachable): no write
   is acknowledged while cut (other brokers answer NOT_LEADER); after healing writes
   resume.

At the end the writer's history and a final read pass the checker and every replica
holds the final read.  Needs root and nftables (``make debian-deps``); about 45 s.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Iterator

import grpc
import pytest

from spark_log import Admin, Consumer
from spark_log.proto import broker_pb2 as pb
from spark_log.proto import broker_pb2_grpc as rpc
from tests.checkers.log_history import FinalRead, check
from tests.support.netns import NetworkLab, available
from tests.support.netns_cluster import NetnsCluster, netns_world
from tests.support.ns_client import read_history, read_times
from tests.support.replica_logs import read_replica, replica_dir
from tests.support.wait import wait_until

pytestmark = [pytest.mark.fault, pytest.mark.slow,
              pytest.mark.skipif(available() is not None, reason=f"{available()}")]

FAST = {"heartbeat_interval_ms": 200, "session_timeout_ms": 2000, "replica_lag_time_max_ms": 1500}
TOPIC = "netns"


@pytest.fixture()
def world(tmp_path: Path) -> Iterator[tuple[NetworkLab, NetnsCluster]]:
    with netns_world(tmp_path, FAST) as world:
        yield world


def view(cluster: NetnsCluster, node: int) -> tuple[int | None, tuple[int, ...], frozenset[int]]:
    """(leader, isr, fenced) of partition 0 in node ``node``'s own image."""
    with grpc.insecure_channel(cluster.address(node)) as channel:
        response = rpc.BrokerStub(channel).Metadata(pb.MetadataRequest(topics=[TOPIC]), timeout=5)
    (meta,) = [p for t in response.topics if t.name == TOPIC for p in t.partitions if p.partition == 0]
    return (None if meta.leader_id < 0 else meta.leader_id), tuple(meta.isr), \
        frozenset(b.broker_id for b in response.brokers if b.fenced)


def test_real_partitions_of_a_leader_and_of_a_client(world: tuple[NetworkLab, NetnsCluster], tmp_path: Path) -> None:
    lab, cluster = world
    with Admin(cluster.bootstrap) as admin:
        old = admin.create_topic(TOPIC, partitions=1, replication_factor=3,
                                 config={"min.insync.replicas": "2"}).partitions[0].leader
        wait_until(lambda: len(admin.describe_topic(TOPIC, live=False).partitions[0].isr) == 3, timeout=30,
                   message="full ISR")
    client = lab.add("client")
    out = tmp_path / "writer.jsonl"
    writer = lab.popen(client, [sys.executable, "-m", "tests.support.ns_client", cluster.bootstrap, TOPIC, "w-",
                                str(out), "--partition", "0"], cwd=str(Path(__file__).resolve().parents[2]))
    others = [i for i in cluster.ids if i != old]
    try:
        wait_until(lambda: sum(ok for _, ok in read_times(out)) >= 30 if out.exists() else False, timeout=60,
                   message="first acknowledgements")

        # 1. the leader on the wrong side of a partition between brokers
        for other in others:
            lab.cut(f"n{old}", f"n{other}")

        def replaced() -> int | None:
            views = [view(cluster, i) for i in others]
            leaders = {leader for leader, _, _ in views}
            settled = all(old in fenced and old not in isr for _, isr, fenced in views)
            return next(iter(leaders)) if settled and len(leaders) == 1 and None not in leaders and old not in leaders \
                else None
        new = wait_until(replaced, timeout=45, message=f"broker {old} fenced and replaced")
        acked = sum(ok for _, ok in read_times(out))
        wait_until(lambda: sum(ok for _, ok in read_times(out)) >= acked + 20, timeout=60,
                   message=f"the writer goes on through the new leader {new}")
        lab.heal()
        wait_until(lambda: all(len(view(cluster, i)[1]) == 3 for i in cluster.ids), timeout=60,
                   message=f"broker {old} rejoins the ISR after healing")

        # 2. the client cut from the leader, once leadership is back with the preferred
        # replica (the preferred-leader election follows the rejoin) and settled everywhere
        leader = old
        wait_until(lambda: all(view(cluster, i)[0] == leader for i in cluster.ids), timeout=60,
                   message=f"leadership back with the preferred replica {leader}")
        lab.cut("client", f"n{leader}")
        cut_at = time.monotonic()
        time.sleep(6)  # the cut lasts 6 s: what happens in it is the point, not a wait for something
        healed_at = time.monotonic()
        lab.heal()
        acked = sum(ok for _, ok in read_times(out))
        wait_until(lambda: sum(ok for _, ok in read_times(out)) >= acked + 20, timeout=60,
                   message="the writer goes on after the client's link is healed")
        during = [t for t, ok in read_times(out) if ok and cut_at + 3.5 < t < healed_at]
        assert not during, (f"{len(during)} writes acknowledged while the writer could not reach leader {leader} "
                            f"(no leader change happened)")
    finally:
        writer.terminate()
        writer.wait(timeout=90)
    history = read_history(out, "w")
    with Admin(cluster.bootstrap) as admin:
        end = admin.list_offsets(TOPIC, "latest")[0]
    final: list[tuple[int, bytes]] = []
    with Consumer(cluster.bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([(TOPIC, 0)])

        def read_all() -> bool:
            final.extend((r.offset, r.value) for r in consumer.poll(0.5))
            return bool(final) and final[-1][0] >= end - 1

        wait_until(read_all, timeout=60, message=f"final read up to offset {end}")
    anomalies = check([*history, FinalRead(0, tuple(final))])
    assert not anomalies, str(anomalies)
    assert sum(1 for op in history if op.ok) >= 70
    wait_until(lambda: all(read_replica(replica_dir(cluster.data_dir(i), TOPIC, 0)) == final for i in cluster.ids),
               timeout=60, message="every replica holds the final read")
