"""Reader option ``groupId`` without Spark or brokers: option rules, the ``startingOffsets=group``
math (``offsets.from_group``) and ``GroupProgress`` (publish only changes, never fail the
query, retry later, pickle without the client)."""
from __future__ import annotations

import pickle
from typing import Any, Mapping

import pytest

from connectors import client
from connectors import offsets as off
from connectors.group_progress import METADATA, GroupProgress
from connectors.options import ReaderOptions
from spark_log.errors import InvalidConfigError, NonEmptyGroupError

TP = off.TopicPartition


def test_group_id_and_starting_offsets_group() -> None:
    parsed = ReaderOptions.parse({"subscribe": "t", "groupId": " g ", "startingOffsets": "group"})
    assert parsed.group_id == "g" and parsed.starting_offsets == "group"
    parsed.check_streaming()
    with pytest.raises(InvalidConfigError, match="groupId"):
        ReaderOptions.parse({"subscribe": "t", "startingOffsets": "group"})
    with pytest.raises(InvalidConfigError, match="groupId"):
        ReaderOptions.parse({"subscribe": "t", "groupId": "  "})
    with pytest.raises(InvalidConfigError, match="groupId"):
        ReaderOptions.parse({"subscribe": "t", "groupId": "g"}).check_batch()
    with pytest.raises(InvalidConfigError, match="endingOffsets"):
        ReaderOptions.parse({"subscribe": "t", "endingOffsets": "group"})


def test_from_group_clamps_and_falls_back_to_earliest() -> None:
    earliest = {TP("t", 0): 5, TP("t", 1): 0, TP("t", 2): 0, TP("t", 3): 0}
    latest = {TP("t", 0): 50, TP("t", 1): 10, TP("t", 2): 10, TP("t", 3): 10}
    committed = {TP("t", 0): 2, TP("t", 1): 7, TP("t", 2): 99, TP("gone", 0): 3}
    assert off.from_group(committed, earliest, latest) == {
        TP("t", 0): 5,   # below the log start (retention): its earliest
        TP("t", 1): 7,   # as committed
        TP("t", 2): 10,  # past the end: the end
        TP("t", 3): 0,   # never committed: the earliest
    }


class FakeClient:
    def __init__(self) -> None:
        self.calls: list[dict[TP, int]] = []
        self.fail: Exception | None = None

    def commit_group(self, admin: Any, group: str, offsets: Mapping[TP, int], metadata: str) -> None:
        assert group == "g" and metadata == METADATA
        if self.fail is not None:
            raise self.fail
        self.calls.append(dict(offsets))


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeClient:
    fake = FakeClient()
    monkeypatch.setattr(client, "commit_group", fake.commit_group)
    return fake


def test_publish_commits_changes_only_and_survives_refusals(fake: FakeClient) -> None:
    now = [100.0]
    progress = GroupProgress("g", "127.0.0.1:1", retry_s=5.0, clock=lambda: now[0])
    progress._admin = object()  # type: ignore[assignment]  # never used by the fake
    first = {TP("t", 0): 3}
    assert progress.publish(first) and not progress.publish(dict(first)) and not progress.publish({})
    fake.fail = NonEmptyGroupError("members")
    assert not progress.publish({TP("t", 0): 4})
    fake.fail = None
    assert not progress.publish({TP("t", 0): 4})  # waits retry_s after a failure
    now[0] += 5.0
    assert progress.publish({TP("t", 0): 4})
    assert fake.calls == [{TP("t", 0): 3}, {TP("t", 0): 4}]
    travelling = GroupProgress("g", "127.0.0.1:1")
    travelling._admin = object()  # type: ignore[assignment]
    assert travelling.publish({TP("t", 0): 9})
    copy = pickle.loads(pickle.dumps(travelling))
    assert copy._admin is None and copy._published == {TP("t", 0): 9}
