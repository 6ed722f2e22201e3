"""Log divergence between a leader and a follower (pure; Kafka's OffsetsForLeaderEpoch in the fetch).

A follower fetches with ``fetch_offset`` (its LEO) and ``last_fetched_epoch`` (the epoch of
its last frame, -1 for an empty log).  The leader answers with ``leader_check``:

- ``None``: the follower's log is a prefix of the leader's; send data from ``fetch_offset``;
- ``(epoch, end_offset)``: a *diverging epoch* (KIP-320/KIP-595): the leader's largest
  epoch <= ``last_fetched_epoch`` and where it ends in the leader's log.  It is returned when
  the leader does not know ``last_fetched_epoch`` (its answer is a lower epoch), when that
  epoch ends in the leader's log before ``fetch_offset``, or when the follower is past the
  leader's LEO.  When every epoch in the leader's log is below the follower's (the new
  leader has not written in its own epoch yet) the answer is ``(leader's latest epoch,
  leader's LEO)``; an empty leader log answers ``(-1, leader's LEO)``.

The follower then calls ``follower_truncation_offset``: ``min(end_offset, the follower's own
end offset for that epoch)``, and truncates there before its next fetch (KIP-595's rule; a
follower that does not know the epoch ends up at the start of the first epoch it has above
it, then asks again with its new last epoch, so the loop converges in a few rounds).

Epoch entries are ``[(epoch, start_offset), ...]`` ascending, as ``EpochCache.entries()``.
"""
from __future__ import annotations

from typing import Sequence

from brokers.log.epoch_lookup import UNDEFINED_EPOCH, end_offset_for_epoch, epoch_of_last_record

__all__ = ["end_offset_for_epoch", "leader_check", "follower_truncation_offset", "epoch_of_last_record"]

UNDEFINED = UNDEFINED_EPOCH


def leader_check(entries: Sequence[tuple[int, int]], *, log_start_offset: int, log_end_offset: int,
                 fetch_offset: int, last_fetched_epoch: int) -> tuple[int, int] | None:
    """The leader's answer to a follower fetch (see the module docstring)."""
    if last_fetched_epoch < 0:
        if fetch_offset > log_end_offset:
            latest = entries[-1][0] if entries else UNDEFINED
            return latest, log_end_offset
        return None
    epoch, end = end_offset_for_epoch(entries, last_fetched_epoch, log_end_offset)
    if epoch == UNDEFINED:
        # the follower's epoch is above every epoch the leader's log has (the leader has not
        # written in its own epoch yet): everything the leader has is below that epoch
        if not entries:
            return None if fetch_offset == log_end_offset else (UNDEFINED, log_end_offset)
        latest = entries[-1][0]
        return latest, log_end_offset
    if epoch != last_fetched_epoch or end < fetch_offset:
        return epoch, end
    return None


def follower_truncation_offset(follower_entries: Sequence[tuple[int, int]], follower_log_end_offset: int,
                               diverging: tuple[int, int]) -> int:
    """Where a follower truncates on a diverging epoch ``(epoch, end_offset)`` (KIP-595)."""
    epoch, end = diverging
    if epoch == UNDEFINED:
        return min(max(end, 0), follower_log_end_offset)
    own_epoch, own_end = end_offset_for_epoch(follower_entries, epoch, follower_log_end_offset)
    if own_epoch == UNDEFINED:
        return min(end, follower_log_end_offset)
    return min(end, own_end, follower_log_end_offset)
