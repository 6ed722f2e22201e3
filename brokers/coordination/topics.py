"""The coordinators' internal topics, named once for the broker paths that treat them apart:
only their coordinators create, write and delete them (``brokers/server/admin.py``,
``produce.py``), and no client creates them by naming them (``topic_defaults.py``)."""
from __future__ import annotations

from brokers.groups.model import INTERNAL_TOPIC as OFFSETS_TOPIC
from brokers.transactions.model import INTERNAL_TOPIC as TXN_STATE_TOPIC

__all__ = ["COORDINATOR_TOPICS"]

COORDINATOR_TOPICS = frozenset({OFFSETS_TOPIC, TXN_STATE_TOPIC})
