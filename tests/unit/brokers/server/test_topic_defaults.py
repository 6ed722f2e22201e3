"""brokers.server.topic_defaults: which names a producer's metadata request creates, with
which counts, and what a refusal becomes."""
from __future__ import annotations

from typing import Callable


from brokers.metadata.image import MetadataImage
from brokers.server.topic_defaults import AutoCreator, TopicDefaults
from spark_log.config import BROKER_DEFAULT_COUNT as BROKER_DEFAULT
from spark_log.errors import InvalidReplicationFactorError, RequestTimeoutError, TopicAlreadyExistsError


class _Image:
    def __init__(self, names: set[str]) -> None:
        self.topics = {n: object() for n in names}


def _creator(enabled: bool, refuse: dict[str, Exception] | None = None,
             wait_times_out: bool = False) -> tuple[AutoCreator, list[tuple[str, int, int]], list[bool]]:
    made: list[tuple[str, int, int]] = []
    waited: list[bool] = []

    def create(name: str, partitions: int, replication_factor: int) -> object:
        if refuse and name in refuse:
            raise refuse[name]
        made.append((name, partitions, replication_factor))
        return object()

    def wait_for(predicate: Callable[[MetadataImage], bool], _timeout_s: float) -> MetadataImage:
        waited.append(predicate(_Image({n for n, _, _ in made})))  # type: ignore[arg-type]
        if wait_times_out:
            raise RequestTimeoutError("behind")
        return _Image(set())  # type: ignore[return-value]

    creator = AutoCreator(enabled=enabled, defaults=TopicDefaults(4, 2), create=create,  # type: ignore[arg-type]
                          wait_for=wait_for)
    return creator, made, waited


def test_fill_replaces_only_the_broker_default_marker() -> None:
    defaults = TopicDefaults(partitions=6, replication_factor=3)
    assert defaults.fill(BROKER_DEFAULT, BROKER_DEFAULT) == (6, 3)
    assert defaults.fill(2, BROKER_DEFAULT) == (2, 3)
    assert defaults.fill(0, -2) == (0, -2)  # invalid counts stay for the controller to refuse


def test_missing_legal_names_are_created_with_the_defaults_and_waited_for() -> None:
    creator, made, waited = _creator(enabled=True)
    refused = creator.create_missing(["a", "b", "a", "there"], _Image({"there"}))  # type: ignore[arg-type]
    assert refused == {}
    assert made == [("a", 4, 2), ("b", 4, 2)]
    assert waited == [True]  # one wait, for every created name


def test_nothing_is_created_when_off_or_for_internal_or_illegal_names() -> None:
    creator, made, waited = _creator(enabled=False)
    assert creator.create_missing(["a"], _Image(set())) == {}  # type: ignore[arg-type]
    creator, made2, _ = _creator(enabled=True)
    assert creator.create_missing(["__consumer_offsets", "__transaction_state", "bad name", ""],
                                  _Image(set())) == {}  # type: ignore[arg-type]
    assert made == [] and made2 == [] and waited == []


def test_a_refusal_is_returned_typed_and_a_race_is_not_one() -> None:
    refusal = InvalidReplicationFactorError("replication factor 2 is more than the 1 live broker")
    creator, made, _ = _creator(enabled=True, refuse={"r": refusal, "raced": TopicAlreadyExistsError("exists")})
    refused = creator.create_missing(["r", "raced", "ok"], _Image(set()))  # type: ignore[arg-type]
    assert refused == {"r": refusal}
    assert made == [("ok", 4, 2)]


def test_a_broker_behind_the_metadata_log_answers_ask_again() -> None:
    creator, made, waited = _creator(enabled=True, wait_times_out=True)
    refused = creator.create_missing(["late"], _Image(set()))  # type: ignore[arg-type]
    assert made == [("late", 4, 2)] and waited == [True]
    assert list(refused) == ["late"] and isinstance(refused["late"], RequestTimeoutError)  # retriable
