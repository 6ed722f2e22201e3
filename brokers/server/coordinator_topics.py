"""The coordinators' internal topics, named once for the broker paths that treat them apart:
only their coordinators create, write and delete them (``admin.py``, ``produce.py``), and no
client creates them by naming them (``topic_defaults.py``).  Here rather than in
``brokers.coordination``, which the coordinators import (docs/ARCHITECTURE.md's table)."""
from __future__ import annotations

from brokers.groups.model import INTERNAL_TOPIC as OFFSETS_TOPIC
from brokers.transactions.model import INTERNAL_TOPIC as TXN_STATE_TOPIC

__all__ = ["COORDINATOR_TOPICS"]

COORDINATOR_TOPICS = frozenset({OFFSETS_TOPIC, TXN_STATE_TOPIC})
