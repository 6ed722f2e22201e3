"""One partition replica as a unit (Kafka's Partition over UnifiedLog): its one owner.

- ``partition`` ``Partition``: the shell: lock, ``PartitionLog``, injected clock, waiters;
  the typed methods every caller uses (produce, fetch, follower fetches on both sides,
  describe, list-offsets, the ISR updater).
- ``core`` ``PartitionCore``: the pure decisions (HW, LSO, produce fencing and sequences,
  follower fetches and divergence, ISR candidates); no lock, thread, clock or disk.
- ``messages``: the typed values in and out.
- ``replica_state`` (follower progress, ISR, HW), ``producer_state`` (idempotence),
  ``divergence`` (KIP-320/595 diverging epochs): the core's pure parts.
- ``directory``: the ``partition.metadata`` marker of a replica directory.
"""
from .core import PartitionCore as PartitionCore
from .messages import AppendOutcome as AppendOutcome
from .messages import FetchedData as FetchedData
from .messages import FetchPosition as FetchPosition
from .messages import FollowerFetch as FollowerFetch
from .messages import FollowerFetchAnswer as FollowerFetchAnswer
from .messages import Isolation as Isolation
from .messages import IsrChange as IsrChange
from .messages import LeaderAndIsr as LeaderAndIsr
from .messages import Leadership as Leadership
from .messages import PartitionOffsets as PartitionOffsets
from .messages import PartitionRead as PartitionRead
from .messages import ReplicationView as ReplicationView
from .partition import Partition as Partition

__all__ = [
    "AppendOutcome", "FetchPosition", "FetchedData", "FollowerFetch", "FollowerFetchAnswer", "Isolation", "IsrChange",
    "LeaderAndIsr", "Leadership", "Partition", "PartitionCore", "PartitionOffsets", "PartitionRead",
    "ReplicationView",
]
