"""A deposed leader cut off from the cluster (a "zombie") against clients with leader epochs.

Three broker+controller processes in network namespaces (``NetworkLab``), a topic with
RF 3 and ``min.insync.replicas`` 2.  The partition's leader is cut from the other two
brokers (the test process still reaches it): the controller elects another leader in a
higher leader epoch, which acknowledges acks=all writes the zombie never sees, while the
zombie's own image still says it leads in the old epoch and its "latest" is the old high
watermark (what a nemesis run saw: acknowledged records looked lost).

- the brokers check a client's leader epoch (KIP-320): at the new leader an older epoch is
  ``FencedLeaderEpochError`` and a newer one ``UnknownLeaderEpochError``, for ListOffsets
  and consumer fetches alike; at the zombie the new epoch is ``UnknownLeaderEpochError``;
  -1 is not checked (and at the zombie gives the stale answer: Kafka's model for a client
  that knows nothing newer);
- a client that has seen the new epoch never takes the zombie's answer: its "latest" is at
  least the acknowledged end, and once the zombie is the only broker it can reach, it gets
  a retriable error instead of the zombie's offsets; a consumer reads the acknowledged
  records from the new leader.

Needs root and nftables (``make debian-deps``); about 20 s.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

import grpc
import pytest

from spark_log import Admin, Consumer, Producer
from spark_log.errors import ErrorCode, SparkLogError
from spark_log.proto import broker_pb2 as pb
from spark_log.proto import broker_pb2_grpc as rpc
from tests.support.netns import NetworkLab, available
from tests.support.netns_cluster import NetnsCluster, netns_world
from tests.support.wait import wait_until

pytestmark = [pytest.mark.fault, pytest.mark.slow,
              pytest.mark.skipif(available() is not None, reason=f"{available()}")]

FAST = {"heartbeat_interval_ms": 200, "session_timeout_ms": 2000, "replica_lag_time_max_ms": 1500,
        "auto_leader_rebalance_enable": False}
TOPIC = "zombie"


@pytest.fixture()
def world(tmp_path: Path) -> Iterator[tuple[NetworkLab, NetnsCluster]]:
    with netns_world(tmp_path, FAST) as world:
        yield world


def meta(cluster: NetnsCluster, node: int) -> pb.PartitionMeta:
    """Partition 0 in node ``node``'s own image."""
    with grpc.insecure_channel(cluster.address(node)) as channel:
        response = rpc.BrokerStub(channel).Metadata(pb.MetadataRequest(topics=[TOPIC]), timeout=5)
    (found,) = [p for t in response.topics if t.name == TOPIC for p in t.partitions if p.partition == 0]
    return found


def list_latest(cluster: NetnsCluster, node: int, epoch: int) -> pb.ListOffsetsPartitionResult:
    request = pb.ListOffsetsRequest(replica_id=-1, partitions=[
        pb.ListOffsetsPartition(topic=TOPIC, partition=0, timestamp=-1, current_leader_epoch=epoch)])
    with grpc.insecure_channel(cluster.address(node)) as channel:
        (result,) = rpc.BrokerStub(channel).ListOffsets(request, timeout=5).partitions
    return result


def fetch(cluster: NetnsCluster, node: int, epoch: int) -> pb.FetchPartitionResult:
    request = pb.FetchRequest(replica_id=-1, max_wait_ms=0, partitions=[
        pb.FetchPartition(topic=TOPIC, partition=0, fetch_offset=0, current_leader_epoch=epoch)])
    with grpc.insecure_channel(cluster.address(node)) as channel:
        (result,) = rpc.BrokerStub(channel).Fetch(request, timeout=5).partitions
    return result


def test_clients_that_saw_the_new_leader_epoch_never_take_the_zombies_answer(
        world: tuple[NetworkLab, NetnsCluster]) -> None:
    lab, cluster = world
    with Admin(cluster.bootstrap) as admin:
        admin.create_topic(TOPIC, partitions=1, replication_factor=3, config={"min.insync.replicas": "2"})
        wait_until(lambda: len(admin.describe_topic(TOPIC, live=False).partitions[0].isr) == 3, timeout=30,
                   message="full ISR")
    first = meta(cluster, cluster.ids[0])
    old, old_epoch = first.leader_id, first.leader_epoch
    others = [i for i in cluster.ids if i != old]
    with Producer(cluster.bootstrap, acks="all") as producer:
        for n in range(20):
            producer.send(TOPIC, b"before-%d" % n, partition=0).result(timeout=30)
    wait_until(lambda: list_latest(cluster, old, -1).offset == 20, timeout=30,
               message="the leader's high watermark covers the first writes")

    for other in others:  # the leader on the wrong side of a partition between brokers
        lab.cut(f"n{old}", f"n{other}")

    def replaced() -> pb.PartitionMeta | None:
        views = [meta(cluster, i) for i in others]
        settled = len({(m.leader_id, m.leader_epoch) for m in views}) == 1 and old not in views[0].isr
        new_leader = views[0].leader_id
        return views[0] if settled and new_leader >= 0 and new_leader != old else None
    new = wait_until(replaced, timeout=45, message=f"broker {old} replaced by a leader in a newer epoch")
    new_epoch = new.leader_epoch
    assert new_epoch > old_epoch
    healthy = ",".join(cluster.address(i) for i in others)
    with Producer(healthy, acks="all") as producer:  # acknowledged by the new leader only
        last = max(producer.send(TOPIC, b"after-%d" % n, partition=0).result(timeout=30)[1] for n in range(30))
    acked_end = last + 1
    assert acked_end >= 50

    # the zombie still believes it leads in the old epoch, and its "latest" is behind
    zombie = meta(cluster, old)
    assert (zombie.leader_id, zombie.leader_epoch) == (old, old_epoch), "not a zombie: its image moved on"
    stale = list_latest(cluster, old, -1)
    assert stale.error.code == 0 and stale.offset < acked_end and stale.leader_epoch == old_epoch

    # brokers check the client's leader epoch: at the zombie the new epoch is unknown ...
    assert list_latest(cluster, old, new_epoch).error.code == ErrorCode.UNKNOWN_LEADER_EPOCH
    assert fetch(cluster, old, new_epoch).error.code == ErrorCode.UNKNOWN_LEADER_EPOCH
    assert fetch(cluster, old, old_epoch).error.code == 0
    # ... and at the new leader an older epoch is fenced, a newer one unknown, -1 and its own accepted
    leader = new.leader_id
    for check in (list_latest, fetch):
        assert check(cluster, leader, old_epoch).error.code == ErrorCode.FENCED_LEADER_EPOCH, check.__name__
        assert check(cluster, leader, new_epoch + 1).error.code == ErrorCode.UNKNOWN_LEADER_EPOCH, check.__name__
        assert check(cluster, leader, new_epoch).error.code == 0, check.__name__
        assert check(cluster, leader, -1).error.code == 0, check.__name__
    assert list_latest(cluster, leader, new_epoch).offset >= acked_end

    # a client that has seen the new epoch: every refresh goes round all three brokers
    # (the zombie among them), and "latest" never goes back
    with Admin(healthy + "," + cluster.address(old), request_timeout_ms=1000) as admin:
        for _ in range(6):
            assert admin.list_offsets(TOPIC, "latest")[0] >= acked_end
        seen = admin._cluster  # noqa: SLF001 - what the client believes
        assert seen.known_leader_epoch(TOPIC, 0) == new_epoch
        with Consumer(healthy, auto_offset_reset="earliest") as consumer:
            consumer.assign([(TOPIC, 0)])
            values: list[bytes] = []

            def read_all() -> bool:
                values.extend(r.value for r in consumer.poll(0.5))
                return len(values) >= acked_end
            wait_until(read_all, timeout=30, message=f"the consumer reads the {acked_end} acknowledged records")
            assert values[19:21] == [b"before-19", b"after-0"]

            # now the zombie is the only broker these clients reach: its image is older than
            # what they know, so they refuse it rather than answer with its offsets
            for other in others:
                lab.cut("gateway", f"n{other}")
            with pytest.raises(SparkLogError) as refused:
                admin.list_offsets(TOPIC, "latest")
            assert refused.value.retriable, refused.value
            assert seen.stale_answers >= 1
            assert seen.leader(TOPIC, 0, refresh=True) == (cluster.address(leader), new_epoch)
