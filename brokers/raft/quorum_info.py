"""What the leader knows of every replica of the metadata log (Kafka's DescribeQuorum, KIP-595).

``FetchWatch`` is the leader's record of each replica's valid fetches in its epoch:
the log end offset the replica last fetched from (all of the log below it is on that
replica), when it last fetched, and when it was last caught up.  "Caught up" is Kafka's
``ReplicaState.updateFetchState`` rule: a fetch at or past the leader's log end offset
makes the replica caught up *now*; a fetch at or past the leader's end offset *as of the
replica's previous fetch* makes it caught up as of that previous fetch (it had all of
the log there was then).  Times are ticks of the core, given back as ages in
milliseconds (``tick_ms`` per tick) so that the pure core never reads a clock; the
shell turns an age into a wall-clock timestamp.

Observers (nodes fetching without a vote: broker-only nodes) are listed while they keep
fetching: one silent for longer than ``OBSERVER_TIMEOUT_MS`` (Kafka's five minutes) is
dropped, as Kafka's ``LeaderState`` drops observers.  A fresh leader knows nothing yet:
voters that did not fetch in its epoch show ``log_end_offset`` None.

Thread-safety: none; the core's caller drives it.
"""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["FetchWatch", "QuorumInfo", "ReplicaProgress", "OBSERVER_TIMEOUT_MS"]

OBSERVER_TIMEOUT_MS = 300_000


@dataclass(frozen=True, slots=True)
class ReplicaProgress:
    """One replica as the leader sees it.  ``log_end_offset``: the offset of its last
    valid fetch (None: none in this epoch); the ages are milliseconds before the
    description was taken (None: never)."""

    node_id: int
    log_end_offset: int | None
    last_fetch_age_ms: int | None
    last_caught_up_age_ms: int | None


@dataclass(frozen=True, slots=True)
class QuorumInfo:
    """The leader's view of the quorum: voters (the leader first, then by id) and
    observers (by id).  ``high_watermark``: the commit index; ``leader_end_offset``:
    the leader's own log end."""

    leader_id: int
    epoch: int
    high_watermark: int
    leader_end_offset: int
    voters: tuple[ReplicaProgress, ...]
    observers: tuple[ReplicaProgress, ...]


class FetchWatch:
    """Per replica: (tick of the last valid fetch, the leader's end offset then), the
    fetched offset, and the tick it was last caught up."""

    __slots__ = ("fetched", "offsets", "caught_up")

    def __init__(self) -> None:
        self.fetched: dict[int, tuple[int, int]] = {}
        self.offsets: dict[int, int] = {}
        self.caught_up: dict[int, int] = {}

    def on_valid_fetch(self, replica: int, offset: int, *, leader_end: int, now: int) -> None:
        previous = self.fetched.get(replica)
        if offset >= leader_end:
            self.caught_up[replica] = now
        elif previous is not None and offset >= previous[1]:
            self.caught_up[replica] = max(self.caught_up.get(replica, previous[0]), previous[0])
        self.fetched[replica] = (now, leader_end)
        self.offsets[replica] = offset

    def describe(self, *, leader_id: int, epoch: int, voters: tuple[int, ...], high_watermark: int,
                 leader_end: int, now: int, tick_ms: int) -> QuorumInfo:
        def age(tick: int | None) -> int | None:
            return None if tick is None else (now - tick) * tick_ms

        def progress(node: int) -> ReplicaProgress:
            if node == leader_id:
                return ReplicaProgress(node, leader_end, 0, 0)
            fetched = self.fetched.get(node)
            return ReplicaProgress(node, self.offsets.get(node), age(fetched[0] if fetched else None),
                                   age(self.caught_up.get(node)))

        ordered = (leader_id, *(v for v in voters if v != leader_id))
        observers = sorted(n for n, (at, _) in self.fetched.items()
                           if n not in voters and (now - at) * tick_ms <= OBSERVER_TIMEOUT_MS)
        return QuorumInfo(leader_id=leader_id, epoch=epoch, high_watermark=high_watermark, leader_end_offset=leader_end,
                          voters=tuple(progress(v) for v in ordered), observers=tuple(progress(o) for o in observers))
