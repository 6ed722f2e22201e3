"""QuorumController: reassignment completes on the AlterPartition that fills the target's ISR;
on-demand preferred-leader election (driven through the single-voter LocalRaft)."""
from __future__ import annotations

import itertools

import pytest

from brokers.controller.controller import QuorumController
from brokers.metadata.records import PartitionChangeRecord
from spark_log.clock import ManualClock
from spark_log.errors import InvalidRequestError, UnknownTopicOrPartitionError

from .local_raft import LocalRaft


@pytest.fixture
def controller() -> QuorumController:
    ids = (f"topic-{i}" for i in itertools.count())
    c = QuorumController(node_id=1, clock=ManualClock(), session_timeout_ms=1000, id_factory=lambda: next(ids))
    LocalRaft(c).win_leadership()
    for b in range(1, 5):
        c.register_broker(broker_id=b, incarnation=f"i{b}", address=f"127.0.0.1:{9100 + b}")
    return c


def expand(c: QuorumController, isr: tuple[int, ...]) -> None:
    info = c.image.partition("a", 0)
    assert info is not None and info.leader is not None
    c.alter_partition(broker_id=info.leader, broker_epoch=1, topic="a", partition=0, leader_epoch=info.leader_epoch,
                      partition_epoch=info.partition_epoch, new_isr=isr)


def test_move_completes_when_the_leader_expands_the_isr(controller: QuorumController) -> None:
    created = controller.create_topic(name="a", partitions=1, replication_factor=3).partitions[0]
    original = created.replicas
    spare = next(b for b in range(1, 5) if b not in original)
    target = (spare,) + original[1:]
    started = controller.alter_partition_reassignment(topic="a", partition=0, target=target)
    assert started.adding_replicas == (spare,) and started.removing_replicas == (original[0],)
    assert started.leader == original[0] and started.isr == created.isr
    assert controller.complete_reassignments() == 0  # the new replica has not caught up
    expand(controller, created.isr + (spare,))
    done = controller.image.partition("a", 0)
    assert done is not None
    assert done.replicas == target and not done.reassigning and done.isr == tuple(b for b in done.isr if b in target)
    assert set(done.isr) == set(target)
    assert done.leader == target[0] and done.leader_epoch == created.leader_epoch + 1


def test_cancel_and_refusals(controller: QuorumController) -> None:
    created = controller.create_topic(name="a", partitions=1, replication_factor=2).partitions[0]
    spare = next(b for b in range(1, 5) if b not in created.replicas)
    controller.alter_partition_reassignment(topic="a", partition=0, target=(spare,))
    cancelled = controller.alter_partition_reassignment(topic="a", partition=0, target=())
    assert set(cancelled.replicas) == set(created.replicas) and not cancelled.reassigning
    assert controller.alter_partition_reassignment(topic="a", partition=0, target=()) == cancelled  # no-op
    with pytest.raises(InvalidRequestError, match="not registered"):
        controller.alter_partition_reassignment(topic="a", partition=0, target=(1, 42))
    with pytest.raises(UnknownTopicOrPartitionError):
        controller.alter_partition_reassignment(topic="a", partition=3, target=(1,))


def test_elect_leaders_on_demand(controller: QuorumController) -> None:
    created = controller.create_topic(name="a", partitions=1, replication_factor=3).partitions[0]
    preferred, other = created.replicas[0], created.replicas[1]
    (same,) = controller.elect_leaders(partitions=[("a", 0)])
    assert (same.leader, same.reason) == (preferred, None)
    # leadership went elsewhere (as after a failover) and the preferred replica left the ISR
    controller._propose([PartitionChangeRecord(topic="a", partition=0, leader=other)])
    expand(controller, tuple(b for b in created.isr if b != preferred))
    (refused,) = controller.elect_leaders()
    assert refused.leader == other and refused.reason is not None and "not in the ISR" in refused.reason
    expand(controller, created.isr)
    (moved,) = controller.elect_leaders(partitions=[("a", 0)])
    assert (moved.leader, moved.reason) == (preferred, None)
    assert controller.image.partition("a", 0).leader == preferred  # type: ignore[union-attr]
    with pytest.raises(UnknownTopicOrPartitionError):
        controller.elect_leaders(partitions=[("a", 9)])


def test_controller_loop_completes_a_move_whose_isr_grew_elsewhere(controller: QuorumController) -> None:
    """The safety net: an ISR that already holds the target (e.g. expanded under an earlier
    controller that failed before completing) is completed by ``complete_reassignments``."""
    created = controller.create_topic(name="a", partitions=1, replication_factor=2).partitions[0]
    spare = next(b for b in range(1, 5) if b not in created.replicas)
    target = (created.replicas[1], spare)
    controller.alter_partition_reassignment(topic="a", partition=0, target=target)
    controller._propose([PartitionChangeRecord(topic="a", partition=0, isr=created.isr + (spare,))])
    assert controller.image.partition("a", 0).reassigning  # type: ignore[union-attr]
    assert controller.complete_reassignments() == 1
    done = controller.image.partition("a", 0)
    assert done is not None and done.replicas == target and not done.reassigning and done.leader == target[0]
    assert controller.complete_reassignments() == 0


def test_a_new_target_replaces_the_pending_one(controller: QuorumController) -> None:
    created = controller.create_topic(name="a", partitions=1, replication_factor=2).partitions[0]
    spares = [b for b in range(1, 5) if b not in created.replicas]
    controller.alter_partition_reassignment(topic="a", partition=0, target=(spares[0], created.replicas[0]))
    replaced = controller.alter_partition_reassignment(topic="a", partition=0, target=(spares[1], created.replicas[0]))
    assert replaced.adding_replicas == (spares[1],) and replaced.removing_replicas == (created.replicas[1],)
    assert spares[0] not in replaced.replicas
    cancelled = controller.alter_partition_reassignment(topic="a", partition=0, target=())
    assert set(cancelled.replicas) == set(created.replicas) and not cancelled.reassigning
