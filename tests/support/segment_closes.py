"""Which segments a partition closes, and whether it held its lock then.

The last close of a deleted segment file frees its pages (31 ms for 127 MiB on the
project's machines); a partition that did it under its lock would stall its appends and
reads meanwhile, so tests of retention and compaction check it never does."""
from __future__ import annotations

import pytest

from brokers.log.segment import Segment
from brokers.partition import Partition


def watch_closes(monkeypatch: pytest.MonkeyPatch, partition: Partition) -> list[tuple[Segment, bool]]:
    """From now on (until the test ends), every close of an open segment appends
    ``(segment, whether partition's lock was held)`` to the returned list."""
    closes: list[tuple[Segment, bool]] = []
    real_close = Segment.close

    def watched(segment: Segment) -> None:
        if segment._fd >= 0:
            closes.append((segment, partition._cond._is_owned()))  # type: ignore[attr-defined]
        real_close(segment)

    monkeypatch.setattr(Segment, "close", watched)
    return closes


def removed(before: list[Segment], partition: Partition) -> list[Segment]:
    """The segments of ``before`` the partition's log no longer holds."""
    return [s for s in before if all(s is not kept for kept in partition._log._segments)]
