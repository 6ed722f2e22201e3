"""The group coordinator (consumer groups, KIP-848-style server-side assignment).

- ``model``: groups, members, committed offsets, settings (immutable values), the internal
  topic's name and ``partition_for(group_id, n)``.
- ``records``: the records of ``__consumer_offsets`` (one per committed partition, one per
  group; tombstones) and their bytes.
- ``assignors`` (``uniform``, ``range``) and ``reconcile`` (one member's move to its target):
  pure functions.
- ``core`` ``GroupShard``: the groups of one internal partition as a pure state machine
  (decisions out as records + answers; ``apply`` for both live appends and replay).
- ``loader``: a new leader's replay of its partition; ``coordinator`` ``GroupCoordinator``:
  the IO shell (locks, appends, durability waits, loads on leadership changes, session
  expiry); ``service``: the gRPC service.

``brokers.server.BrokerServer`` builds one ``GroupCoordinator`` per broker and serves its gRPC service.
"""
from .coordinator import Coordinates as Coordinates
from .coordinator import GroupCoordinator as GroupCoordinator
from .coordinator import InternalTopicSpec as InternalTopicSpec
from .core import GroupShard as GroupShard
from .model import INTERNAL_TOPIC as INTERNAL_TOPIC
from .model import GroupConfig as GroupConfig
from .model import partition_for as partition_for
from .service import GroupServicer as GroupServicer

__all__ = ["Coordinates", "GroupConfig", "GroupCoordinator", "GroupServicer", "GroupShard", "INTERNAL_TOPIC",
           "InternalTopicSpec", "partition_for"]
