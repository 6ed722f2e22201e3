"""The history checker finds each anomaly it names, and nothing in a valid history."""
from __future__ import annotations

from tests.checkers.log_history import FinalRead, Poll, Send, check


def _valid() -> list[object]:
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
    history = [
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
    history = [Send(0, b"a", True, 0)]
    assert check(history).kinds() == {"unseen"}
    assert not check(history, ignore_unseen=True)


def test_long_histories_are_checked() -> None:
    """100k polled records (a quadratic poll-order check would run past the suite timeout)."""
    n = 100_000
    history: list[object] = [Send(0, b"%d" % i, True, i) for i in range(n)]
    history += [Poll("c", 0, tuple((i, b"%d" % i) for i in range(k, min(k + 500, n)))) for k in range(0, n, 500)]
    history.append(FinalRead(0, tuple((i, b"%d" % i) for i in range(n))))
    assert not check(history)
    history.append(Poll("c", 0, ((n - 1, b"%d" % (n - 1)),)))  # a re-read without a seek
    assert check(history).kinds() == {"nonmonotonic-poll"}
