"""QuorumController driven directly through a single-voter LocalRaft (no real Raft)."""
from __future__ import annotations

import itertools
import threading

import pyarrow as pa
import pytest

from brokers.controller.controller import QuorumController
from brokers.metadata.alter_isr import AlterIsr
from brokers.metadata import records as r
from spark_log.clock import ManualClock
from spark_log.errors import (
    FencedEpochError,
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    InvalidRequestError,
    InvalidSchemaError,
    InvalidTopicError,
    NotControllerError,
    SchemaMismatchError,
    ThrottledError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)

from tests.support.wait import wait_until

from .local_raft import LocalRaft


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def controller(clock: ManualClock) -> QuorumController:
    ids = (f"topic-{i}" for i in itertools.count())
    c = QuorumController(node_id=1, clock=clock, session_timeout_ms=1000, id_factory=lambda: next(ids))
    raft = LocalRaft(c)
    raft.win_leadership()
    for b in range(3):
        c.register_broker(broker_id=b, incarnation=f"i{b}", address=f"127.0.0.1:{9100 + b}", rack=f"r{b % 2}")
    return c


def records_of(c: QuorumController) -> list[r.MetadataRecord]:
    raft = c._raft
    assert isinstance(raft, LocalRaft)
    return [r.decode(p) for batch in raft.proposals for p in batch]


def test_not_leader_points_at_the_leader() -> None:
    c = QuorumController(node_id=1)
    raft = LocalRaft(c)
    raft.lose_leadership("127.0.0.1:9555")
    with pytest.raises(NotControllerError) as info:
        c.create_topic(name="a")
    assert info.value.leader_address == "127.0.0.1:9555"
    raft.lose_leadership(None)
    with pytest.raises(NotControllerError) as info:
        c.register_broker(broker_id=1, incarnation="x", address="127.0.0.1:1")
    assert info.value.leader_address is None and "no controller" in info.value.message


def test_new_leader_commits_a_noop_before_serving(controller: QuorumController) -> None:
    assert isinstance(records_of(controller)[0], r.NoOpRecord)
    raft = controller._raft
    assert isinstance(raft, LocalRaft)
    raft.lose_leadership()
    raft.activate = False
    raft.win_leadership()
    assert not controller.is_active
    with pytest.raises(NotControllerError, match="catching up") as info:
        controller.create_topic(name="a")
    assert info.value.leader_address == raft.address
    with pytest.raises(NotControllerError, match="catching up"):
        controller.heartbeat(broker_id=0, broker_epoch=1)
    before = len(raft.proposals)
    assert controller.activate() and controller.is_active
    assert [type(r.decode(p)) for p in raft.proposals[before]] == [r.NoOpRecord]
    controller.create_topic(name="a")


def test_busy_controller_throttles(controller: QuorumController) -> None:
    controller._busy_timeout_s = 0.01
    held, done = threading.Event(), threading.Event()

    def hold() -> None:
        with controller._lock:
            held.set()
            done.wait(5)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        wait_until(held.is_set, timeout=5, message="lock holder did not start")
        with pytest.raises(ThrottledError):
            controller.create_topic(name="a")
        assert controller.heartbeat(broker_id=0, broker_epoch=1).fenced is False  # the fast path needs no lock
    finally:
        done.set()
        holder.join()


def test_registration_and_incarnations(controller: QuorumController) -> None:
    assert controller.register_broker(broker_id=0, incarnation="i0", address="127.0.0.1:9100", rack="r0") == 1
    controller.create_topic(name="a", partitions=3, replication_factor=3)
    led_by_0 = [p for _, p, _ in controller.image.partitions_led_by(0)]
    assert led_by_0
    assert controller.register_broker(broker_id=0, incarnation="new", address="127.0.0.1:9100") == 2
    info = controller.image.brokers[0]
    assert (info.incarnation, info.broker_epoch, info.fenced) == ("new", 2, False)
    for index in led_by_0:
        part = controller.image.topics["a"].partitions[index]
        assert part.leader != 0 and 0 not in part.isr
    with pytest.raises(InvalidRequestError):
        controller.register_broker(broker_id=0, incarnation="new", address="127.0.0.1:1")
    with pytest.raises(InvalidRequestError):
        controller.register_broker(broker_id=5, incarnation="z", address="nohostport")


def test_heartbeats_fencing_and_unfencing(controller: QuorumController, clock: ManualClock) -> None:
    controller.create_topic(name="a", partitions=3, replication_factor=2)
    clock.advance(600)
    controller.heartbeat(broker_id=0, broker_epoch=1)
    controller.heartbeat(broker_id=1, broker_epoch=1)
    assert controller.check_leases() == []
    clock.advance(600)
    assert controller.check_leases() == [2]
    image = controller.image
    assert image.brokers[2].fenced
    assert all(p.leader != 2 and 2 not in p.isr for _, _, p in image.iter_partitions())
    result = controller.heartbeat(broker_id=2, broker_epoch=1)
    assert result.fenced is False and not controller.image.brokers[2].fenced
    with pytest.raises(FencedEpochError):
        controller.heartbeat(broker_id=2, broker_epoch=0)
    with pytest.raises(FencedEpochError):
        controller.heartbeat(broker_id=42, broker_epoch=1)


def test_new_controller_grants_fresh_leases(controller: QuorumController, clock: ManualClock) -> None:
    clock.advance(5000)
    raft = controller._raft
    assert isinstance(raft, LocalRaft)
    raft.lose_leadership()
    raft.win_leadership()
    assert controller.check_leases() == []


def test_offline_partition_returns_with_its_broker(controller: QuorumController, clock: ManualClock) -> None:
    controller.create_topic(name="solo", partitions=1, replication_factor=1)
    owner = controller.image.topics["solo"].partitions[0].leader
    assert owner is not None
    clock.advance(1500)
    others = [b for b in range(3) if b != owner]
    for b in others:
        controller.heartbeat(broker_id=b, broker_epoch=1)
    assert controller.check_leases() == [owner]
    assert controller.image.topics["solo"].partitions[0].leader is None
    controller.heartbeat(broker_id=owner, broker_epoch=1)
    part = controller.image.topics["solo"].partitions[0]
    assert part.leader == owner and part.leader_epoch == 2


def test_create_topic(controller: QuorumController) -> None:
    topic = controller.create_topic(name="clicks", partitions=6, replication_factor=3, config={"retention.ms": "1000"})
    assert topic.topic_id == "topic-0" and topic.kind == "bytes" and topic.config.retention_ms == 1000
    assert sorted(p.leader for p in topic.partitions.values()) == [0, 0, 1, 1, 2, 2]
    assert all(p.isr == p.replicas and p.leader == p.replicas[0] for p in topic.partitions.values())
    typed = controller.create_topic(
        name="typed", schema=pa.schema([("id", pa.int64()), ("v", pa.string())]), key_columns=["id"]
    )
    assert typed.kind == "typed" and typed.key_columns == ("id",) and typed.schema_id == 0


@pytest.mark.parametrize(
    ("kwargs", "error", "text"),
    [
        ({"name": ""}, InvalidTopicError, "empty"),
        ({"name": "."}, InvalidTopicError, "cannot be"),
        ({"name": ".."}, InvalidTopicError, "cannot be"),
        ({"name": "a" * 250}, InvalidTopicError, "249"),
        ({"name": "bad name"}, InvalidTopicError, "illegal"),
        ({"name": "ünï"}, InvalidTopicError, "illegal"),
        ({"name": "taken"}, TopicAlreadyExistsError, "already exists"),
        ({"name": "tak.en"}, InvalidTopicError, "collides"),
        ({"name": "x", "partitions": 0}, InvalidPartitionsError, "at least 1"),
        ({"name": "x", "partitions": 10_001}, InvalidPartitionsError, "limit"),
        ({"name": "x", "replication_factor": 0}, InvalidReplicationFactorError, "at least 1"),
        ({"name": "x", "replication_factor": 4}, InvalidReplicationFactorError, "3 live"),
        ({"name": "x", "config": {"retention.mss": "1"}}, InvalidConfigError, "unknown config key"),
        ({"name": "x", "config": {"retention.ms": "soon"}}, InvalidConfigError, "integer"),
        ({"name": "x", "key_columns": ["k"]}, InvalidRequestError, "typed topic"),
        ({"name": "x", "schema": pa.schema([("offset", pa.int64())])}, InvalidSchemaError, "reserved"),
        ({"name": "x", "schema": pa.schema([("a", pa.int64())]), "key_columns": ["b"]}, InvalidSchemaError, "key"),
    ],
)
def test_create_topic_refusals(controller: QuorumController, kwargs: dict, error: type, text: str) -> None:  # type: ignore[type-arg]
    controller.create_topic(name="tak_en" if kwargs["name"] == "tak.en" else "taken")
    before = controller.image
    with pytest.raises(error, match=text):
        controller.create_topic(**kwargs)
    assert controller.image.topics == before.topics


def test_replication_factor_counts_only_live_brokers(controller: QuorumController, clock: ManualClock) -> None:
    clock.advance(1500)
    controller.heartbeat(broker_id=0, broker_epoch=1)
    controller.heartbeat(broker_id=1, broker_epoch=1)
    controller.check_leases()
    with pytest.raises(InvalidReplicationFactorError, match="2 live"):
        controller.create_topic(name="x", replication_factor=3)
    topic = controller.create_topic(name="x", partitions=4, replication_factor=2)
    assert all(2 not in p.replicas for p in topic.partitions.values())


def test_delete_topic(controller: QuorumController) -> None:
    controller.create_topic(name="a")
    controller.delete_topic(name="a")
    assert "a" not in controller.image.topics
    with pytest.raises(UnknownTopicOrPartitionError):
        controller.delete_topic(name="a")


def test_alter_partition(controller: QuorumController) -> None:
    topic = controller.create_topic(name="a", partitions=1, replication_factor=3)
    p = topic.partitions[0]
    leader = p.leader
    assert leader is not None
    follower = p.replicas[1]
    shrunk = tuple(b for b in p.isr if b != follower)
    kwargs = dict(broker_id=leader, broker_epoch=1, topic="a", partition=0, leader_epoch=0)
    new = controller.alter_partition(**kwargs, partition_epoch=0, new_isr=shrunk)  # type: ignore[arg-type]
    assert new.isr == shrunk and new.partition_epoch == 1 and new.leader_epoch == 0
    with pytest.raises(FencedEpochError, match="partition epoch"):
        controller.alter_partition(**kwargs, partition_epoch=0, new_isr=p.isr)  # type: ignore[arg-type]
    with pytest.raises(FencedEpochError, match="leader epoch"):
        controller.alter_partition(**{**kwargs, "leader_epoch": 7}, partition_epoch=1, new_isr=p.isr)  # type: ignore[arg-type]
    with pytest.raises(FencedEpochError, match="not the leader"):
        controller.alter_partition(**{**kwargs, "broker_id": follower}, partition_epoch=1, new_isr=p.isr)  # type: ignore[arg-type]
    with pytest.raises(FencedEpochError, match="current registration"):
        controller.alter_partition(**{**kwargs, "broker_epoch": 9}, partition_epoch=1, new_isr=p.isr)  # type: ignore[arg-type]
    with pytest.raises(UnknownTopicOrPartitionError):
        controller.alter_partition(**{**kwargs, "partition": 3}, partition_epoch=1, new_isr=p.isr)  # type: ignore[arg-type]
    for bad in [(), (leader, leader), (follower,), (leader, 77)]:
        with pytest.raises(InvalidRequestError):
            controller.alter_partition(**kwargs, partition_epoch=1, new_isr=bad)  # type: ignore[arg-type]
    back = controller.alter_partition(**kwargs, partition_epoch=1, new_isr=p.isr)  # type: ignore[arg-type]
    assert back.isr == p.isr and back.partition_epoch == 2


def test_alter_partitions_validates_each_item_and_commits_the_accepted_in_one_proposal(
        controller: QuorumController) -> None:
    topic = controller.create_topic(name="a", partitions=4, replication_factor=3)
    raft = controller._raft
    assert isinstance(raft, LocalRaft)

    def shrink(index: int, **override: object) -> AlterIsr:
        p = topic.partitions[index]
        assert p.leader is not None
        fields: dict[str, object] = dict(broker_id=p.leader, broker_epoch=1, topic="a", partition=index,
                                         leader_epoch=p.leader_epoch, partition_epoch=p.partition_epoch,
                                         new_isr=tuple(b for b in p.isr if b != p.replicas[1]))
        fields.update(override)
        return AlterIsr(**fields)  # type: ignore[arg-type]

    before = len(raft.proposals)
    outcomes = controller.alter_partitions([
        shrink(0), shrink(1, partition_epoch=9), shrink(2, new_isr=()), shrink(3), shrink(3),
        shrink(0, partition=7)])
    assert len(raft.proposals) == before + 1, "the accepted changes must commit in one proposal"
    assert [type(o).__name__ for o in outcomes] == [
        "PartitionInfo", "FencedEpochError", "InvalidRequestError", "PartitionInfo", "InvalidRequestError",
        "UnknownTopicOrPartitionError"]
    image = controller.image.topics["a"].partitions
    for index in (0, 3):
        assert image[index].isr == shrink(index).new_isr and image[index].partition_epoch == 1
        assert outcomes[index if index == 0 else 3] == image[index]
    for index in (1, 2):  # refused items change nothing
        assert image[index] == topic.partitions[index]


def test_alter_configs(controller: QuorumController) -> None:
    controller.create_topic(name="a", config={"retention.ms": "5000"})
    config = controller.alter_configs(topic="a", set={"cleanup.policy": "compact"})
    assert config.cleanup_policy == "compact" and config.retention_ms == 5000
    config = controller.alter_configs(topic="a", delete=["retention.ms"])
    assert config.retention_ms == controller.topic_defaults.retention_ms
    assert controller.image.topics["a"].config == config
    with pytest.raises(InvalidConfigError):
        controller.alter_configs(topic="a", set={"min.insync.replicas": "0"})
    with pytest.raises(InvalidConfigError):
        controller.alter_configs(topic="a", delete=["nope"])
    with pytest.raises(UnknownTopicOrPartitionError):
        controller.alter_configs(topic="zz", set={"retention.ms": "1"})


def test_register_schema(controller: QuorumController) -> None:
    v0 = pa.schema([pa.field("id", pa.int64(), nullable=False)])
    controller.create_topic(name="t", schema=v0, key_columns=["id"])
    v1 = v0.append(pa.field("note", pa.string()))
    assert controller.register_schema(topic="t", schema=v1) == 1
    assert controller.register_schema(topic="t", schema=v1) == 1
    assert controller.image.topics["t"].schema_by_id(0) == v0
    with pytest.raises(SchemaMismatchError):
        controller.register_schema(topic="t", schema=pa.schema([("id", pa.string())]))
    with pytest.raises(SchemaMismatchError):
        controller.register_schema(topic="t", schema=v1.append(pa.field("req", pa.int8(), nullable=False)))
    controller.create_topic(name="b")
    with pytest.raises(SchemaMismatchError, match="bytes topic"):
        controller.register_schema(topic="b", schema=v0)
    with pytest.raises(UnknownTopicOrPartitionError):
        controller.register_schema(topic="zz", schema=v0)


def test_state_machine_snapshot_restores_on_another_voter(controller: QuorumController) -> None:
    controller.create_topic(name="a", partitions=2, replication_factor=2)
    other = QuorumController(node_id=2)
    other.restore(controller.image.offset + 1, controller.snapshot())
    assert other.image == controller.image


def test_a_silent_broker_whose_listener_refuses_is_fenced_before_its_session_timeout(clock: ManualClock) -> None:
    """Issue 19 (failover under 1 s): a broker silent for ``probe_after_ms`` is probed; only
    a refused connection (its process is gone) fences it before the session timeout; a
    broker whose listener accepts (busy, stopped) or that heartbeats again keeps its lease."""
    probed: list[str] = []
    dead = {"127.0.0.1:9101"}

    def probe(address: str) -> bool:
        probed.append(address)
        return address in dead

    ids = (f"topic-{i}" for i in itertools.count())
    c = QuorumController(node_id=1, clock=clock, session_timeout_ms=6000, id_factory=lambda: next(ids),
                         probe_after_ms=1000, probe=probe)
    LocalRaft(c).win_leadership()
    for b in range(3):
        c.register_broker(broker_id=b, incarnation=f"i{b}", address=f"127.0.0.1:{9100 + b}")
    c.create_topic(name="a", partitions=3, replication_factor=3)
    clock.advance(900)
    assert c.fence_dead_brokers() == [] and probed == []        # nobody silent long enough
    clock.advance(200)
    c.heartbeat(broker_id=2, broker_epoch=1)                     # broker 2 is alive
    assert c.fence_dead_brokers() == [1]
    assert sorted(probed) == ["127.0.0.1:9100", "127.0.0.1:9101"]
    assert [b.broker_id for b in c.image.live_brokers()] == [0, 2]  # 0 accepts connections: kept
    assert all(p.leader != 1 and 1 not in p.isr for p in c.image.topics["a"].partitions.values())
    assert c.check_leases() == []                                # the session timeout has not passed


def test_listener_refused_tells_a_closed_port_from_an_open_one() -> None:
    import socket

    from brokers.controller.controller import listener_refused

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    address = f"127.0.0.1:{server.getsockname()[1]}"
    try:
        assert not listener_refused(address)
    finally:
        server.close()
    assert listener_refused(address)
