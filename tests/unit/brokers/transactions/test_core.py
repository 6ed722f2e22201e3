"""The transaction coordinator's pure core (``TxnShard``): states, fencing, participants,
timeouts, the Spark label rules, and records that replay to the same state."""
from __future__ import annotations

import itertools

import pytest

from brokers.transactions.core import TxnShard
from brokers.transactions.model import TxnConfig, TxnState
from brokers.transactions.records import decode, encode
from spark_log import errors

T = "txn-a"


def _ids() -> "itertools.count[int]":
    return itertools.count(1000)


def _shard() -> tuple[TxnShard, "itertools.count[int]"]:
    return TxnShard(TxnConfig(max_timeout_ms=60_000)), _ids()


def _do(shard: TxnShard, outcome):  # type: ignore[no-untyped-def]
    shard.finish(outcome)
    if outcome.error is not None:
        raise outcome.error
    return outcome.answer


def _init(shard: TxnShard, ids: "itertools.count[int]", timeout_ms: int = 10_000) -> tuple[int, int, int]:
    return _do(shard, shard.init(T, timeout_ms, 0, lambda: next(ids)))


def _complete(shard: TxnShard) -> None:
    for meta in shard.preparing():
        _do(shard, shard.complete(meta.transactional_id, 1))


def test_producer_transaction_commit_moves_the_epoch_on() -> None:
    shard, ids = _shard()
    pid, epoch, _ = _init(shard, ids)
    assert (pid, epoch) == (1000, 0)
    _do(shard, shard.add_partitions(T, pid, epoch, [("t", 0), ("t", 1)], 5))
    meta = shard.get(T)
    assert meta is not None and meta.state is TxnState.ONGOING and meta.started_ms == 5
    shard.verify(T, pid, epoch, ("t", 1))
    with pytest.raises(errors.InvalidTxnStateError):
        shard.verify(T, pid, epoch, ("t", 2))  # never added
    _do(shard, shard.end(T, pid, epoch, True, 6))
    prepared = shard.get(T)
    assert prepared is not None and prepared.state is TxnState.PREPARE_COMMIT
    assert [(p.producer_id, commit) for p, commit in prepared.markers()] == [(pid, True)]
    _complete(shard)
    done = shard.get(T)
    assert done is not None and done.state is TxnState.COMPLETE_COMMIT and done.producer_epoch == 1
    # a retry of the same EndTxn answers the new epoch; the old epoch is otherwise fenced
    assert _do(shard, shard.end(T, pid, 0, True, 7)) == 1
    with pytest.raises(errors.ProducerFencedError):
        shard.add_partitions(T, pid, 0, [("t", 0)], 8)
    with pytest.raises(errors.InvalidTxnStateError):
        shard.verify(T, pid, 1, ("t", 0))  # nothing open any more: a late write is refused


def test_init_fences_the_old_producer_and_aborts_its_open_transaction() -> None:
    shard, ids = _shard()
    pid, epoch, _ = _init(shard, ids)
    _do(shard, shard.add_partitions(T, pid, epoch, [("t", 0)], 1))
    with pytest.raises(errors.ConcurrentTransactionsError):
        _init(shard, ids)
    meta = shard.get(T)
    assert meta is not None and meta.state is TxnState.PREPARE_ABORT
    assert [(p.producer_id, p.epoch, commit) for p, commit in meta.markers()] == [(pid, 0, False)]
    _complete(shard)
    pid2, epoch2, _ = _init(shard, ids)
    assert pid2 == pid and epoch2 == 2
    with pytest.raises(errors.ProducerFencedError):
        shard.end(T, pid, epoch, True, 3)


def test_timeout_aborts_and_the_owner_learns_it_timed_out() -> None:
    shard, ids = _shard()
    pid, epoch, _ = _init(shard, ids, timeout_ms=1_000)
    _do(shard, shard.add_partitions(T, pid, epoch, [("t", 0)], 100))
    assert _do(shard, shard.tick(1_100)) == []
    assert _do(shard, shard.tick(1_101)) == [T]
    with pytest.raises(errors.TransactionTimedOutError):
        shard.end(T, pid, epoch, True, 1_200)
    _complete(shard)
    meta = shard.get(T)
    assert meta is not None and meta.state is TxnState.COMPLETE_ABORT and meta.producer_epoch == 1


def test_timeout_above_the_maximum_is_refused() -> None:
    shard, ids = _shard()
    with pytest.raises(errors.InvalidTransactionTimeoutError):
        shard.init(T, 60_001, 0, lambda: next(ids))
    with pytest.raises(errors.InvalidRequestError):
        shard.init("", 1000, 0, lambda: next(ids))
    with pytest.raises(errors.TransactionalIdNotFoundError):
        shard.add_partitions("never", 1, 0, [("t", 0)], 0)


def test_spark_batch_commits_only_the_listed_participants() -> None:
    shard, ids = _shard()
    owner, epoch, committed = _init(shard, ids)
    assert committed == -1
    a, _, already = _do(shard, shard.join(T, owner, epoch, 7, 0, lambda: next(ids)))
    b, _, _ = _do(shard, shard.join(T, owner, epoch, 7, 0, lambda: next(ids)))
    retry, _, _ = _do(shard, shard.join(T, owner, epoch, 7, 0, lambda: next(ids)))  # task attempt 2
    assert not already and len({a, b, retry}) == 3
    for pid in (a, b, retry):
        _do(shard, shard.add_partitions(T, pid, 0, [("t", pid % 2)], 1))
    with pytest.raises(errors.InvalidTxnStateError):
        shard.join(T, owner, epoch, 8, 2, lambda: next(ids))  # batch 8 while 7 is open
    _do(shard, shard.end(T, owner, epoch, True, 3, label=7, participants=[b, retry]))
    meta = shard.get(T)
    assert meta is not None
    assert sorted((p.producer_id, c) for p, c in meta.markers()) == sorted([(a, False), (b, True), (retry, True)])
    _complete(shard)
    done = shard.get(T)
    assert done is not None and done.committed_label == 7 and done.producer_epoch == epoch  # the owner wrote nothing
    # a replay of batch 7 (a new driver) finds it committed: tasks write nothing, the commit is a no-op
    owner2, epoch2, committed2 = _init(shard, ids)
    assert committed2 == 7
    assert _do(shard, shard.join(T, owner2, epoch2, 7, 4, lambda: next(ids)))[2] is True
    assert _do(shard, shard.end(T, owner2, epoch2, True, 5, label=7, participants=[])) == epoch2


def test_a_new_driver_aborts_the_batch_the_old_one_left_open_and_fences_its_tasks() -> None:
    shard, ids = _shard()
    owner, epoch, _ = _init(shard, ids)
    a, _, _ = _do(shard, shard.join(T, owner, epoch, 3, 0, lambda: next(ids)))
    _do(shard, shard.add_partitions(T, a, 0, [("t", 0)], 0))
    with pytest.raises(errors.ConcurrentTransactionsError):
        _init(shard, ids)  # the old driver died before its commit
    _complete(shard)
    owner2, epoch2, _ = _init(shard, ids)
    with pytest.raises(errors.ProducerFencedError):
        shard.join(T, owner, epoch, 3, 1, lambda: next(ids))  # a zombie task of the old run
    with pytest.raises(errors.InvalidTxnStateError):
        shard.verify(T, a, 0, ("t", 0))  # the old attempt's late write
    fresh, _, already = _do(shard, shard.join(T, owner2, epoch2, 3, 2, lambda: next(ids)))
    assert not already and fresh != a
    with pytest.raises(errors.InvalidTxnStateError):
        shard.end(T, owner2, epoch2, True, 3, label=3, participants=[a])  # not a participant of this attempt


def test_empty_batch_commit_records_its_label() -> None:
    shard, ids = _shard()
    owner, epoch, _ = _init(shard, ids)
    _do(shard, shard.end(T, owner, epoch, True, 1, label=4, participants=[]))
    meta = shard.get(T)
    assert meta is not None and meta.committed_label == 4


def test_records_round_trip_and_replay_gives_the_same_state() -> None:
    shard, ids = _shard()
    replayed = TxnShard()
    owner, epoch, _ = _init(shard, ids)
    log = []
    for outcome in (shard.join(T, owner, epoch, 1, 0, lambda: next(ids)),):
        shard.finish(outcome)
        log.extend(outcome.records)
    pid = shard.get(T).participants[0].producer_id  # type: ignore[union-attr]
    outcome = shard.add_partitions(T, pid, 0, [("t", 0), ("u", 3)], 1)
    shard.finish(outcome)
    log.extend(outcome.records)
    outcome = shard.end(T, owner, epoch, True, 2, label=1, participants=[pid])
    shard.finish(outcome)
    log.extend(outcome.records)
    for meta in log:
        replayed.apply(*decode(*encode(meta)))
    assert replayed.get(T) == shard.get(T)
    with pytest.raises(errors.CorruptRecordError):
        decode(b'["txn","x"]', b'{"v":9}')
