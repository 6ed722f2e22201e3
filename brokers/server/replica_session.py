"""A follower's fetch session on one data listener connection (``REPLICA_FETCH_SESSION``):
the leader's memory of what the follower asked for and what it was told, so an idle round
carries and answers only what changed (Kafka's incremental fetch sessions, KIP-227).

A session lives as long as its connection (one connection per follower fetcher, requests
in order), so it needs no id or epoch: a new connection is a new, empty session, and a
follower that loses its connection starts over.  Each request adds or replaces the
partitions whose request changed (``upserts``) and drops those it no longer follows
(``removals``); the others keep the request they last sent.

Per partition the session keeps:

- ``wanted``: the follower's request (its fetch offset, epochs, log start);
- ``token``: the ``settle_token`` of the last full answer when the follower was caught up
  (``Partition.answer_follower_fetch``), cleared by a new request; while the partition's
  token is unchanged the leader counts the fetch with ``Partition.settled_follower_fetch``
  (one lock round trip, the follower's fetch times move exactly as in a full answer) and
  sends nothing;
- ``told``: the offsets (HW, LSO, log start, LEO) of the last answer sent, so a full answer
  that tells the follower nothing new (no records, no error, no divergence, the same
  offsets) is left out too.

Thread-safety: none; one connection's requests are served by one thread in order.
"""
from __future__ import annotations

from typing import Iterable

from brokers.partition import Partition
from brokers.replica.replica_wire import ReplicaWanted
from spark_log.errors import InvalidRequestError

__all__ = ["ReplicaSession", "SessionEntry"]


class SessionEntry:
    """One partition of a session (module docstring)."""

    __slots__ = ("wanted", "partition", "token", "told")

    def __init__(self, wanted: ReplicaWanted) -> None:
        self.wanted = wanted
        self.partition: Partition | None = None  # the replica the token belongs to
        self.token: tuple[object, ...] | None = None
        self.told: tuple[int, int, int, int] | None = None


class ReplicaSession:
    """The partitions one follower fetches over one connection (module docstring)."""

    def __init__(self, replica_id: int) -> None:
        self.replica_id = replica_id
        self.entries: dict[tuple[str, int], SessionEntry] = {}

    def update(self, replica_id: int, upserts: Iterable[ReplicaWanted], removals: Iterable[tuple[str, int]]) -> None:
        """Apply one request's changes; a session belongs to one follower
        (``InvalidRequestError`` for another replica id on the same connection)."""
        if replica_id != self.replica_id:
            raise InvalidRequestError(f"this connection's fetch session is broker {self.replica_id}'s, "
                                      f"not broker {replica_id}'s")
        entries = self.entries
        for key in removals:
            entries.pop(key, None)
        for wanted in upserts:
            key = (wanted.topic, wanted.partition)
            entry = entries.get(key)
            if entry is None:
                entries[key] = SessionEntry(wanted)
            else:
                entry.wanted = wanted
                entry.token = None  # a new request is answered in full
