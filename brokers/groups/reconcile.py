"""One member's move towards the target assignment (KIP-848's current-assignment builder).

A pure function, called when the member heartbeats.  The rules, in order:

1. ``UNREVOKED``: the member was asked to give up ``pending_revocation``.  Until its
   heartbeat reports owned partitions without any of them, nothing changes.  Once it
   does, the revoked partitions are free for others and the member goes on with rule 2.
2. The member already owns exactly its target at the target epoch: ``STABLE``, unchanged.
3. It owns partitions outside its target: keep what stays, ask it to revoke the rest
   (``UNREVOKED``, same epoch: a member never holds a new partition before it gave up
   the ones that moved, and other members keep everything that does not move).
4. Otherwise it moves to the target epoch and gets every target partition that no other
   member owns (assigned or pending revocation); if some are still held elsewhere it is
   ``UNRELEASED`` and gets them at a later heartbeat, once released.

So a partition has at most one owner at any time: it is given only when free, and a
member gives it up (confirms the revocation) before anyone else gets it.
"""
from __future__ import annotations

import dataclasses
from typing import Callable

from .model import Assignment, Member, MemberState, TopicPartition

__all__ = ["reconcile"]


def reconcile(member: Member, *, target_epoch: int, target: Assignment, owned: Assignment | None,
              is_free: Callable[[TopicPartition], bool]) -> Member:
    """``member`` after one heartbeat that reported ``owned`` (None: not reported), with
    the group's target epoch and the member's share ``target``.  ``is_free(tp)``: no
    *other* member owns ``tp``."""
    if member.target != target:
        member = dataclasses.replace(member, target=target)
    if member.state is MemberState.UNREVOKED:
        if owned is None or owned & member.pending_revocation:
            return member
        member = dataclasses.replace(member, pending_revocation=frozenset(), state=MemberState.STABLE)
    if member.epoch == target_epoch and member.state is MemberState.STABLE and member.assigned == target:
        return member
    kept = member.assigned & target
    revoke = member.assigned - target
    if revoke:
        return dataclasses.replace(member, assigned=kept, pending_revocation=revoke, state=MemberState.UNREVOKED)
    gained = frozenset(tp for tp in target - kept if is_free(tp))
    assigned = kept | gained
    state = MemberState.STABLE if assigned == target else MemberState.UNRELEASED
    previous = member.previous_epoch if member.epoch == target_epoch else member.epoch
    return dataclasses.replace(member, epoch=target_epoch, previous_epoch=previous, assigned=assigned,
                               pending_revocation=frozenset(), state=state)
