"""Client leader epochs (KIP-320) on the data listener: LIST_OFFSETS_V2 and FETCH_V2 (the JVM
connector's requests) on the shared 3-node cluster, no network namespaces needed.

Leadership of a partition goes a -> b -> a (as ``test_client_leader_epochs.py``), so broker
a leads again in a newer leader epoch.  At a's data listener an older epoch is
``FENCED_LEADER_EPOCH`` (145), a newer one ``UNKNOWN_LEADER_EPOCH`` (146); its own and -1
are answered; LIST_OFFSETS_V2 names a's epoch; the old LIST_OFFSETS and FETCH are answered
as before (unchecked).
"""
from __future__ import annotations

import pytest

from brokers.launcher.local import LocalCluster
from spark_log import Admin, Producer
from spark_log.errors import ErrorCode
from tests.support.data_client import DataClient, describe
from tests.support.leadership import lead
from tests.support.wait import wait_until

pytestmark = [pytest.mark.integration]


def test_data_listener_checks_client_leader_epochs(cluster: LocalCluster, topic_name: str) -> None:
    bootstrap = cluster.bootstrap
    with Admin(bootstrap) as admin, Producer(bootstrap, acks="all") as producer:
        created = admin.create_topic(topic_name, partitions=1, replication_factor=2).partitions[0]
        a, b = created.replicas
        first_epoch = admin.describe_topic(topic_name, live=False).partitions[0].leader_epoch
        for n in range(5):
            producer.send(topic_name, b"v%d" % n, partition=0).result(timeout=30)

        lead(admin, topic_name, b, [b, a])
        epoch = lead(admin, topic_name, a, [a, b])
        assert epoch >= first_epoch + 2
        address = admin._cluster.broker_address(a)  # noqa: SLF001 - the broker's own gRPC address
        assert address is not None

    info = describe(address)
    tp = (topic_name, 0)
    with DataClient(info.host, info.port) as client:
        def latest(e: int) -> tuple[int, int, int]:
            return client.list_offsets_v2(-1, [(topic_name, 0, e)])[tp]

        def fetch(e: int) -> tuple[int, str, int, int, bytes]:
            return client.fetch(topic_name, 0, 0, leader_epoch=e)

        wait_until(lambda: latest(epoch)[0] == 0, timeout=10, message="a's replica takes the epoch")
        for e, code in ((first_epoch, ErrorCode.FENCED_LEADER_EPOCH), (epoch - 1, ErrorCode.FENCED_LEADER_EPOCH),
                        (epoch + 1, ErrorCode.UNKNOWN_LEADER_EPOCH)):
            assert latest(e)[0] == code, (e, latest(e))
            answer = fetch(e)
            assert answer[0] == code, (e, answer[:2])
            assert not answer[4]  # no records with a refusal
        for e in (epoch, -1):
            assert latest(e) == (0, 5, epoch)  # the replica's epoch named in the answer
            code, message, hw, next_offset, frames = fetch(e)
            assert (code, hw, next_offset) == (0, 5, 5) and frames, message
        # the old api numbers: answered as before (no epoch on the wire, none checked)
        assert client.list_offsets(-1, [tp]) == {tp: (0, 5)}
        assert client.fetch(topic_name, 0, 0)[:4:2] == (0, 5)
