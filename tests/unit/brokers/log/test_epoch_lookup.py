"""Table tests of the one epoch lookup (Kafka's ``LeaderEpochFileCache.endOffsetFor`` cases)."""
from __future__ import annotations

import pytest

from brokers.log.epoch_lookup import (
    UNDEFINED_EPOCH,
    UNDEFINED_OFFSET,
    end_offset_for_epoch,
    epoch_for_offset,
    epoch_of_last_record,
)

ENTRIES = [(2, 0), (4, 10), (7, 25)]
UNKNOWN = (UNDEFINED_EPOCH, UNDEFINED_OFFSET)


@pytest.mark.parametrize("entries, epoch, leo, expected", [
    ([], 3, 40, UNKNOWN),                    # no entries
    (ENTRIES, UNDEFINED_EPOCH, 40, UNKNOWN),  # undefined epoch
    (ENTRIES, 7, 40, (7, 40)),               # the latest epoch ends at the log end
    (ENTRIES, 8, 40, UNKNOWN),               # above the latest: unknown
    (ENTRIES, 1, 40, (1, 0)),                # below every epoch: the first start
    (ENTRIES, 2, 40, (2, 10)),               # a known epoch ends where the next starts
    (ENTRIES, 3, 40, (2, 10)),               # a gap epoch answers the largest epoch below it
    (ENTRIES, 4, 40, (4, 25)),
    (ENTRIES, 6, 40, (4, 25)),
])
def test_end_offset_for_epoch(entries, epoch, leo, expected):
    assert end_offset_for_epoch(entries, epoch, leo) == expected


@pytest.mark.parametrize("offset, expected", [(-1, None), (0, 2), (9, 2), (10, 4), (24, 4), (25, 7), (1000, 7)])
def test_epoch_for_offset(offset, expected):
    assert epoch_for_offset(ENTRIES, offset) == expected


@pytest.mark.parametrize("entries, leo, expected", [
    ([], 0, UNDEFINED_EPOCH), (ENTRIES, 0, UNDEFINED_EPOCH), (ENTRIES, 1, 2), (ENTRIES, 10, 2),
    (ENTRIES, 11, 4), (ENTRIES, 25, 4), (ENTRIES, 26, 7),
])
def test_epoch_of_last_record(entries, leo, expected):
    assert epoch_of_last_record(entries, leo) == expected
