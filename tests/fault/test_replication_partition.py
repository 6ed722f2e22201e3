"""A network-partitioned old leader cannot acknowledge acks=all writes (fencing), on real brokers.

The partition goes through the transport fault hook (``brokers.net.faults``):
``{"<old leader>": {"isolated": true}}`` cuts every link between the old leader and the
other nodes (Raft, controller calls, replica fetches, both ways) while the old leader keeps
running and answering clients on 127.0.0.1, as a broker on the wrong side of a real
partition does.  Unlike a SIGSTOP (``test_replication_isr``), the old leader stays alive,
still believes it leads, and appends what producers send it straight.

The story (RF=3, min.insync.replicas=2): an acks=all producer writes all along; the leader
is isolated; the controller fences it (missed heartbeats) and elects a new leader from the
ISR; produce requests sent *directly* to the old leader are never acknowledged (they time
out or fail with NOT_LEADER / NOT_ENOUGH_REPLICAS(_AFTER_APPEND) / FENCED_EPOCH), though it appends them
locally; writes through the new leader are acknowledged; the partition heals; the old
leader rejoins as a follower and truncates its divergent suffix.  At the end every
acknowledged record of the whole run is at its acknowledged offset in every replica's log,
the history checker finds no anomaly, and the suffix the old leader wrote while isolated
is gone from every replica.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import grpc
import pytest

from spark_log import Admin, Consumer, Producer
from spark_log.errors import ErrorCode
from spark_log.proto import broker_pb2 as pb
from spark_log.proto import broker_pb2_grpc as rpc
from tests.checkers.log_history import FinalRead, Op, Send, check
from tests.fault.test_replication_isr import (  # noqa: F401 - fixture
    _frames,
    faulty_cluster,
    isr,
    seen_by,
    set_faults,
)
from tests.support.acked_writer import AckedWriter
from tests.support.replica_logs import read_replica, replica_dir
from tests.support.wait import wait_until

pytestmark = [pytest.mark.fault, pytest.mark.slow]

TOPIC = "partitioned"
REFUSALS = {ErrorCode.NOT_LEADER, ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
            ErrorCode.FENCED_EPOCH, ErrorCode.REQUEST_TIMEOUT}


def produce_direct(port: int, value: bytes, *, timeout_ms: int = 2500) -> tuple[int, str]:
    """One acks=all produce request straight to the broker at ``port``: (error code, message);
    -1 when the call itself failed (deadline, unavailable)."""
    request = pb.ProduceRequest(acks=-1, timeout_ms=timeout_ms,
                                partitions=[pb.PartitionRecords(topic=TOPIC, partition=0, records=_frames(value))])
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        try:
            response = rpc.BrokerStub(channel).Produce(request, timeout=timeout_ms / 1000 + 10)
        except grpc.RpcError as exc:
            return -1, str(exc.code())
    result = response.partitions[0]
    return result.error.code, result.error.message


def test_isolated_old_leader_cannot_acknowledge_and_truncates_after_healing(faulty_cluster) -> None:
    cluster, faults = faulty_cluster
    history: list[Op] = []
    with Admin(cluster.bootstrap) as admin:
        description = admin.create_topic(TOPIC, partitions=1, replication_factor=3,
                                         config={"min.insync.replicas": "2"})
        old = description.partitions[0].leader
        wait_until(lambda: len(isr(admin, TOPIC)) == 3, timeout=20, message="full ISR")
    node = next(n for n in cluster.nodes if n.node_id == old)
    others = ",".join(f"127.0.0.1:{n.port}" for n in cluster.nodes if n.node_id != old)
    survivor_ports = [n.port for n in cluster.nodes if n.node_id != old]
    writer = AckedWriter(cluster.bootstrap, TOPIC, prefix="w-", partition=0, batch=5, delivery_timeout_ms=8000)
    writer.thread.start()
    pool = ThreadPoolExecutor(1)
    try:
        wait_until(lambda: writer.acked() >= 30, timeout=30, message="first acknowledgements")

        set_faults(faults, {old: {"isolated": True}})
        # a write straight to the old leader before it is even fenced: never acknowledged
        # (its followers cannot fetch); it may survive (a follower's fetch already in flight
        # may have carried it), so it is an indefinite failure in the history
        early = pool.submit(produce_direct, node.port, b"early-direct")

        def new_leader() -> int | None:
            # both survivors' own images (an Admin could route to the isolated node and
            # get its stale view): old fenced (session timeout), out of the ISR, a new leader
            views = [seen_by(port, TOPIC) for port in survivor_ports]
            leaders = {leader for leader, _, _ in views}
            settled = all(old in fenced and old not in isr_ for _, isr_, fenced in views)
            (leader,) = leaders if len(leaders) == 1 else (None,)
            return leader if settled and leader not in (None, old) else None

        leader = wait_until(new_leader, timeout=30,
                            message=f"the controller fences isolated broker {old} and elects a new leader")
        code, message = early.result(timeout=60)
        assert code != 0, f"isolated old leader {old} acknowledged an acks=all write before it was fenced"
        assert code == -1 or code in REFUSALS, f"unexpected answer {code}: {message}"
        history.append(Send(0, b"early-direct", False, definite=False))
        # the old leader still believes it leads: it appends what it is sent, but can
        # never acknowledge it (its followers cannot fetch, its ISR shrink cannot reach
        # the controller)
        stale = [f"stale-{i}".encode() for i in range(3)]
        for value in stale:
            code, message = produce_direct(node.port, value)
            assert code != 0, f"isolated old leader {old} acknowledged an acks=all write {value!r}"
            assert code == -1 or code in REFUSALS, f"unexpected answer {code}: {message}"
            history.append(Send(0, value, False, definite=False))
        new_log = dict(read_replica(replica_dir(cluster.node_dir(leader), TOPIC, 0)))
        divergent = [(o, v) for o, v in read_replica(replica_dir(cluster.node_dir(old), TOPIC, 0))
                     if new_log.get(o) != v]
        assert set(stale) <= {v for _, v in divergent}, (
            f"the isolated leader should have appended the direct writes locally: divergent suffix {divergent}")

        # the majority side keeps acknowledging acks=all writes through the new leader
        with Producer(others, acks="all", linger_ms=1) as producer:
            for i in range(10):
                value = f"majority-{i}".encode()
                partition, offset = producer.send(TOPIC, value, partition=0).result(timeout=30)
                history.append(Send(partition, value, True, offset, producer="majority", index=i))

        set_faults(faults, {})
        wait_until(lambda: all(len(seen_by(n.port, TOPIC)[1]) == 3 for n in cluster.nodes), timeout=45,
                   message=f"broker {old} rejoins the ISR as a follower after healing")
        before = writer.acked()
        wait_until(lambda: writer.acked() >= before + 20, timeout=30, message="the writer goes on after healing")
    finally:
        writer.stop.set()
        set_faults(faults, {})
        pool.shutdown(wait=True)
        writer.thread.join(timeout=90)
    history = writer.history + history

    with Admin(cluster.bootstrap) as admin:
        end = admin.list_offsets(TOPIC, "latest")[0]
    final: list[tuple[int, bytes]] = []
    with Consumer(cluster.bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([(TOPIC, 0)])

        def read_all() -> bool:
            final.extend((r.offset, r.value) for r in consumer.poll(0.5))
            return bool(final) and final[-1][0] >= end - 1

        wait_until(read_all, timeout=60, message=f"final read up to offset {end}")
    anomalies = check(history + [FinalRead(0, tuple(final))])
    assert not anomalies, str(anomalies)

    def replicas_identical() -> bool:
        return all(read_replica(replica_dir(cluster.node_dir(n.node_id), TOPIC, 0)) == final for n in cluster.nodes)

    wait_until(replicas_identical, timeout=30, message="every replica's log equals the final read")
    acked = [op for op in history if isinstance(op, Send) and op.ok]
    assert len(acked) >= 60
    for n in cluster.nodes:
        stored = dict(read_replica(replica_dir(cluster.node_dir(n.node_id), TOPIC, 0)))
        misplaced = [op for op in acked if stored.get(op.offset) != op.value]
        assert not misplaced, f"broker {n.node_id} lacks acknowledged records at their offsets: {misplaced[:5]}"
        # (only the direct writes are checked by value: a writer record the old leader held
        # unacknowledged may have been retried to the new leader and landed at the same offset)
        leftover = [(o, v) for o, v in stored.items() if v in stale]
        assert not leftover, f"broker {n.node_id} still holds the isolated leader's divergent suffix {leftover}"
