"""Elections: election timeouts, pre-vote and vote, as functions from a view to effects.

Raft paper section 5.2 (randomised timeouts, one vote per term, majority wins),
5.4.1 (the election restriction: grant only to a candidate whose log is at least as
up to date, compared by (last epoch, end offset)), thesis 9.6 / KIP-996 (pre-vote: a
Prospective node asks first whether it could win, and a voter that still hears from a
leader says no, so a partitioned node that rejoins cannot disrupt a healthy quorum; a
pre-vote in a later epoch still moves its receiver there, since its sender only got there
by winning a pre-vote and campaigning).

Each function reads a ``CoreView`` and returns the effects for ``RaftCore`` to apply
(``effects.py``); nothing here changes the core.  Where a step depends on the role an
earlier effect of the same list sets (a Prospective that wins goes on to campaign), the
function carries that role forward itself.
"""
from __future__ import annotations

from .effects import Become, CoreView, Effect, Observe, RecordVote, ResetElectionTimer, Send
from .messages import VoteRequest, VoteResponse
from .quorum import VoteResult, vote_result
from .states import Candidate, Follower, Leader, Prospective, RoleState, Unattached, Voted, record_vote

__all__ = ["on_election_timeout", "on_vote_request", "on_vote_response"]


def on_election_timeout(view: CoreView) -> list[Effect]:
    """A voter without a live leader starts (or restarts) a campaign."""
    effects: list[Effect] = [ResetElectionTimer()]
    if view.config.pre_vote:
        effects += _start_pre_vote(view, view.state)
    else:
        effects += _start_election(view, view.state)
    return effects


def _log_is_up_to_date(view: CoreView, last_epoch: int, end_offset: int) -> bool:
    return (last_epoch, end_offset) >= (view.log.last_epoch, view.log.end_offset)


def _vote_requests(view: CoreView, epoch: int, *, pre_vote: bool) -> list[Effect]:
    log = view.log
    return [Send(VoteRequest(view.node_id, voter, epoch, log.last_epoch, log.end_offset, pre_vote=pre_vote))
            for voter in view.voters if voter != view.node_id]


def _start_pre_vote(view: CoreView, state: RoleState) -> list[Effect]:
    prospective = Prospective(state.epoch, state.voted_for, granted=frozenset({view.node_id}))
    return [Become(prospective), *_vote_requests(view, state.epoch, pre_vote=True), *_count(view, prospective)]


def _start_election(view: CoreView, state: RoleState) -> list[Effect]:
    candidate = Candidate(state.epoch + 1, view.node_id, granted=frozenset({view.node_id}))
    return [Become(candidate), ResetElectionTimer(), *_vote_requests(view, candidate.epoch, pre_vote=False),
            *_count(view, candidate)]


def _count(view: CoreView, state: Prospective | Candidate) -> list[Effect]:
    """A won pre-vote starts the real election; a won election makes the node leader."""
    if vote_result(view.voters, state.granted, state.rejected) is not VoteResult.WON:
        return []
    if isinstance(state, Prospective):
        return _start_election(view, state)
    return [Become(Leader(state.epoch, view.node_id, view.log.end_offset))]


def on_vote_request(view: CoreView, request: VoteRequest, *, leader_heard_recently: bool) -> list[Effect]:
    """Answer a vote or pre-vote request.  ``leader_heard_recently``: as a follower, the
    node had an answer from its leader within the election timeout (KIP-996)."""
    if not view.is_voter or request.src not in view.voters:
        return []
    effects: list[Effect] = []
    state = view.state
    if request.epoch > state.epoch:  # a pre-vote's too: its sender got there in an election (KRaft)
        state = Unattached(request.epoch)
        effects.append(Become(state))
    if request.pre_vote:
        return [*effects, _pre_vote_answer(view, state, request, leader_heard_recently)]
    granted = False
    if request.epoch == state.epoch and _log_is_up_to_date(view, request.last_epoch, request.end_offset):
        if isinstance(state, Voted) and state.voted_for == request.src:
            granted = True
        elif isinstance(state, (Unattached, Prospective)) and state.voted_for is None:
            state = Voted(state.epoch, request.src)
            effects.append(Become(state))
            granted = True
    if granted:
        effects.append(ResetElectionTimer())
    effects.append(Send(VoteResponse(view.node_id, request.src, state.epoch, granted, False, state.leader_id)))
    return effects


def _pre_vote_answer(view: CoreView, state: RoleState, request: VoteRequest, leader_heard_recently: bool) -> Effect:
    """Grant iff the log is up to date and no leader is known to be alive (KIP-996).

    A pre-vote changes the receiver's state only when it carries a later epoch: the
    receiver moves to that epoch first (``state``: Unattached in it), as for any request
    (KRaft does the same).  Otherwise a voter that moved to a later epoch in an election
    that failed could never rejoin: its pre-votes are refused while the leader of an earlier
    epoch lives, and that leader would never learn of its epoch if it had fetched before
    (``BeginQuorumEpoch`` goes only to voters that never fetched).
    """
    leader_alive = isinstance(state, Leader) or (isinstance(state, Follower) and leader_heard_recently)
    granted = (
        request.epoch >= state.epoch
        and not leader_alive
        and _log_is_up_to_date(view, request.last_epoch, request.end_offset)
    )
    return Send(VoteResponse(view.node_id, request.src, state.epoch, granted, True, state.leader_id))


def on_vote_response(view: CoreView, response: VoteResponse) -> list[Effect]:
    """Count an answer to this node's (pre-)vote request; a higher epoch, or a refusal
    that names the leader of our epoch, ends the campaign."""
    if response.src not in view.voters:
        return []
    state = view.state
    if response.epoch > state.epoch:
        return [Observe(response.epoch, response.leader_id)]
    if response.pre_vote and isinstance(state, Prospective):
        if not response.granted and response.leader_id is not None and response.epoch == state.epoch:
            return [Observe(response.epoch, response.leader_id)]
        return [RecordVote(response.src, response.granted),
                *_count(view, record_vote(state, response.src, response.granted))]
    if not response.pre_vote and isinstance(state, Candidate) and response.epoch == state.epoch:
        return [RecordVote(response.src, response.granted),
                *_count(view, record_vote(state, response.src, response.granted))]
    return []
