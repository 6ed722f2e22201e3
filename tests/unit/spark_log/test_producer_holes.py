"""A batch that fails for good without being written leaves a hole in its partition's
sequences; the batches behind it move to a fresh id (``_sequence_reset``) and are delivered.
Found by a busy CI run: when the failed batch's first attempt had timed out (so it "may
have been written"), a final RECORD_TOO_LARGE did not count as unwritten, the hole was not
moved past, and the batch behind it failed out of order.  Over the fake cluster of
``tests/support/fake_produce.py``, every answer given by the test."""
from __future__ import annotations

import pytest

from spark_log import errors
from spark_log.errors import ErrorCode
from tests.support.fake_produce import FakeCluster, answer_all, bytes_topic, fake_producer, ok
from tests.support.wait import wait_until


def test_the_batches_behind_one_too_large_after_a_timeout_are_delivered(monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = FakeCluster({"t": bytes_topic()})
    producer = fake_producer(monkeypatch, cluster, linger_ms=0, delivery_timeout_ms=60_000)
    try:
        big = producer.send("t", b"big", partition=0)            # sequence 0
        wait_until(lambda: len(cluster.calls()) == 1, timeout=10, message="the first call")
        small = producer.send("t", b"small", partition=0)        # sequence 1, pipelined behind it
        wait_until(lambda: len(cluster.calls()) == 2, timeout=10, message="the second call")
        (_, _, first), = cluster.calls()[0].headers()
        cluster.calls()[0].cancel()                                # the first attempt's fate unknown
        wait_until(lambda: len(cluster.calls()) == 3, timeout=10, message="the retry of the first")
        cluster.calls()[2].answer(answer_all(ErrorCode.RECORD_TOO_LARGE))
        with pytest.raises(errors.RecordTooLargeError) as refused:
            big.result(timeout=10)
        assert refused.value.maybe_written is False
        cluster.calls()[1].answer(answer_all(ErrorCode.OUT_OF_ORDER_SEQUENCE))   # waited for sequence 0
        wait_until(lambda: len(cluster.calls()) == 4, timeout=10, message="the retry of the second")
        (_, _, retried), = cluster.calls()[3].headers()
        assert retried.producer_id != first.producer_id and retried.base_sequence == 0
        cluster.calls()[3].answer(ok)
        assert small.result(timeout=10) == (0, 100)
    finally:
        for call in cluster.unanswered():
            call.cancel()
        producer.close(timeout=5)
