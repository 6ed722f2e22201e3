"""Directed tests of ``RaftCore`` (the seeded sweeps live in ``tests/sim``).

Each test names the Raft paper section (Ongaro & Ousterhout 2014; thesis 2014) or the
KIP (595 KRaft, 630 snapshots, 996 pre-vote) whose rule it checks.
"""
from __future__ import annotations

import random
from typing import Callable

import pytest

from brokers.raft.core import RaftCore
from brokers.raft.log import MemoryRaftLog
from brokers.raft.messages import (
    BeginQuorumEpoch, Entry, FetchRequest, FetchResponse, HardState, Message, Snapshot, SnapshotId, VoteRequest,
    VoteResponse,
)
from brokers.raft.states import Candidate, Follower, Leader, Prospective, Resigned, Unattached
from spark_log.config import RaftConfig
from spark_log.errors import NotControllerError

CFG = RaftConfig(tick_ms=10, election_ticks=5, heartbeat_ticks=1, fetch_wait_ticks=1, fetch_max_entries=100)


class Net:
    """Cores with in-memory logs and a hand-driven message queue."""

    def __init__(self, voters: list[int], observers: tuple[int, ...] = (), *, config: RaftConfig = CFG,
                 logs: dict[int, list[Entry]] | None = None, hard: dict[int, HardState] | None = None) -> None:
        self.voters = voters
        self.queue: list[Message] = []
        self.hard: dict[int, HardState] = {}
        self.applied: dict[int, list[Entry]] = {}
        self.cores: dict[int, RaftCore] = {}
        for node in voters + list(observers):
            log = MemoryRaftLog()
            for entry in (logs or {}).get(node, []):
                log.append_as_follower([entry])
            log.flush()
            self.hard[node] = (hard or {}).get(node, HardState())
            self.applied[node] = []
            self.cores[node] = RaftCore(node_id=node, voters=voters, log=log, config=config,
                                        rng=random.Random(node), hard_state=self.hard[node])
            self.drain(node)

    def drain(self, node: int) -> None:
        core = self.cores[node]
        while core.has_ready():
            ready = core.ready()
            if ready.hard_state is not None:
                self.hard[node] = ready.hard_state
            core.log.flush()
            ready.check_persisted(core.log.flushed_end_offset, self.hard[node])
            self.queue.extend(ready.messages)
            self.applied[node].extend(ready.committed)
            core.advance(ready)

    def tick(self, node: int, times: int = 1) -> None:
        for _ in range(times):
            self.cores[node].tick()
            self.drain(node)

    def campaign(self, node: int) -> None:
        """Tick ``node`` until its election timeout fires (it leaves its current role)."""
        core = self.cores[node]
        self.tick(node, max(0, core.election_deadline - core.now))

    def deliver(self, keep: Callable[[Message], bool] = lambda m: True, rounds: int = 100) -> None:
        for _ in range(rounds):
            batch, self.queue = self.queue, []
            if not batch:
                return
            for message in batch:
                if keep(message):
                    self.cores[message.dst].step(message)
                    self.drain(message.dst)

    def elect(self, node: int, tries: int = 10) -> RaftCore:
        """Elections started by ``node`` (all messages delivered) until there is a leader."""
        for _ in range(tries):
            if any(c.is_leader for c in self.cores.values()):
                break
            self.campaign(node)
            self.deliver()
        return self.leader()

    def leader(self) -> RaftCore:
        leaders = [c for c in self.cores.values() if c.is_leader]
        assert len(leaders) == 1, [c.state for c in self.cores.values()]
        return leaders[0]


def test_pre_vote_then_vote_elects_a_leader() -> None:
    """Paper 5.2 + thesis 9.6 / KIP-996: a Prospective node asks first; only with a
    majority of pre-votes does it bump the epoch and ask for real votes."""
    net = Net([1, 2, 3])
    net.campaign(1)
    assert isinstance(net.cores[1].state, Prospective) and net.cores[1].epoch == 0
    assert all(isinstance(m, VoteRequest) and m.pre_vote and m.epoch == 0 for m in net.queue)
    net.deliver()
    assert net.leader() is net.cores[1] and net.cores[1].epoch == 1
    assert all(net.cores[n].state == Follower(1, 1, 1) for n in (2, 3))
    assert all(net.hard[n] == HardState(1, 1, 1) for n in (1, 2, 3))  # persisted before acting


def test_pre_vote_is_refused_while_the_leader_is_alive() -> None:
    """KIP-996: a voter that hears from a leader refuses pre-votes, so a node that missed
    a few fetches cannot disrupt the quorum; the refusal names the leader."""
    net = Net([1, 2, 3])
    net.campaign(1)
    net.deliver()
    net.queue.clear()
    net.campaign(3)  # node 3 missed its fetch responses
    assert isinstance(net.cores[3].state, Prospective)
    net.deliver(keep=lambda m: m.dst != 3 or m.src in (1, 2))
    assert net.cores[3].epoch == 1 and net.cores[3].leader_id == 1
    assert net.leader().epoch == 1


def test_vote_is_denied_to_a_candidate_with_a_stale_log() -> None:
    """Paper 5.4.1 (election restriction): votes go only to a candidate whose log is at
    least as up to date, compared by (last epoch, end offset)."""
    logs = {1: [Entry(0, 1, b"a")], 2: [Entry(0, 1, b"a"), Entry(1, 1, b"b")], 3: [Entry(0, 1, b"a"), Entry(1, 1, b"b")]}
    net = Net([1, 2, 3], logs=logs, hard={n: HardState(1) for n in (1, 2, 3)})
    net.campaign(1)
    net.deliver()
    assert not net.cores[1].is_leader and net.cores[1].epoch == 1  # even the pre-vote failed


def test_high_watermark_moves_only_with_an_entry_of_the_leaders_epoch() -> None:
    """Paper 5.4.2 (figure 8): a leader never commits older-epoch entries by counting
    replicas; it commits them once an entry of its own epoch is on a majority.  KRaft's
    leader-change control entry gives it one right away."""
    old = [Entry(0, 1, b"a"), Entry(1, 2, b"b")]
    net = Net([1, 2, 3], logs={1: old, 2: old, 3: old[:1]}, hard={n: HardState(2) for n in (1, 2, 3)})
    net.campaign(1)
    net.deliver(keep=lambda m: not isinstance(m, (FetchRequest, FetchResponse)))
    leader = net.cores[1]
    assert leader.is_leader and leader.epoch == 3
    assert leader.state == Leader(3, 1, 2)
    leader.step(FetchRequest(2, 1, 3, 2, 2))  # node 2 holds offsets 0-1 (epochs 1, 2)
    net.drain(1)
    assert leader.high_watermark == 0  # offset 1 is on a majority, but it is epoch 2's
    leader.step(FetchRequest(2, 1, 3, 3, 3))  # node 2 now also holds the control entry
    net.drain(1)
    assert leader.high_watermark == 3


def test_diverging_follower_truncates_to_the_epoch_boundary() -> None:
    """KIP-595 Fetch "DivergingEpoch" (paper 5.3 log matching): the follower's epoch-2
    suffix is not in the leader's log; it truncates to the end of epoch 1 and refetches."""
    logs = {
        1: [Entry(0, 1, b"a"), Entry(1, 1, b"b"), Entry(2, 3, b"x")],
        2: [Entry(0, 1, b"a"), Entry(1, 1, b"b"), Entry(2, 3, b"x")],
        3: [Entry(0, 1, b"a"), Entry(1, 1, b"b"), Entry(2, 2, b"stale"), Entry(3, 2, b"stale2")],
    }
    net = Net([1, 2, 3], logs=logs, hard={1: HardState(3), 2: HardState(3), 3: HardState(2)})
    net.campaign(1)
    net.deliver()
    follower = net.cores[3].log
    assert [(e.offset, e.epoch) for e in follower.read(0, 10)] == [(0, 1), (1, 1), (2, 3), (3, 4)]
    assert net.cores[3].high_watermark == 4


def test_far_behind_follower_installs_the_leaders_snapshot() -> None:
    """KIP-630: a fetch below the leader's log start is answered with the snapshot id; the
    follower fetches the snapshot, replaces its log and restores its state machine."""
    net = Net([1, 2, 3])
    net.campaign(1)
    net.deliver(keep=lambda m: m.dst != 3 and m.src != 3)
    leader = net.cores[1]
    leader.propose([b"p%d" % i for i in range(5)])
    net.drain(1)
    net.deliver(keep=lambda m: m.dst != 3 and m.src != 3)
    assert leader.high_watermark == 6
    snapshot_id = leader.create_snapshot(6, b"state@6")
    assert snapshot_id == SnapshotId(6, 1) and leader.log.start_offset == 6
    net.tick(3, net.cores[3].election_deadline - net.cores[3].now - 1)
    net.tick(1)
    net.deliver()
    follower = net.cores[3]
    assert follower.log.latest_snapshot() == Snapshot(SnapshotId(6, 1), b"state@6")
    assert follower.log.start_offset == 6 and follower.high_watermark >= 6 and follower.leader_id == 1


def test_leader_without_a_quorum_resigns() -> None:
    """KIP-595 "check quorum" (thesis 6.2): no fetches from a majority for an election
    timeout makes the leader resign; it never leads that epoch again."""
    net = Net([1, 2, 3])
    net.campaign(1)
    net.deliver()
    net.queue.clear()
    net.tick(1, 2 * CFG.election_ticks)
    assert net.cores[1].state == Resigned(1, 1)
    with pytest.raises(NotControllerError):
        net.cores[1].propose([b"x"])


def test_follower_refuses_proposals_and_names_the_leader() -> None:
    net = Net([1, 2, 3])
    net.campaign(2)
    net.deliver()
    with pytest.raises(NotControllerError) as info:
        net.cores[1].propose([b"x"])
    assert info.value.details["leader_id"] == 2


def test_observer_follows_but_never_votes_or_campaigns() -> None:
    """KIP-595 observers: they discover the leader by fetching any voter and replicate."""
    net = Net([1, 2, 3], observers=(9,))
    net.campaign(1)
    net.deliver()
    net.cores[1].propose([b"x"])
    net.drain(1)
    for _ in range(10):
        for node in (1, 2, 3, 9):
            net.tick(node)
        net.deliver()
    assert net.cores[9].state == Follower(1, 1) and [e.payload for e in net.applied[9]][-1] == b"x"
    net.cores[9].step(VoteRequest(2, 9, 5, 9, 99))
    net.drain(9)
    assert net.cores[9].epoch == 1 and not net.queue
    net.tick(9, 100)  # even with the leader gone, it never campaigns
    assert isinstance(net.cores[9].state, (Follower, Unattached))


def test_restarted_leader_resigns_and_a_new_epoch_follows() -> None:
    """KRaft QuorumState: a node that was leader of E restarts Resigned(E)."""
    net = Net([1, 2, 3], hard={1: HardState(4, 1, 1), 2: HardState(4, 1, 1), 3: HardState(4, 1, 1)})
    assert net.cores[1].state == Resigned(4, 1)
    net.campaign(1)
    net.deliver()
    assert net.leader().epoch == 5


def test_single_voter_commits_alone() -> None:
    net = Net([1])
    net.campaign(1)
    assert net.cores[1].is_leader
    net.cores[1].propose([b"a", b"b"])
    net.drain(1)
    assert [e.payload for e in net.applied[1] if not e.control] == [b"a", b"b"]


def test_ready_must_be_advanced_before_anything_else() -> None:
    config = RaftConfig(tick_ms=10, election_ticks=5, heartbeat_ticks=1, fetch_wait_ticks=1, pre_vote=False)
    core = RaftCore(node_id=1, voters=[1, 2, 3], log=MemoryRaftLog(), config=config, rng=random.Random(1))
    while not isinstance(core.state, Candidate):
        core.tick()
    ready = core.ready()
    assert ready.hard_state == HardState(1, 1, None) and ready.messages
    with pytest.raises(RuntimeError):
        core.tick()
    with pytest.raises(AssertionError):
        ready.check_persisted(0, HardState(99))  # hard state not persisted yet
    core.advance(ready)
    with pytest.raises(RuntimeError):
        core.advance(ready)


def test_without_pre_vote_a_candidate_bumps_the_epoch_at_once() -> None:
    """Paper 5.2 without the thesis 9.6 extension."""
    config = RaftConfig(tick_ms=10, election_ticks=5, heartbeat_ticks=1, fetch_wait_ticks=1, pre_vote=False)
    net = Net([1, 2, 3], config=config)
    net.campaign(1)
    assert net.cores[1].state == Candidate(1, 1, frozenset({1}))
    net.deliver()
    assert net.leader().node_id == 1


def test_diverging_hint_older_than_the_followers_first_epoch_truncates_it() -> None:
    """KIP-595 DivergingEpoch: the follower truncates to min(hint end offset, its own end
    offset for the hint's epoch).  Regression: the follower's only entry (offset 0, epoch
    2) was kept because the hint "epoch 1 ends at 2" was past its end, and it fetched the
    same offset forever (found by the 3-process partition test)."""
    logs = {
        1: [Entry(0, 1, b"a"), Entry(1, 1, b"b"), Entry(2, 3, b"x")],
        2: [Entry(0, 1, b"a"), Entry(1, 1, b"b"), Entry(2, 3, b"x")],
        3: [Entry(0, 2, b"stale")],
    }
    net = Net([1, 2, 3], logs=logs, hard={1: HardState(3), 2: HardState(3), 3: HardState(3)})
    net.campaign(1)
    net.deliver()
    assert [(e.offset, e.epoch) for e in net.cores[3].log.read(0, 10)] == [(0, 1), (1, 1), (2, 3), (3, 4)]


def test_the_leader_holds_an_idle_fetch_for_fetch_wait_ticks_and_answers_it_at_once_with_news() -> None:
    """KIP-595's long poll: a caught-up follower's fetch is held (``fetch_wait_ticks``) until
    the leader has something new or the wait ends; the follower resends only after that wait
    and two fetch intervals more."""
    config = RaftConfig(tick_ms=10, election_ticks=20, heartbeat_ticks=1, fetch_wait_ticks=4, fetch_max_entries=100)
    net = Net([1, 2, 3], config=config)
    net.campaign(1)
    net.deliver()
    leader = net.cores[1]
    assert leader.is_leader and net.queue == []  # every follower caught up, its fetch held

    def answers_to(node: int) -> list[FetchResponse]:
        return [m for m in net.queue if isinstance(m, FetchResponse) and m.dst == node]

    net.tick(1, 3)
    assert answers_to(2) == [] and answers_to(3) == []
    net.tick(1)
    assert [len(m.entries) for m in answers_to(2)] == [0] and [len(m.entries) for m in answers_to(3)] == [0]
    net.deliver()  # the followers fetch again at once, and are held again
    assert net.queue == []
    leader.propose([b"news"])
    net.drain(1)
    assert [[e.payload for e in m.entries] for m in answers_to(2)] == [[b"news"]]  # no wait for the tick

    follower = net.cores[2]
    net.queue.clear()  # the answer is lost: node 2's fetch is in flight for good
    net.tick(2, 5)
    assert not [m for m in net.queue if isinstance(m, FetchRequest) and m.src == 2]
    net.tick(2)
    assert [m.fetch_offset for m in net.queue if isinstance(m, FetchRequest) and m.src == 2] == [follower.log.end_offset]


def test_a_leader_behind_some_voters_epoch_steps_down_when_they_answer_its_announcement() -> None:
    """KRaft's answer to BeginQuorumEpoch (FENCED_LEADER_EPOCH): voters 4 and 5 moved to
    epoch 5 in an election that failed (here: their persisted state), then a leader was
    elected in epoch 2 without them.  Its announcements were dropped by a voter in a later
    epoch, and their pre-votes are refused while it leads (KIP-996), so they never followed it
    and it never learned of their epoch: a quorum with two voters stranded for good (the
    Raft simulation, ``test_five_voters_partitions`` seed 802769).  They now answer with
    their epoch and the leader steps down; the next election takes everyone along."""
    net = Net([1, 2, 3, 4, 5], hard={4: HardState(5, 4), 5: HardState(5, 4)})
    apart = {4, 5}
    net.campaign(1)
    net.deliver(keep=lambda m: m.src not in apart and m.dst not in apart)
    leader = net.cores[1]
    assert leader.is_leader and leader.epoch < 5
    net.queue.clear()  # healed from here on
    net.tick(1)  # the next heartbeat announces the epoch again to the voters that never fetched
    assert {m.dst for m in net.queue if isinstance(m, BeginQuorumEpoch)} == apart
    net.deliver()
    assert not leader.is_leader and leader.epoch == 5
    new = net.elect(1)
    assert new.epoch > 5 and all(c.epoch == new.epoch and c.leader_id == new.node_id for c in net.cores.values())


def test_a_pre_vote_from_a_later_epoch_moves_the_quorum_to_it() -> None:
    """KRaft: a pre-vote request carrying a later epoch moves its receiver to that epoch
    (the sender got there in an election, which it could only start after winning a
    pre-vote).  A voter that fetched from the leader, then moved to a later epoch in an
    election that failed, was stranded: its pre-votes were refused while the leader lived,
    and the leader, which announces itself only to voters that never fetched, never learned of
    its epoch (the Raft simulation, ``test_five_voters_partitions`` seed 1002371)."""
    net = Net([1, 2, 3])
    net.campaign(1)
    net.deliver()
    leader = net.leader()
    assert leader is net.cores[1] and leader.epoch == 1
    net.queue.clear()
    log = net.cores[3].log
    for node in (1, 2):  # node 3, in epoch 2 after an election it lost, asks again
        net.cores[node].step(VoteRequest(3, node, 2, log.last_epoch, log.end_offset, pre_vote=True))
        net.drain(node)
        assert net.cores[node].epoch == 2 and not net.cores[node].is_leader
    answers = [m for m in net.queue if isinstance(m, VoteResponse)]
    assert {m.epoch for m in answers} == {2} and all(m.pre_vote for m in answers)
    net.queue.clear()
    new = net.elect(1)
    assert new.epoch > 2 and all(c.epoch == new.epoch and c.leader_id == new.node_id for c in net.cores.values())
