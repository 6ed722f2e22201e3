"""Three real node processes (broker + controller voters) on 127.0.0.1.

One cluster for the module (starting processes is the slow part); the tests run in file
order and the last ones kill, stop and restart nodes, leaving the cluster whole again.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

import grpc
import pytest

from brokers.controller.client import ControllerClient
from spark_log import errors
from spark_log.proto import controller_pb2 as pb
from spark_log.proto import controller_pb2_grpc as pb_grpc
from tests.support.node_cluster import NodeCluster
from tests.support.wait import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeCluster]:
    root: Path = tmp_path_factory.mktemp("quorum")
    with NodeCluster(root, size=3) as nodes:
        nodes.start_all()
        yield nodes


def all_registered(cluster: NodeCluster) -> bool:
    image = cluster.image(cluster.wait_for_active_controller())
    return sorted(b.broker_id for b in image.live_brokers()) == cluster.ids


def _topic(cluster: NodeCluster, name: str, partitions: int = 1) -> None:
    """``name`` exists (created here unless an earlier run of the module made it) and every
    voter's image has it."""
    if name not in cluster.image(cluster.wait_for_active_controller()).topics:
        cluster.client.create_topic(name, partitions=partitions, replication_factor=3)
    cluster.wait_for_images(lambda image: name in image.topics)


def test_one_active_controller_and_every_broker_registered(cluster: NodeCluster) -> None:
    leader = cluster.wait_for_active_controller()
    views = {i: cluster.client.describe_cluster(cluster.addresses[i]) for i in cluster.ids}
    assert [i for i, v in views.items() if v.is_active] == [leader]
    wait_until(lambda: all_registered(cluster), timeout=20, message="brokers did not all register")
    image = cluster.image(leader)
    assert {b.address for b in image.brokers.values()} == set(cluster.addresses.values())


def test_created_topics_reach_every_voter(cluster: NodeCluster) -> None:
    wait_until(lambda: all_registered(cluster), timeout=20, message="brokers did not all register")
    topic = cluster.client.create_topic("orders", partitions=6, replication_factor=3, config={"retention.ms": 60000})
    assert sorted(p.leader for p in topic.partitions.values()) == [1, 1, 2, 2, 3, 3]
    cluster.wait_for_images(lambda image: "orders" in image.topics)
    # one read of every image at one offset (a record landing between reads is no disagreement)
    images = wait_until(lambda: (lambda s: s if len({i.offset for i in s.values()}) == 1 else None)(cluster.images()),
                        timeout=20, message="voters did not converge on one metadata offset")
    reference = images[cluster.ids[0]].topics["orders"]
    assert reference.partitions == topic.partitions and reference.config.retention_ms == 60000
    assert all(image.topics["orders"] == reference for image in images.values())


def test_followers_redirect_to_the_active_controller(cluster: NodeCluster) -> None:
    leader = cluster.wait_for_active_controller()
    follower = next(i for i in cluster.ids if i != leader)
    with grpc.insecure_channel(cluster.addresses[follower]) as channel:
        stub = pb_grpc.ControllerServiceStub(channel)
        with pytest.raises(grpc.RpcError) as info:
            stub.CreateTopic(pb.CreateTopicRequest(name="direct", partitions=1, replication_factor=1), timeout=5)
    error = errors.from_rpc_error(info.value)
    assert isinstance(error, errors.NotControllerError)
    assert error.leader_address == cluster.addresses[leader]
    with ControllerClient([cluster.addresses[follower]]) as client:
        client.create_topic("via-follower")
        assert client.leader_hint == cluster.addresses[leader]


def test_refusals_are_typed_and_change_nothing(cluster: NodeCluster) -> None:
    # its own preconditions: xdist's worksteal can run it on a worker where the tests above did not run
    wait_until(lambda: all_registered(cluster), timeout=20, message="brokers did not all register")
    _topic(cluster, "refusals-existing")
    before = cluster.image(cluster.wait_for_active_controller()).topics
    with pytest.raises(errors.InvalidReplicationFactorError, match="3 live"):
        cluster.client.create_topic("too-wide", replication_factor=4)
    with pytest.raises(errors.InvalidTopicError):
        cluster.client.create_topic("..")
    with pytest.raises(errors.InvalidConfigError):
        cluster.client.create_topic("bad-config", config={"retention.ms": "soon"})
    with pytest.raises(errors.TopicAlreadyExistsError):
        cluster.client.create_topic("refusals-existing")
    with pytest.raises(errors.UnknownTopicOrPartitionError):
        cluster.client.delete_topic("missing")
    assert cluster.image(cluster.wait_for_active_controller()).topics.keys() == before.keys()


def test_killed_broker_is_fenced_and_returns_with_a_new_incarnation(cluster: NodeCluster) -> None:
    wait_until(lambda: all_registered(cluster), timeout=20, message="brokers did not all register")
    _topic(cluster, "fenced-leaders", partitions=6)  # leaders on every broker, whatever ran before
    leader = cluster.wait_for_active_controller()
    victim = next(i for i in cluster.ids if i != leader)
    old = cluster.image(leader).brokers[victim]
    led = [p for _, p, _ in cluster.image(leader).partitions_led_by(victim)]
    assert led, "placement gave every broker some leaders"
    cluster.kill(victim)

    def fenced_and_moved() -> bool:
        image = cluster.image(cluster.wait_for_active_controller())
        return image.brokers[victim].fenced and not image.partitions_led_by(victim)

    wait_until(fenced_and_moved, timeout=20, message=f"broker {victim} was not fenced")
    image = cluster.image(cluster.wait_for_active_controller())
    assert all(victim not in info.isr for _, _, info in image.iter_partitions() if len(info.isr) > 1)
    cluster.start(victim)

    def back() -> bool:
        info = cluster.image(cluster.wait_for_active_controller()).brokers[victim]
        return not info.fenced and info.incarnation != old.incarnation

    wait_until(back, timeout=20, message=f"broker {victim} did not come back")
    assert cluster.image(cluster.wait_for_active_controller()).brokers[victim].broker_epoch == old.broker_epoch + 1


def test_sigterm_stops_a_node_cleanly(cluster: NodeCluster) -> None:
    wait_until(lambda: all_registered(cluster), timeout=20, message="brokers did not all register")
    cluster.client.create_topic("before-sigterm", partitions=1, replication_factor=3)  # its own: runs alone too
    cluster.wait_for_images(lambda image: "before-sigterm" in image.topics)
    victim = cluster.ids[-1]
    assert cluster.terminate(victim) == 0
    assert not (cluster.data_dir(victim) / "broker.port").exists()
    cluster.start(victim)
    cluster.wait_for_images(lambda image: "before-sigterm" in image.topics)


def test_a_broker_only_observer_follows_the_metadata_log(cluster: NodeCluster) -> None:
    observer = 9
    cluster.add_observer(observer)
    cluster.start(observer)
    try:
        def registered() -> bool:
            info = cluster.image(cluster.wait_for_active_controller()).brokers.get(observer)
            return info is not None and not info.fenced and info.address == cluster.addresses[observer]

        wait_until(registered, timeout=20, message="the observer did not register as a broker")
        cluster.client.create_topic("seen-by-observer", partitions=4, replication_factor=3)
        # the observer serves no ControllerService; its image shows through the broker it hosts
        wait_until(
            lambda: any(observer in info.replicas
                        for _, _, info in cluster.image(cluster.wait_for_active_controller()).iter_partitions()),
            timeout=20,
            message="no replica was placed on the observer broker",
        )
    finally:
        assert cluster.terminate(observer) == 0
