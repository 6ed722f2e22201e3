"""A broker's topic defaults and automatic topic creation (Kafka's ``num.partitions``,
``default.replication.factor`` and ``auto.create.topics.enable``).

- ``TopicDefaults.fill``: a CreateTopic request may leave its partition count or replication
  factor to the broker by sending -1 (Kafka's CreateTopics since KIP-464, which
  ``Admin.create_topic`` uses when they are not given); the broker that takes the request
  fills them from its ``default_partitions`` and ``default_replication_factor`` before the
  controller sees it.  0 and other negatives stay invalid (the controller refuses them).
- ``AutoCreator.create_missing``: a Metadata request with ``allow_auto_topic_creation``
  (producers send it; admin clients, consumers and the Spark connectors do not) that names
  topics missing from the broker's image creates them with those defaults, as a bytes topic
  with the default topic settings, when the broker has ``auto_create_topics`` on, and waits
  (at most ``wait_s``, well inside the client's 10 s per-broker metadata try) for the
  broker's image to hold them, so the same answer describes them; a topic created but not
  in the image by then is answered with a retriable ``RequestTimeoutError`` instead of
  "unknown topic", and the producer asks again (``Cluster.topic``).  Internal topics and
  illegal names are never created; a topic another client created meanwhile is taken as it
  is.  A creation the controller refuses (a replication factor above the live brokers, say)
  is answered as that typed error for the topic.  With ``auto_create_topics`` off nothing is
  created: the topic stays unknown.

Thread-safety: called from gRPC threads; the controller client and the image wait are
thread-safe.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable

from brokers.controller.topics import validate_topic_name
from brokers.metadata.image import MetadataImage, TopicImage
from spark_log.config import BROKER_DEFAULT_COUNT
from spark_log.errors import RequestTimeoutError, SparkLogError, TopicAlreadyExistsError

from .coordinator_topics import COORDINATOR_TOPICS

__all__ = ["TopicDefaults", "AutoCreator"]

CreateTopic = Callable[[str, int, int], TopicImage]
WaitFor = Callable[[Callable[[MetadataImage], bool], float], MetadataImage]


@dataclass(frozen=True)
class TopicDefaults:
    """The broker's ``default_partitions`` and ``default_replication_factor``."""

    partitions: int = 1
    replication_factor: int = 1

    def fill(self, partitions: int, replication_factor: int) -> tuple[int, int]:
        """``(partitions, replication_factor)`` with each ``BROKER_DEFAULT_COUNT`` replaced by the
        broker's default; any other value is left for the controller to check."""
        return (self.partitions if partitions == BROKER_DEFAULT_COUNT else partitions,
                self.replication_factor if replication_factor == BROKER_DEFAULT_COUNT else replication_factor)


class AutoCreator:
    """Creates the topics a producer's Metadata request names and the image lacks (module
    docstring)."""

    def __init__(self, *, enabled: bool, defaults: TopicDefaults, create: CreateTopic, wait_for: WaitFor,
                 wait_s: float = 5.0) -> None:
        self.enabled = enabled
        self.defaults = defaults
        self._create = create
        self._wait_for = wait_for
        self._wait_s = wait_s

    def create_missing(self, names: Iterable[str], image: MetadataImage) -> dict[str, SparkLogError]:
        """Create each of ``names`` that ``image`` lacks (when enabled); the typed error of
        each one that could not be created, or that was created but is not in this broker's
        image within ``wait_s`` (``RequestTimeoutError``: ask again).  Illegal or internal
        names are left out: they stay unknown."""
        if not self.enabled:
            return {}
        refused: dict[str, SparkLogError] = {}
        created: list[str] = []
        for name in dict.fromkeys(names):
            if name in image.topics or name in COORDINATOR_TOPICS:
                continue
            try:
                validate_topic_name(name)
            except SparkLogError:
                continue  # as Kafka: an illegal name is answered as it is, not created
            try:
                self._create(name, self.defaults.partitions, self.defaults.replication_factor)
            except TopicAlreadyExistsError:
                pass  # another client created it meanwhile: it is taken as it is
            except SparkLogError as exc:
                refused[name] = exc
                continue
            created.append(name)
        if created:
            try:
                self._wait_for(lambda img: all(n in img.topics for n in created), self._wait_s)
            except RequestTimeoutError:
                for name in created:  # committed; this broker is behind: the producer asks again
                    refused[name] = RequestTimeoutError(
                        f"topic {name!r} was created; this broker's metadata does not hold it yet")
        return refused
