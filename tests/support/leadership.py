"""Moving a partition's leadership on purpose (tests): a reassignment that puts ``broker``
first, then a preferred-leader election, waited for until ``broker`` leads with a full ISR."""
from __future__ import annotations

from spark_log import Admin
from tests.support.wait import wait_until

__all__ = ["lead"]


def lead(admin: Admin, topic: str, broker: int, order: list[int], *, partition: int = 0) -> int:
    """Make ``broker`` lead ``topic``-``partition`` (replicas ``order``, ``broker`` first);
    returns the new leader epoch."""
    admin.alter_partition_reassignments({(topic, partition): order}, wait=True, timeout_s=30)
    admin.elect_leaders(topic, [partition])
    return int(wait_until(lambda: (p := admin.describe_topic(topic, live=False).partitions[partition]).leader == broker
                          and len(p.isr) == len(order) and p.leader_epoch, timeout=30,
                          message=f"broker {broker} leads {topic}-{partition}"))
