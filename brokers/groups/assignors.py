"""Server-side assignors (KIP-848's ``uniform`` and ``range``): pure functions.

Input: every member's subscribed topics (already resolved against the cluster's topics),
each topic's partition count, and the previous target assignment (for stickiness).
Output: ``{member_id: frozenset[(topic, partition)]}``, a target in which every partition
of a subscribed topic has exactly one owner among the members subscribed to it; members
without a subscription get nothing.  Deterministic: the same input gives the same
output whatever the dict order (members and partitions are visited in sorted order).

- ``uniform`` (Kafka's ``UniformAssignor``): balanced and sticky.  Each member keeps the
  partitions it had in the previous target that it still subscribes to; the rest go one
  by one to the least-loaded eligible member; then single partitions move from the most
  to the least loaded member that may take them while their counts differ by more than
  one.  With identical subscriptions every member ends with ``floor(P/N)`` or
  ``ceil(P/N)`` partitions and a join or leave moves only what balance requires.
- ``range`` (Kafka's ``RangeAssignor``): per topic, its subscribers sorted by member id get
  contiguous ranges, the first ``P mod N`` one partition more; members subscribed to the
  same co-partitioned topics get the same partition numbers of each.  Not sticky.

``assign(name, ...)`` picks one by name (``UnsupportedAssignorError`` otherwise).
"""
from __future__ import annotations

from typing import Callable, Mapping

from spark_log.errors import UnsupportedAssignorError

from .model import ASSIGNORS, Assignment, TopicPartition

__all__ = ["assign", "uniform", "range_assign", "ASSIGNORS"]

Subscriptions = Mapping[str, frozenset[str]]
"""``{member_id: subscribed existing topics}``."""


def _eligible(subscriptions: Subscriptions, topic: str) -> list[str]:
    return sorted(m for m, topics in subscriptions.items() if topic in topics)


def uniform(subscriptions: Subscriptions, partitions: Mapping[str, int],
            previous: Mapping[str, Assignment]) -> dict[str, Assignment]:
    """The balanced, sticky assignment (module docstring)."""
    members = sorted(subscriptions)
    owned: dict[str, set[TopicPartition]] = {m: set() for m in members}
    owner: dict[TopicPartition, str] = {}
    all_parts = sorted((t, p) for t in sorted({t for ts in subscriptions.values() for t in ts})
                       if t in partitions for p in range(partitions[t]))
    eligible_of = {t: _eligible(subscriptions, t) for t in {t for t, _ in all_parts}}
    # 1. stickiness: keep what the previous target gave, if still valid
    for member in members:
        for tp in sorted(previous.get(member, frozenset())):
            topic, index = tp
            if topic in subscriptions[member] and index < partitions.get(topic, 0) and tp not in owner:
                owner[tp] = member
                owned[member].add(tp)
    # 2. the rest, most constrained partitions first, to the least-loaded eligible member
    rest = [tp for tp in all_parts if tp not in owner]
    rest.sort(key=lambda tp: (len(eligible_of[tp[0]]), tp))
    for tp in rest:
        candidates = eligible_of[tp[0]]
        if not candidates:
            continue
        chosen = min(candidates, key=lambda m: (len(owned[m]), m))
        owner[tp] = chosen
        owned[chosen].add(tp)
    # 3. balance: move single partitions from the most to the least loaded eligible member
    for _ in range(len(all_parts) + 1):
        if not _move_one(members, owned, owner, subscriptions):
            break
    return {m: frozenset(owned[m]) for m in members}


def _move_one(members: list[str], owned: dict[str, set[TopicPartition]], owner: dict[TopicPartition, str],
              subscriptions: Subscriptions) -> bool:
    """Move one partition from a heavier to a lighter member (count difference > 1) that
    subscribes to its topic; the lightest receiver and heaviest giver first.  False when
    no such move exists (the assignment is as balanced as subscriptions allow)."""
    receivers = sorted(members, key=lambda m: (len(owned[m]), m))
    givers = sorted(members, key=lambda m: (-len(owned[m]), m))
    for receiver in receivers:
        for giver in givers:
            if len(owned[giver]) - len(owned[receiver]) <= 1:
                break
            movable = sorted(tp for tp in owned[giver] if tp[0] in subscriptions[receiver])
            if movable:
                tp = movable[-1]
                owned[giver].discard(tp)
                owned[receiver].add(tp)
                owner[tp] = receiver
                return True
    return False


def range_assign(subscriptions: Subscriptions, partitions: Mapping[str, int],
                 previous: Mapping[str, Assignment]) -> dict[str, Assignment]:
    """Contiguous ranges per topic (module docstring); ``previous`` is not used."""
    out: dict[str, set[TopicPartition]] = {m: set() for m in subscriptions}
    for topic in sorted({t for ts in subscriptions.values() for t in ts}):
        count = partitions.get(topic, 0)
        subscribers = _eligible(subscriptions, topic)
        if not subscribers or not count:
            continue
        share, extra = divmod(count, len(subscribers))
        start = 0
        for i, member in enumerate(subscribers):
            size = share + (1 if i < extra else 0)
            out[member].update((topic, p) for p in range(start, start + size))
            start += size
    return {m: frozenset(ps) for m, ps in sorted(out.items())}


_BY_NAME: dict[str, Callable[[Subscriptions, Mapping[str, int], Mapping[str, Assignment]], dict[str, Assignment]]] = {
    "uniform": uniform,
    "range": range_assign,
}
assert set(_BY_NAME) == set(ASSIGNORS)


def assign(name: str, subscriptions: Subscriptions, partitions: Mapping[str, int],
           previous: Mapping[str, Assignment]) -> dict[str, Assignment]:
    """The target assignment of assignor ``name``."""
    try:
        assignor = _BY_NAME[name]
    except KeyError:
        raise UnsupportedAssignorError(f"unknown assignor {name!r}; known: {', '.join(ASSIGNORS)}") from None
    return assignor(subscriptions, partitions, previous)
