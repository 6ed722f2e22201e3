"""Admin.create_topic retried after an attempt whose answer was lost.

Under load a CreateTopic can be committed while its caller sees a retriable error (the
broker's wait for the controller timed out, its metadata lagged behind the commit, the
connection dropped); the retry then finds the topic.  Found in CI (three tests failed with
TOPIC_ALREADY_EXISTS from their own create_topic in one busy pair).  A topic that is the one
the call asked for is that call's success; any other topic is still TopicAlreadyExistsError.
Faults are injected in the client's Admin stub (``Cluster.admin``), against a real cluster.
"""
from __future__ import annotations

from typing import Any, Callable

import pytest

from spark_log import Admin, errors

pytestmark = pytest.mark.integration


class _Stub:
    """An Admin stub whose CreateTopic runs ``before`` first, and ``after`` with the answer."""

    def __init__(self, stub: Any, create: Callable[[Any, Any, float], Any]) -> None:
        self._stub, self._create = stub, create

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stub, name)

    def CreateTopic(self, request: Any, timeout: float) -> Any:  # noqa: N802 - the gRPC method's name
        return self._create(self._stub, request, timeout)


def _inject(admin: Admin, monkeypatch: pytest.MonkeyPatch, create: Callable[[Any, Any, float], Any]) -> None:
    cluster = admin._cluster
    real = cluster.admin
    monkeypatch.setattr(cluster, "admin", lambda address: _Stub(real(address), create))


def test_a_lost_answer_then_the_topic_found_is_success(bootstrap: str, topic_name: str,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []

    def lose_the_first_answer(stub: Any, request: Any, timeout: float) -> Any:
        calls.append(request.name)
        answer = stub.CreateTopic(request, timeout=timeout)  # committed
        if len(calls) == 1:
            raise errors.RequestTimeoutError("the answer was lost (injected)")
        return answer

    with Admin(bootstrap) as admin:
        _inject(admin, monkeypatch, lose_the_first_answer)
        created = admin.create_topic(topic_name, partitions=3, replication_factor=2,
                                     config={"retention.ms": 3_600_000, "cleanup_policy": "compact"})
        assert len(calls) == 2  # the retry found the topic: TOPIC_ALREADY_EXISTS from the broker
        assert (created.name, created.num_partitions, created.replication_factor) == (topic_name, 3, 2)
        assert created.config["retention.ms"] == "3600000" and created.config["cleanup.policy"] == "compact"
        monkeypatch.undo()
        assert admin.describe_topic(topic_name).topic_id == created.topic_id


@pytest.mark.parametrize("other", [{"partitions": 2}, {"partitions": 3, "config": {"retention.ms": 60_000}},
                                   {"partitions": 3, "kind": "typed"}], ids=["partitions", "config", "kind"])
def test_another_topic_found_by_the_retry_is_still_an_error(bootstrap: str, topic_name: str, other: dict[str, Any],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []

    def someone_else_creates_it_first(stub: Any, request: Any, timeout: float) -> Any:
        calls.append(request.name)
        if len(calls) == 1:  # this attempt never reached the controller; meanwhile another client creates it
            with Admin(bootstrap) as rival:
                rival.create_topic(topic_name, **other)
            raise errors.RequestTimeoutError("no answer (injected)")
        return stub.CreateTopic(request, timeout=timeout)

    with Admin(bootstrap) as admin:
        _inject(admin, monkeypatch, someone_else_creates_it_first)
        with pytest.raises(errors.TopicAlreadyExistsError):
            admin.create_topic(topic_name, partitions=3, config={"retention.ms": 3_600_000})
        assert len(calls) == 2


def test_a_topic_there_before_the_first_attempt_is_an_error(bootstrap: str, topic_name: str) -> None:
    with Admin(bootstrap) as admin:
        admin.create_topic(topic_name, partitions=1)
        with pytest.raises(errors.TopicAlreadyExistsError):
            admin.create_topic(topic_name, partitions=1)  # the very same request: no retry, so not ours
