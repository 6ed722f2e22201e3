"""The history checker finds each anomaly it names, and nothing in a valid history."""
from __future__ import annotations

from tests.checkers.log_history import FinalRead, Op, Poll, Send, check


def _valid() -> list[Op]:
    return [
        Send(0, b"a", True, 0),
        Send(0, b"b", True, 1),
        Send(1, b"c", True, 0),
        Poll("c1", 0, ((0, b"a"),)),
        Poll("c1", 0, ((1, b"b"),)),
        Poll("c1", 1, ((0, b"c"),)),
        FinalRead(0, ((0, b"a"), (1, b"b"))),
        FinalRead(1, ((0, b"c"),)),
    ]


def test_valid_history_has_no_anomalies() -> None:
    result = check(_valid())
    assert not result, str(result)


def test_lost_write() -> None:
    history = _valid()[:-2] + [FinalRead(0, ((0, b"a"),)), FinalRead(1, ((0, b"c"),))]
    result = check(history)
    assert result.kinds() >= {"lost-write"}
    assert "b'b'" in str(result.of("lost-write")[0])


def test_duplicate() -> None:
    history = _valid()[:-2] + [FinalRead(0, ((0, b"a"), (1, b"b"), (2, b"a"))), FinalRead(1, ((0, b"c"),))]
    assert "duplicate" in check(history).kinds()


def test_inconsistent_offsets() -> None:
    history = _valid() + [Poll("c2", 0, ((1, b"z"),))]
    assert "inconsistent-offsets" in check(history).kinds()


def test_nonmonotonic_poll_and_seek_resets() -> None:
    history = _valid() + [Poll("c1", 0, ((0, b"a"),))]
    assert "nonmonotonic-poll" in check(history).kinds()
    reset = _valid() + [Poll("c1", 0, ((0, b"a"),), after_seek=True)]
    assert not check(reset)


def test_poll_skip() -> None:
    history: list[Op] = [
        Send(0, b"a", True, 0), Send(0, b"b", True, 1), Send(0, b"c", True, 2),
        Poll("c1", 0, ((0, b"a"),)), Poll("c1", 0, ((2, b"c"),)),
        FinalRead(0, ((0, b"a"), (1, b"b"), (2, b"c"))),
    ]
    result = check(history)
    assert result.kinds() == {"poll-skip"}


def test_aborted_read_g1a() -> None:
    history = _valid() + [Send(1, b"x", False, definite=True), Poll("c2", 1, ((1, b"x"),))]
    assert "G1a" in check(history).kinds()
    indefinite = _valid() + [Send(1, b"x", False, definite=False), Poll("c2", 1, ((1, b"x"),))]
    assert "G1a" not in check(indefinite).kinds()


def test_unseen() -> None:
    history: list[Op] = [Send(0, b"a", True, 0), Send(0, b"b", True, 1), FinalRead(0, ((1, b"b"),))]
    assert check(history).kinds() == {"unseen", "lost-write"}
    history = [Send(0, b"a", True, 0), Poll("c", 0, ((0, b"a"),)), FinalRead(0, ((0, b"a"),))]
    assert not check(history)
    assert check([Send(0, b"a", True, 0), FinalRead(0, ())], ignore_unseen=True).kinds() == {"lost-write"}


# -- the stricter checks: each proven by a history that must fail it ------------------------

def test_a_partition_without_a_final_read_is_an_error_not_a_pass() -> None:
    """Once a partition without a final read was skipped silently: a test that forgot the
    read, or read the wrong partition, passed."""
    history: list[Op] = [Send(0, b"a", True, 0), Send(1, b"b", True, 0), FinalRead(0, ((0, b"a"),))]
    result = check(history)
    assert result.kinds() == {"no-final-read", "unseen"}
    assert "partition 1" in str(result.of("no-final-read")[0])
    polled: list[Op] = [Poll("c", 2, ((0, b"x"),)), FinalRead(0, ())]
    assert check(polled).kinds() == {"no-final-read"}
    assert not check([Send(None, b"lost", False, definite=False), FinalRead(0, ())])  # nothing acked or read


def test_acknowledged_sends_of_one_producer_out_of_send_order() -> None:
    """A later send acknowledged at a lower offset than an earlier one of the same
    producer and partition (an idempotent producer's order was broken)."""
    history: list[Op] = [Send(0, b"a", True, 1, producer="p", index=0), Send(0, b"b", True, 0, producer="p", index=1),
               FinalRead(0, ((0, b"b"), (1, b"a")))]
    result = check(history)
    assert result.kinds() == {"send-order"}
    assert "send #1 acknowledged at 0, after send #0 at 1" in str(result)
    other: list[Op] = [Send(0, b"a", True, 1, producer="p", index=0), Send(0, b"b", True, 0, producer="q", index=1),
             FinalRead(0, ((0, b"b"), (1, b"a")))]
    assert not check(other)                              # two producers: no order between them


def test_acknowledged_sends_stored_out_of_send_order_in_the_final_read() -> None:
    """The acknowledgements were in order, but the log holds them the other way round (and
    the offsets the acks named are gone: a lost write as well)."""
    history: list[Op] = [Send(0, b"a", True, 0, producer="p", index=0), Send(0, b"b", True, 1, producer="p", index=1),
               FinalRead(0, ((0, b"x"), (1, b"y"), (2, b"b"), (3, b"a")))]
    result = check(history)
    assert "send-order" in result.kinds()
    assert "holds send #1 at 2, before send #0 at 3" in str(result)


def test_a_failed_send_that_may_have_been_written_carries_no_order_promise() -> None:
    """A request the client gave up on can still be appended after later sends."""
    history: list[Op] = [Send(0, b"a", True, 0, producer="p", index=0), Send(0, b"b", False, definite=False, producer="p", index=1),
               Send(0, b"c", True, 1, producer="p", index=2),
               FinalRead(0, ((0, b"a"), (1, b"c"), (2, b"b")))]
    assert not check(history)


def test_a_poll_of_a_record_later_truncated_is_flagged() -> None:
    """A consumer read an unacknowledged record at offset 2 that the log later lost (and
    nothing took its place): the poll saw a record that does not exist."""
    history: list[Op] = [Send(0, b"a", True, 0), Send(0, b"b", True, 1), Send(0, b"c", False, definite=False),
               Poll("c1", 0, ((0, b"a"), (1, b"b"), (2, b"c"))),
               FinalRead(0, ((0, b"a"), (1, b"b")))]
    result = check(history)
    assert result.kinds() == {"truncated-read"}
    assert "[2]" in str(result)


def test_a_definite_failure_of_unknown_partition_that_becomes_visible_is_g1a() -> None:
    history: list[Op] = [Send(None, b"never", False, definite=True), Send(3, b"a", True, 0),
               FinalRead(3, ((0, b"a"), (1, b"never")))]
    assert check(history).kinds() == {"G1a"}


def test_long_histories_are_checked() -> None:
    """100k polled records (a quadratic poll-order check would run past the suite timeout)."""
    n = 100_000
    history: list[Op] = [Send(0, b"%d" % i, True, i) for i in range(n)]
    history += [Poll("c", 0, tuple((i, b"%d" % i) for i in range(k, min(k + 500, n)))) for k in range(0, n, 500)]
    history.append(FinalRead(0, tuple((i, b"%d" % i) for i in range(n))))
    assert not check(history)
    history.append(Poll("c", 0, ((n - 1, b"%d" % (n - 1)),)))  # a re-read without a seek
    assert check(history).kinds() == {"nonmonotonic-poll"}


# -- transactions -------------------------------------------------------------------------------

def test_transactions_valid_history_has_no_anomalies() -> None:
    from tests.checkers.log_history import Txn, check_transactions

    ops = [Txn("t1", (("p0", b"a"), ("p1", b"b")), "committed", commit_called=5.0),
           Txn("t2", (("p0", b"c"),), "aborted"),
           Txn("t3", (("p1", b"d"),), "unknown", commit_called=7.0),
           Poll("c", "p0", ((0, b"a"),), at=6.0),
           FinalRead("p0", ((0, b"a"),)), FinalRead("p1", ((0, b"b"),))]
    assert not check_transactions(ops)


def test_transactions_anomalies_are_found() -> None:
    from tests.checkers.log_history import Txn, check_transactions

    ops = [Txn("t1", (("p0", b"a"), ("p1", b"b")), "committed", commit_called=5.0),
           Txn("t2", (("p0", b"c"),), "aborted"),
           Txn("t3", (("p0", b"d"), ("p1", b"e")), "unknown", commit_called=7.0),
           Poll("c", "p0", ((0, b"a"),), at=4.0),          # before t1's commit was called
           Poll("c", "p0", ((1, b"c"),), at=8.0),          # an aborted value
           FinalRead("p0", ((0, b"a"), (1, b"c"), (2, b"d"))), FinalRead("p1", ())]
    kinds = check_transactions(ops).kinds()
    assert kinds == {"dirty-read", "aborted-read", "lost-committed-write", "partial-transaction"}
