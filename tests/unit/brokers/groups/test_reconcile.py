"""One member's move towards its target (brokers/groups/reconcile.py): the four rules as a table."""
from __future__ import annotations

import pytest

from brokers.groups.model import Member, MemberState
from brokers.groups.reconcile import reconcile


def P(*ps: int) -> frozenset[tuple[str, int]]:
    return frozenset(("t", p) for p in ps)


def _member(**kw: object) -> Member:
    fields: dict[str, object] = dict(member_id="m", epoch=3, previous_epoch=2, assigned=P(0, 1), target=P(0, 1))
    fields.update(kw)
    return Member(**fields)  # type: ignore[arg-type]


@pytest.mark.parametrize("member,target_epoch,target,owned,free,expect", [
    # 2. already there: unchanged
    (_member(), 3, P(0, 1), P(0, 1), set(), dict(epoch=3, assigned=P(0, 1), state=MemberState.STABLE)),
    # 3. must revoke 1: keeps 0, same epoch, UNREVOKED
    (_member(), 4, P(0, 2), P(0, 1), {2}, dict(epoch=3, assigned=P(0), pending_revocation=P(1),
                                               state=MemberState.UNREVOKED)),
    # 1. still owns the revoked partition: nothing changes
    (_member(epoch=3, assigned=P(0), pending_revocation=P(1), state=MemberState.UNREVOKED, target=P(0, 2)),
     4, P(0, 2), P(0, 1), {2}, dict(epoch=3, assigned=P(0), pending_revocation=P(1), state=MemberState.UNREVOKED)),
    # 1 then 4: confirmed; moves to epoch 4 and takes the free 2
    (_member(epoch=3, assigned=P(0), pending_revocation=P(1), state=MemberState.UNREVOKED, target=P(0, 2)),
     4, P(0, 2), P(0), {2}, dict(epoch=4, previous_epoch=3, assigned=P(0, 2), pending_revocation=P(),
                                 state=MemberState.STABLE)),
    # 4. a partition another member still holds waits: UNRELEASED at the new epoch
    (_member(), 4, P(0, 1, 2), P(0, 1), set(), dict(epoch=4, assigned=P(0, 1), state=MemberState.UNRELEASED)),
    # ... and comes once free, without another epoch change
    (_member(epoch=4, previous_epoch=3, state=MemberState.UNRELEASED, target=P(0, 1, 2)), 4, P(0, 1, 2), P(0, 1), {2},
     dict(epoch=4, previous_epoch=3, assigned=P(0, 1, 2), state=MemberState.STABLE)),
    # a new member (epoch 0) gets what is free
    (_member(epoch=0, previous_epoch=-1, assigned=P(), target=P()), 5, P(3, 4), P(), {3},
     dict(epoch=5, previous_epoch=0, assigned=P(3), state=MemberState.UNRELEASED)),
])
def test_reconcile(member: Member, target_epoch: int, target: frozenset[tuple[str, int]],
                   owned: frozenset[tuple[str, int]], free: set[int], expect: dict[str, object]) -> None:
    after = reconcile(member, target_epoch=target_epoch, target=target, owned=owned, is_free=lambda tp: tp[1] in free)
    assert after.target == target
    for name, value in expect.items():
        assert getattr(after, name) == value, name
