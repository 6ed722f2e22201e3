"""The closed core: role logic returns effects, only ``RaftCore`` applies them, and the
Ready contract (persist -> send -> apply -> advance, ``core.py``) is checked by the core."""
from __future__ import annotations

import ast
import random
from pathlib import Path

import pytest

import brokers.raft
from brokers.raft import election
from brokers.raft.core import RaftCore
from brokers.raft.effects import (
    AppendAsFollower, Become, RaiseHighWatermark, ResetElectionTimer, Send, TruncateLog,
)
from brokers.raft.log import MemoryRaftLog
from brokers.raft.messages import (
    Entry, FetchRequest, FetchResponse, HardState, SnapshotId, VoteRequest, VoteResponse,
)
from brokers.raft.replication import FollowerReplication
from brokers.raft.states import Follower, Unattached, Voted
from spark_log.config import RaftConfig

CFG = RaftConfig(tick_ms=10, election_ticks=5, heartbeat_ticks=1, fetch_wait_ticks=1, fetch_max_entries=100)
RAFT_DIR = Path(brokers.raft.__file__).parent


def _imports(module: str) -> set[str]:
    tree = ast.parse((RAFT_DIR / f"{module}.py").read_text())
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            found.add(node.module or "")
            found.update(alias.name for alias in node.names if node.module is None)
    return found


@pytest.mark.parametrize(("module", "other"), [("election", "replication"), ("replication", "election")])
def test_role_modules_import_neither_the_core_nor_each_other(module: str, other: str) -> None:
    imported = _imports(module)
    assert "core" not in imported and other not in imported, imported


@pytest.mark.parametrize("field", ["state", "high_watermark", "log", "applied", "now", "election_deadline", "voters"])
def test_the_cores_fields_are_read_only(field: str) -> None:
    core = RaftCore(node_id=1, voters=[1, 2, 3], log=MemoryRaftLog(), config=CFG, rng=random.Random(1))
    with pytest.raises(AttributeError):
        setattr(core, field, getattr(core, field))


def test_a_vote_is_a_list_of_effects_until_the_core_applies_it() -> None:
    """Paper 5.2: a higher epoch resets the vote, then the node votes once in it."""
    core = RaftCore(node_id=1, voters=[1, 2, 3], log=MemoryRaftLog(), config=CFG, rng=random.Random(1),
                    hard_state=HardState(1))
    request = VoteRequest(2, 1, 2, 0, 0)
    effects = election.on_vote_request(core, request, leader_heard_recently=False)
    assert effects == [Become(Unattached(2)), Become(Voted(2, 2)), ResetElectionTimer(),
                       Send(VoteResponse(1, 2, 2, True, False, None))]
    before = core.state
    assert before == Unattached(1)  # nothing changed yet
    core.step(request)
    assert core.state == Voted(2, 2)
    assert core.ready().messages == (VoteResponse(1, 2, 2, True, False, None),)


def _follower(entries: list[Entry]) -> RaftCore:
    log = MemoryRaftLog()
    log.append_as_follower(entries)
    log.flush()
    return RaftCore(node_id=2, voters=[1, 2, 3], log=log, config=CFG, rng=random.Random(2),
                    hard_state=HardState(3, None, 1))


def test_fetched_entries_are_appended_by_the_core_and_the_next_fetch_continues_after_them() -> None:
    """KIP-595 Fetch: append, raise the high watermark to min(leader's, own end), fetch on."""
    core = _follower([Entry(0, 1, b"a")])
    assert core.state == Follower(3, 1)
    new = (Entry(1, 3, b"b"), Entry(2, 3, b"c"))
    response = FetchResponse(1, 2, 3, 1, 1, 1, entries=new, high_watermark=9)
    effects = FollowerReplication().on_fetch_response(core, response)
    assert effects == [ResetElectionTimer(), AppendAsFollower(new), RaiseHighWatermark(3),
                       Send(FetchRequest(2, 1, 3, 3, 3))]
    assert core.log.end_offset == 1  # the handler appended nothing itself


def test_a_diverging_hint_truncates_and_refetches_from_the_new_end() -> None:
    """KIP-595 DivergingEpoch: truncate to min(hint, own end of the hint's epoch)."""
    core = _follower([Entry(0, 1, b"a"), Entry(1, 2, b"stale")])
    response = FetchResponse(1, 2, 3, 1, 2, 2, diverging=SnapshotId(1, 1))
    effects = FollowerReplication().on_fetch_response(core, response)
    assert effects == [ResetElectionTimer(), TruncateLog(1), Send(FetchRequest(2, 1, 3, 1, 1))]
    core.step(response)
    assert core.log.end_offset == 1 and core.ready().messages[-1] == FetchRequest(2, 1, 3, 1, 1)


def test_advance_refuses_a_ready_whose_log_flush_was_skipped() -> None:
    """The Ready contract, step 1: the log is flushed to ``flush_to_offset`` before
    messages go out; ``check_persisted`` (the shell) and ``advance`` (the core) both check."""
    core = RaftCore(node_id=1, voters=[1], log=MemoryRaftLog(), config=CFG, rng=random.Random(1))
    while not core.is_leader:
        core.tick()
    ready = core.ready()
    assert ready.flush_to_offset == 1 and ready.must_persist  # the leader-change entry
    assert ready.hard_state is not None
    with pytest.raises(AssertionError):
        ready.check_persisted(core.log.flushed_end_offset, ready.hard_state)
    with pytest.raises(RuntimeError):
        core.advance(ready)
    core.log.flush()
    ready.check_persisted(core.log.flushed_end_offset, ready.hard_state)
    core.advance(ready)
    assert core.high_watermark == 1  # a single voter commits once its own log is durable
