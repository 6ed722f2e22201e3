"""ControllerService + ControllerClient over real gRPC on 127.0.0.1 (LocalRaft inside).

Two in-process servers: a leader and a non-leader that points at it, so the client's
NOT_CONTROLLER following and typed errors are exercised end to end.
"""
from __future__ import annotations

from concurrent import futures
from typing import Iterator

import grpc
import pyarrow as pa
import pytest

from brokers.controller.client import ControllerClient
from brokers.controller.controller import QuorumController
from brokers.controller.service import add_to_server
from spark_log.errors import (
    BrokerNotAvailableError,
    FencedEpochError,
    InvalidTopicError,
    NotControllerError,
    SchemaMismatchError,
    TopicAlreadyExistsError,
)
from tests.support.ports import free_ports

from .local_raft import LocalRaft


@pytest.fixture
def cluster() -> Iterator[tuple[str, str, QuorumController]]:
    leader_port, follower_port = free_ports(2)
    leader_address, follower_address = f"127.0.0.1:{leader_port}", f"127.0.0.1:{follower_port}"
    leader = QuorumController(node_id=1)
    LocalRaft(leader, address=leader_address).win_leadership()
    follower = QuorumController(node_id=2)
    LocalRaft(follower).lose_leadership(leader_address)
    servers = []
    for controller, port in ((leader, leader_port), (follower, follower_port)):
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        add_to_server(controller, server)
        server.add_insecure_port(f"127.0.0.1:{port}")
        server.start()
        servers.append(server)
    try:
        yield leader_address, follower_address, leader
    finally:
        for server in servers:
            server.stop(None)


def test_client_follows_the_hint(cluster: tuple[str, str, QuorumController]) -> None:
    leader_address, follower_address, leader = cluster
    with ControllerClient([follower_address]) as client:
        epoch = client.register_broker(broker_id=0, incarnation="a", address="127.0.0.1:7000")
        assert epoch == 1 and client.leader_hint == leader_address
        assert client.heartbeat(broker_id=0, broker_epoch=epoch).fenced is False
        topic = client.create_topic("t", partitions=2, config={"retention.ms": 60000})
        assert topic.config.retention_ms == 60000 and len(topic.partitions) == 2
        assert topic.partitions[0].leader == 0
        image = client.describe_image(leader_address)
        assert image.topics["t"].topic_id == topic.topic_id
        view = client.describe_cluster(follower_address)
        assert view.controller_address == leader_address and not view.is_active
        assert client.describe_cluster(leader_address).is_active
        typed = client.create_topic("typed", schema=pa.schema([("a", pa.int64())]))
        assert typed.schema == pa.schema([("a", pa.int64())])
        assert client.register_schema("typed", pa.schema([("a", pa.int64()), ("b", pa.string())])) == 1
        configs = client.alter_configs("t", set={"cleanup.policy": "compact"})
        assert configs["cleanup.policy"] == "compact"
        p = topic.partitions[0]
        new = client.alter_partition(
            broker_id=0, broker_epoch=1, topic="t", partition=0, leader_epoch=0, partition_epoch=0, new_isr=p.isr
        )
        assert new == p
        client.delete_topic("t")
        assert "t" not in leader.image.topics


def test_typed_errors_cross_the_wire(cluster: tuple[str, str, QuorumController]) -> None:
    leader_address, _, _ = cluster
    with ControllerClient([leader_address]) as client:
        client.register_broker(broker_id=0, incarnation="a", address="127.0.0.1:7000")
        client.create_topic("t")
        with pytest.raises(TopicAlreadyExistsError):
            client.create_topic("t")
        with pytest.raises(InvalidTopicError, match="illegal"):
            client.create_topic("no spaces")
        with pytest.raises(FencedEpochError):
            client.heartbeat(broker_id=0, broker_epoch=5)
        with pytest.raises(SchemaMismatchError):
            client.register_schema("t", pa.schema([("a", pa.int64())]))


def test_no_leader_anywhere_times_out_with_not_controller(cluster: tuple[str, str, QuorumController]) -> None:
    _, follower_address, _ = cluster
    leader_hint_less = QuorumController(node_id=3)
    LocalRaft(leader_hint_less).lose_leadership(None)
    (port,) = free_ports(1)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    add_to_server(leader_hint_less, server)
    server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    try:
        with ControllerClient([f"127.0.0.1:{port}"], timeout_s=0.3) as client:
            with pytest.raises(NotControllerError):
                client.create_topic("t")
    finally:
        server.stop(None)


def test_unreachable_voters() -> None:
    (port,) = free_ports(1)
    with ControllerClient([f"127.0.0.1:{port}"], timeout_s=0.3) as client:
        with pytest.raises(BrokerNotAvailableError):
            client.create_topic("t")
