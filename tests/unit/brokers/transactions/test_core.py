"""The transaction coordinator's pure core (``TxnShard``): states, fencing, participants,
timeouts, the Spark label rules, and records that replay to the same state."""
from __future__ import annotations

import itertools
from dataclasses import replace
from typing import Callable

import pytest

from brokers.transactions.core import TxnShard
from brokers.transactions.model import MAX_EPOCH, TxnConfig, TxnState
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


def _complete(shard: TxnShard, new_producer_id: Callable[[], int] = lambda: 9_999) -> None:
    for meta in shard.preparing():
        _do(shard, shard.complete(meta.transactional_id, 1, new_producer_id))


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


def test_a_fenced_producer_is_not_handed_the_epoch_that_fenced_it() -> None:
    """A new producer's init aborts the old one's open transaction and gives up before its
    retry (it crashed, or it is in its backoff).  The old producer's abort after that abort
    completed is no retry of it: it stays fenced, and never reaches a commit."""
    shard, ids = _shard()
    pid, epoch, _ = _init(shard, ids)
    _do(shard, shard.add_partitions(T, pid, epoch, [("t", 0)], 1))
    with pytest.raises(errors.ConcurrentTransactionsError):
        _init(shard, ids)  # the new producer
    _complete(shard)
    with pytest.raises(errors.ProducerFencedError):
        shard.end(T, pid, epoch, False, 3)
    with pytest.raises(errors.ProducerFencedError):
        shard.end(T, pid, epoch, True, 3)
    meta = shard.get(T)
    assert meta is not None and meta.state is TxnState.COMPLETE_ABORT and meta.producer_epoch == 1
    assert _init(shard, ids)[:2] == (pid, 2)


def test_an_owner_whose_epochs_ran_out_goes_on_under_a_new_producer_id() -> None:
    """Each commit moves the owner to the next epoch, and a frame header's epoch is an
    int16 (the markers go one above the data): the commit in ``MAX_EPOCH`` completes with a
    new producer id at epoch 0, which EndTxn answers; a retry of that EndTxn is answered
    too, and the old id is fenced."""
    shard, ids = _shard()
    pid, _, _ = _init(shard, ids)
    shard.apply(T, replace(shard.get(T), producer_epoch=MAX_EPOCH))  # type: ignore[arg-type]
    _do(shard, shard.add_partitions(T, pid, MAX_EPOCH, [("t", 0)], 1))
    _do(shard, shard.end(T, pid, MAX_EPOCH, True, 2))
    assert [(p.producer_id, p.epoch) for p, _ in shard.get(T).markers()] == [(pid, MAX_EPOCH)]  # type: ignore[union-attr]
    _complete(shard, lambda: next(ids))
    done = shard.get(T)
    assert done is not None and done.state is TxnState.COMPLETE_COMMIT
    new_pid = done.producer_id
    assert new_pid != pid and done.producer_epoch == 0
    assert _do(shard, shard.end(T, pid, MAX_EPOCH, True, 3)) == 0  # the lost answer's retry
    with pytest.raises(errors.ProducerFencedError):
        shard.add_partitions(T, pid, MAX_EPOCH + 1, [("t", 0)], 4)
    _do(shard, shard.add_partitions(T, new_pid, 0, [("t", 0)], 5))
    _do(shard, shard.end(T, new_pid, 0, True, 6))
    _complete(shard, lambda: next(ids))
    assert (shard.get(T).producer_id, shard.get(T).producer_epoch) == (new_pid, 1)  # type: ignore[union-attr]


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


def _join(shard: TxnShard, ids: "itertools.count[int]", label: int, run: str, now: int = 0) -> tuple[int, int, bool]:
    return _do(shard, shard.join(T, label, run, 10_000, now, lambda: next(ids)))


def test_spark_batch_commits_only_the_listed_participants() -> None:
    shard, ids = _shard()
    a, _, already = _join(shard, ids, 7, "run1")
    b, _, _ = _join(shard, ids, 7, "run1")
    retry, _, _ = _join(shard, ids, 7, "run1")  # task attempt 2 of a's task
    assert not already and len({a, b, retry}) == 3
    for pid in (a, b, retry):
        _do(shard, shard.add_partitions(T, pid, 0, [("t", pid % 2)], 1))
    shard.verify(T, b, 0, ("t", b % 2))
    with pytest.raises(errors.InvalidTxnStateError):
        shard.init(T, 1000, 0, lambda: next(ids))  # a Spark sink's id is not a producer's
    _do(shard, shard.end_batch(T, 7, "run1", True, [b, retry], 3))
    meta = shard.get(T)
    assert meta is not None
    assert sorted((p.producer_id, c) for p, c in meta.markers()) == sorted([(a, False), (b, True), (retry, True)])
    _complete(shard)
    done = shard.get(T)
    assert done is not None and done.committed_label == 7 and done.state is TxnState.COMPLETE_COMMIT
    # a replay of batch 7 (the driver died after the commit) finds it committed: tasks write nothing
    assert _join(shard, ids, 7, "run2") == (-1, -1, True)
    _do(shard, shard.end_batch(T, 7, "run2", True, [], 5))  # and the driver's commit is a no-op
    with pytest.raises(errors.InvalidTxnStateError):
        shard.verify(T, a, 0, ("t", a % 2))  # an aborted attempt's late write is refused


def test_a_new_run_aborts_the_batch_the_old_one_left_open() -> None:
    shard, ids = _shard()
    a, _, _ = _join(shard, ids, 3, "old")
    _do(shard, shard.add_partitions(T, a, 0, [("t", 0)], 0))
    with pytest.raises(errors.ConcurrentTransactionsError):
        _join(shard, ids, 3, "new")  # the old driver died before its commit: its batch is aborted first
    meta = shard.get(T)
    assert meta is not None and meta.state is TxnState.PREPARE_ABORT
    assert [(p.producer_id, c) for p, c in meta.markers()] == [(a, False)]
    _complete(shard)
    fresh, _, already = _join(shard, ids, 3, "new")
    assert not already and fresh != a
    with pytest.raises(errors.InvalidTxnStateError):
        shard.end_batch(T, 3, "old", True, [a], 3)  # the old driver's commit cannot land any more
    with pytest.raises(errors.InvalidTxnStateError):
        shard.end_batch(T, 3, "new", True, [a], 3)  # nor can a participant of the aborted attempt
    with pytest.raises(errors.InvalidTxnStateError):
        _join(shard, ids, 2, "new")  # a zombie of an earlier batch
    _do(shard, shard.end_batch(T, 3, "new", True, [fresh], 4))
    _complete(shard)
    assert shard.get(T).committed_label == 3  # type: ignore[union-attr]


def test_a_spark_batch_open_past_its_timeout_cannot_commit() -> None:
    shard, ids = _shard()
    a, _, _ = _do(shard, shard.join(T, 1, "r", 1_000, 0, lambda: next(ids)))
    assert _do(shard, shard.tick(1_001)) == [T]
    _complete(shard)
    with pytest.raises(errors.InvalidTxnStateError):
        shard.end_batch(T, 1, "r", True, [a], 1_002)
    _do(shard, shard.end_batch(T, 1, "r", False, [], 1_003))  # an abort is fine
    with pytest.raises(errors.InvalidRequestError):
        shard.join(T, -1, "r", 1_000, 0, lambda: next(ids))


def test_records_round_trip_and_replay_gives_the_same_state() -> None:
    shard, ids = _shard()
    replayed = TxnShard()
    log = []
    for outcome in (shard.join(T, 1, "run", 5_000, 0, lambda: next(ids)),):
        shard.finish(outcome)
        log.extend(outcome.records)
    pid = shard.get(T).participants[0].producer_id  # type: ignore[union-attr]
    outcome = shard.add_partitions(T, pid, 0, [("t", 0), ("u", 3)], 1)
    shard.finish(outcome)
    log.extend(outcome.records)
    outcome = shard.end_batch(T, 1, "run", True, [pid], 2)
    shard.finish(outcome)
    log.extend(outcome.records)
    for meta in log:
        replayed.apply(*decode(*encode(meta)))
    assert replayed.get(T) == shard.get(T)
    switched = replace(shard.get(T), producer_id=7, prev_producer_id=6, prev_epoch=MAX_EPOCH)  # type: ignore[arg-type]
    assert decode(*encode(switched)) == (T, switched)
    key, value = encode(switched)  # a record written before prev_producer_id existed
    assert decode(key, value.replace(b',"prev_pid":6', b''))[1] == replace(switched, prev_producer_id=-1)
    with pytest.raises(errors.CorruptRecordError):
        decode(b'["txn","x"]', b'{"v":9}')
