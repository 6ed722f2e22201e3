"""Client leader epochs (KIP-320) on the shared 3-node cluster, no network namespaces needed.

Leadership of a partition goes a -> b -> a (reassigning the replica order, then a
preferred-leader election each time), so broker a leads again in a newer leader epoch.
At a: ListOffsets and consumer fetches naming an older epoch are ``FENCED_LEADER_EPOCH``,
a newer one ``UNKNOWN_LEADER_EPOCH``, its own and -1 are answered.  A consumer and an
Admin that cached the first epoch (leader a) meet the fencing on their next request and
go on after a metadata refresh: the consumer reads every record, "latest" is the end.
"""
from __future__ import annotations

import grpc
import pytest

from brokers.launcher.local import LocalCluster
from spark_log import Admin, Consumer, Producer
from spark_log.errors import ErrorCode
from spark_log.proto import broker_pb2 as pb
from spark_log.proto import broker_pb2_grpc as rpc
from tests.support.leadership import lead
from tests.support.wait import wait_until

pytestmark = [pytest.mark.integration]


def _stub(address: str) -> tuple[grpc.Channel, rpc.BrokerStub]:
    channel = grpc.insecure_channel(address)
    return channel, rpc.BrokerStub(channel)


def test_brokers_check_client_leader_epochs_and_clients_recover(cluster: LocalCluster, topic_name: str) -> None:
    bootstrap = cluster.bootstrap
    with Admin(bootstrap) as admin, Producer(bootstrap, acks="all") as producer, \
            Consumer(bootstrap, auto_offset_reset="earliest") as consumer:
        created = admin.create_topic(topic_name, partitions=1, replication_factor=2).partitions[0]
        a, b = created.replicas
        first_epoch = admin.describe_topic(topic_name, live=False).partitions[0].leader_epoch
        for n in range(5):
            producer.send(topic_name, b"v%d" % n, partition=0).result(timeout=30)
        consumer.assign([(topic_name, 0)])
        values: list[bytes] = []
        wait_until(lambda: values.extend(r.value for r in consumer.poll(0.5)) or len(values) >= 5, timeout=30,
                   message="first records")
        assert consumer._cluster.leader(topic_name, 0)[1] == first_epoch  # noqa: SLF001 - cached, leader a

        lead(admin, topic_name, b, [b, a])
        epoch = lead(admin, topic_name, a, [a, b])
        assert epoch >= first_epoch + 2

        address = admin._cluster.broker_address(a)  # noqa: SLF001 - the broker's own address
        assert address is not None
        channel, stub = _stub(address)
        with channel:
            def list_latest(e: int) -> pb.ListOffsetsPartitionResult:
                return stub.ListOffsets(pb.ListOffsetsRequest(replica_id=-1, partitions=[pb.ListOffsetsPartition(
                    topic=topic_name, partition=0, timestamp=-1, current_leader_epoch=e)]), timeout=10).partitions[0]

            def fetch(e: int) -> pb.FetchPartitionResult:
                return stub.Fetch(pb.FetchRequest(replica_id=-1, max_wait_ms=0, partitions=[pb.FetchPartition(
                    topic=topic_name, partition=0, fetch_offset=0, current_leader_epoch=e)]), timeout=10).partitions[0]

            wait_until(lambda: list_latest(epoch).error.code == 0, timeout=10, message="a's replica takes the epoch")
            for check in (list_latest, fetch):
                assert check(first_epoch).error.code == ErrorCode.FENCED_LEADER_EPOCH, check.__name__
                assert check(epoch - 1).error.code == ErrorCode.FENCED_LEADER_EPOCH, check.__name__
                assert check(epoch + 1).error.code == ErrorCode.UNKNOWN_LEADER_EPOCH, check.__name__
                assert check(epoch).error.code == 0, check.__name__
                assert check(-1).error.code == 0, check.__name__
            assert list_latest(epoch).leader_epoch == epoch
            assert fetch(epoch).records  # the answer holds the frames

        for n in range(5, 10):
            producer.send(topic_name, b"v%d" % n, partition=0).result(timeout=30)
        # the consumer still holds leader a in the first epoch: fenced once, then it refreshes
        wait_until(lambda: values.extend(r.value for r in consumer.poll(0.5)) or len(values) >= 10, timeout=30,
                   message=lambda: f"the consumer goes on after the fencing; read {values}")
        assert values == [b"v%d" % n for n in range(10)]
        assert consumer._cluster.leader(topic_name, 0)[1] == epoch  # noqa: SLF001
        assert admin.list_offsets(topic_name, "latest") == {0: 10}
