"""Elections for ``RaftCore``: election timeouts, pre-vote and vote (delegated from core).

Raft paper section 5.2 (randomised timeouts, one vote per term, majority wins),
5.4.1 (the election restriction: grant only to a candidate whose log is at least as
up to date, compared by (last epoch, end offset)), thesis 9.6 / KIP-996 (pre-vote: a
Prospective node asks first whether it could win, and a voter that still hears from a
leader says no, so a partitioned node that rejoins cannot disrupt a healthy quorum).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from .messages import VoteRequest, VoteResponse
from .quorum import VoteResult, vote_result
from .states import Candidate, Follower, Leader, Prospective, Unattached, Voted

if TYPE_CHECKING:
    from .core import RaftCore

__all__ = ["on_election_timeout", "on_vote_request", "on_vote_response"]


def on_election_timeout(core: "RaftCore") -> None:
    """A voter without a live leader starts (or restarts) a campaign."""
    core.reset_election_timer()
    if core.config.pre_vote:
        _start_pre_vote(core)
    else:
        _start_election(core)


def _log_is_up_to_date(core: "RaftCore", last_epoch: int, end_offset: int) -> bool:
    return (last_epoch, end_offset) >= (core.log.last_epoch, core.log.end_offset)


def _start_pre_vote(core: "RaftCore") -> None:
    state = core.state
    core.become(Prospective(state.epoch, state.voted_for, granted=frozenset({core.node_id})))
    for voter in core.voters:
        if voter != core.node_id:
            core.send(VoteRequest(core.node_id, voter, state.epoch, core.log.last_epoch,
                                  core.log.end_offset, pre_vote=True))
    _count(core)


def _start_election(core: "RaftCore") -> None:
    epoch = core.state.epoch + 1
    core.become(Candidate(epoch, core.node_id, granted=frozenset({core.node_id})))
    core.reset_election_timer()
    for voter in core.voters:
        if voter != core.node_id:
            core.send(VoteRequest(core.node_id, voter, epoch, core.log.last_epoch, core.log.end_offset))
    _count(core)


def _count(core: "RaftCore") -> None:
    state = core.state
    if not isinstance(state, (Prospective, Candidate)):
        return
    if vote_result(core.voters, state.granted, state.rejected) is not VoteResult.WON:
        return
    if isinstance(state, Prospective):
        _start_election(core)
    else:
        core.become(Leader(state.epoch, core.node_id, core.log.end_offset))


def on_vote_request(core: "RaftCore", request: VoteRequest) -> None:
    if not core.is_voter or request.src not in core.voters:
        return
    if request.pre_vote:
        _on_pre_vote_request(core, request)
        return
    if request.epoch > core.epoch:
        core.become(Unattached(request.epoch))
    state = core.state
    granted = False
    if request.epoch == state.epoch and _log_is_up_to_date(core, request.last_epoch, request.end_offset):
        if isinstance(state, Voted) and state.voted_for == request.src:
            granted = True
        elif isinstance(state, (Unattached, Prospective)) and state.voted_for is None:
            core.become(Voted(state.epoch, request.src))
            granted = True
    if granted:
        core.reset_election_timer()
    core.send(VoteResponse(core.node_id, request.src, core.epoch, granted, False, core.leader_id))


def _on_pre_vote_request(core: "RaftCore", request: VoteRequest) -> None:
    """Grant iff the log is up to date and no leader is known to be alive (KIP-996).

    A pre-vote never changes the receiver's state.
    """
    state = core.state
    leader_alive = isinstance(state, Leader) or (
        isinstance(state, Follower) and core.repl.heard_from_leader_recently()
    )
    granted = (
        request.epoch >= state.epoch
        and not leader_alive
        and _log_is_up_to_date(core, request.last_epoch, request.end_offset)
    )
    core.send(VoteResponse(core.node_id, request.src, state.epoch, granted, True, state.leader_id))


def on_vote_response(core: "RaftCore", response: VoteResponse) -> None:
    if response.src not in core.voters:
        return
    if response.epoch > core.epoch:
        core.observe(response.epoch, response.leader_id)
        return
    state = core.state
    if response.pre_vote and isinstance(state, Prospective):
        if not response.granted and response.leader_id is not None and response.epoch == state.epoch:
            core.observe(response.epoch, response.leader_id)
            return
        if response.granted:
            core.state = state.__class__(state.epoch, state.voted_for, state.granted | {response.src}, state.rejected)
        else:
            core.state = state.__class__(state.epoch, state.voted_for, state.granted, state.rejected | {response.src})
        _count(core)
    elif not response.pre_vote and isinstance(state, Candidate) and response.epoch == state.epoch:
        if response.granted:
            core.state = Candidate(state.epoch, state.node_id, state.granted | {response.src}, state.rejected)
        else:
            core.state = Candidate(state.epoch, state.node_id, state.granted, state.rejected | {response.src})
        _count(core)
