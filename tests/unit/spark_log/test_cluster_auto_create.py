"""Cluster.topic(auto_create=True): a topic a broker created but does not hold yet is asked
for again (its retriable RequestTimeoutError), a refusal is raised typed, and "unknown" stays
UnknownTopicOrPartitionError."""
from __future__ import annotations

from typing import Any

import pytest

from spark_log._client import Cluster
from spark_log.errors import (ErrorCode, InvalidReplicationFactorError, RequestTimeoutError,
                              UnknownTopicOrPartitionError)
from spark_log.proto import broker_pb2 as pb


@pytest.fixture(autouse=True)
def _closed(monkeypatch: pytest.MonkeyPatch) -> Any:
    made: list[Cluster] = []
    real_init = Cluster.__init__

    def init(self: Cluster, *args: Any, **kwargs: Any) -> None:
        real_init(self, *args, **kwargs)
        made.append(self)

    monkeypatch.setattr(Cluster, "__init__", init)
    yield
    for cluster in made:
        cluster.close()


def _cluster(answers: list[tuple[int, Any]], timeout_s: float = 5.0) -> tuple[Cluster, list[bool]]:
    """A Cluster whose metadata answers are ``answers``: (error code for topic 't', or 0 with
    the info to cache)."""
    cluster = Cluster("127.0.0.1:1", request_timeout_s=timeout_s)
    asked: list[bool] = []

    def refresh(topics: Any = None, *, auto_create: bool = False) -> pb.MetadataResponse:
        asked.append(auto_create)
        code, info = answers.pop(0) if answers else (ErrorCode.REQUEST_TIMEOUT, None)
        response = pb.MetadataResponse()
        meta = response.topics.add(name="t")
        if code:
            meta.error.code, meta.error.message = int(code), "as the broker said"
        else:
            cluster._topics["t"] = info  # noqa: SLF001 - what refresh caches
        return response

    cluster.refresh = refresh  # type: ignore[method-assign]
    return cluster, asked


def test_a_topic_being_created_is_asked_for_again() -> None:
    info = object()
    cluster, asked = _cluster([(ErrorCode.REQUEST_TIMEOUT, None), (ErrorCode.REQUEST_TIMEOUT, None), (0, info)])
    assert cluster.topic("t", auto_create=True) is info
    assert asked == [True, True, True]


def test_asking_again_ends_at_the_request_timeout() -> None:
    cluster, asked = _cluster([], timeout_s=0.2)
    with pytest.raises(RequestTimeoutError):
        cluster.topic("t", auto_create=True)
    assert len(asked) >= 2


def test_a_refusal_is_typed_and_unknown_stays_unknown() -> None:
    cluster, asked = _cluster([(ErrorCode.INVALID_REPLICATION_FACTOR, None)])
    with pytest.raises(InvalidReplicationFactorError):
        cluster.topic("t", auto_create=True)
    cluster, asked = _cluster([(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None)])
    with pytest.raises(UnknownTopicOrPartitionError):
        cluster.topic("t")
    assert asked == [False]
