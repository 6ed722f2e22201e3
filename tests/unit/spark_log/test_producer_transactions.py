"""The client's side of a transaction (``spark_log/_producer_txn.py``) against a scripted
coordinator: what the producer keeps from the coordinator's answers."""
from __future__ import annotations

from types import SimpleNamespace
from typing import Any, Callable

import pytest

from spark_log import errors
from spark_log._producer_txn import ProducerTransactions, TxnPhase


class ScriptedRpc:
    """Answers InitProducerId and AddPartitions; EndTxn answers with ``end``."""

    timeout_s = 30.0

    def __init__(self, end: Callable[[Any], Any]) -> None:
        self.end = end
        self.inits = 0

    def call(self, transactional_id: str, method: str, request: Any, **_: Any) -> Any:
        if method == "InitProducerId":
            self.inits += 1
            return SimpleNamespace(producer_id=5, producer_epoch=2 * self.inits, committed_label=-1)
        if method == "AddPartitions":
            return SimpleNamespace()
        if method == "EndTxn":
            return self.end(request)
        raise AssertionError(method)


def _transactions(end: Callable[[Any], Any]) -> ProducerTransactions:
    txn = ProducerTransactions(None, "tx", 10_000, request_timeout_s=30.0)  # type: ignore[arg-type]
    txn.rpc = ScriptedRpc(end)  # type: ignore[assignment]
    txn.init()
    txn.begin()
    txn.add("t", 0)
    return txn


def test_a_producer_goes_on_under_the_producer_id_end_txn_answers() -> None:
    """The coordinator hands a new producer id once the old one's epochs ran out."""
    txn = _transactions(lambda request: SimpleNamespace(producer_id=77, producer_epoch=0))
    assert txn.end(True, lambda: None) == (77, 0)
    assert (txn.producer_id, txn.epoch, txn.phase) == (77, 0, TxnPhase.READY)


def test_an_answer_without_a_producer_id_keeps_the_old_one() -> None:
    """A broker that predates new ids in EndTxn leaves the field 0."""
    txn = _transactions(lambda request: SimpleNamespace(producer_id=0, producer_epoch=request.producer_epoch + 1))
    assert txn.end(True, lambda: None) == (5, 3)


def test_after_a_timeout_the_producer_can_be_initialised_again() -> None:
    def timed_out(request: Any) -> Any:
        raise errors.TransactionTimedOutError("aborted after its timeout; initialise the producer again")

    txn = _transactions(timed_out)
    with pytest.raises(errors.TransactionTimedOutError):
        txn.end(True, lambda: None)
    assert txn.init() == (5, 4)
    assert txn.phase is TxnPhase.READY


def test_a_fenced_producer_refuses_everything() -> None:
    def fenced(request: Any) -> Any:
        raise errors.ProducerFencedError("epoch 3 took over")

    txn = _transactions(fenced)
    with pytest.raises(errors.ProducerFencedError):
        txn.end(True, lambda: None)
    with pytest.raises(errors.ProducerFencedError):
        txn.init()
