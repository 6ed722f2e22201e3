"""Admin requests: forwarded to the active controller, answered from this broker's image.

Changes (create/delete topic, alter configs, register schema) go through
``ControllerClient``, which finds the active controller and follows NOT_CONTROLLER.  When
the controller has committed the change, this broker waits (up to ``wait_s``) until its own
metadata image shows it, so that a describe, produce or fetch sent to this broker right
after the answer sees the change; a create still missing from the image after that wait is
described from the controller's answer (never "unknown topic" for a committed create).
Describe and list are served from the local image.

Errors are the controller's typed errors, passed through unchanged.  ``validate_only``
creates check the request here (names, counts, configs, schema) without a round trip.
"""
from __future__ import annotations

from typing import Callable

from brokers.controller.client import ControllerClient
from brokers.metadata.image import MetadataImage
from spark_log.schemas import schema_from_bytes
from spark_log.config import TopicConfig
from spark_log.errors import (
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    InvalidRequestError,
    InvalidSchemaError,
    InvalidTopicError,
    RequestTimeoutError,
    UnknownTopicOrPartitionError,
)
from spark_log.proto import broker_pb2 as pb

from .coordinator_topics import COORDINATOR_TOPICS
from .metadata import MetadataBuilder
from .topic_defaults import TopicDefaults

__all__ = ["AdminHandler"]

WaitFor = Callable[[Callable[[MetadataImage], bool], float], MetadataImage]


class AdminHandler:
    def __init__(self, *, controller: ControllerClient, image: Callable[[], MetadataImage], wait_for: WaitFor,
                 builder: MetadataBuilder, wait_s: float = 10.0, defaults: TopicDefaults = TopicDefaults()) -> None:
        self.controller = controller
        self.defaults = defaults
        self.image = image
        self.wait_for = wait_for
        self.builder = builder
        self.wait_s = wait_s

    def _await(self, predicate: Callable[[MetadataImage], bool]) -> MetadataImage:
        try:
            return self.wait_for(predicate, self.wait_s)
        except RequestTimeoutError:
            return self.image()  # committed; this broker is just behind: answer with what it has

    def _described(self, name: str, image: MetadataImage) -> pb.TopicDescription:
        topic = image.topics.get(name)
        if topic is None:
            raise UnknownTopicOrPartitionError(f"unknown topic {name!r}")
        return self.builder.describe(topic)

    def create_topic(self, request: pb.CreateTopicRequest) -> pb.TopicDescription:
        if request.name in COORDINATOR_TOPICS:  # their coordinators create them, with their settings
            raise InvalidTopicError(f"{request.name} is internal: its coordinator creates it")
        schema = None
        if request.arrow_schema:
            try:
                schema = schema_from_bytes(request.arrow_schema)
            except Exception as exc:  # noqa: BLE001 - any parse failure is the caller's bad input
                raise InvalidSchemaError(f"arrow_schema is not an Arrow IPC schema: {exc}") from None
        # -1: the broker's default_partitions / default_replication_factor (topic_defaults.py)
        partitions, replication_factor = self.defaults.fill(request.partitions, request.replication_factor)
        if request.validate_only:
            if partitions < 1:
                raise InvalidPartitionsError(f"partitions must be >= 1, got {partitions}")
            if replication_factor < 1:
                raise InvalidReplicationFactorError(f"replication factor must be >= 1, got {replication_factor}")
            config = TopicConfig().with_overrides(dict(request.configs))
            kind = request.kind or ("typed" if schema is not None else "bytes")
            if kind not in ("bytes", "typed") or (kind == "bytes" and schema is not None):
                raise InvalidRequestError(f"kind must be 'bytes' (no schema) or 'typed', got {request.kind!r}"
                                          f"{' with a schema' if schema is not None else ''}")
            return pb.TopicDescription(name=request.name, kind=kind,
                                       configs=config.to_kafka_names(), replication_factor=replication_factor)
        created = self.controller.create_topic(
            request.name, partitions=partitions, replication_factor=replication_factor,
            config=dict(request.configs), schema=schema, key_columns=list(request.key_columns),
            kind=request.kind or None)
        wanted = len(created.partitions) or partitions
        image = self._await(lambda img: (t := img.topics.get(request.name)) is not None
                            and t.topic_id == created.topic_id and len(t.partitions) >= wanted)
        topic = image.topics.get(request.name)
        if topic is None or topic.topic_id != created.topic_id:
            # committed, but this broker's image is still behind after wait_s: the controller's
            # own answer describes it (answering "unknown topic" made clients retry a create
            # that had succeeded, and the retry find the topic existing)
            topic = created
        return self.builder.describe(topic)

    def delete_topic(self, request: pb.DeleteTopicRequest) -> pb.DeleteTopicResponse:
        if request.name in COORDINATOR_TOPICS:
            raise InvalidTopicError(f"{request.name} is internal: it holds coordinator state and cannot be deleted")
        self.controller.delete_topic(request.name)
        self._await(lambda img: request.name not in img.topics)
        return pb.DeleteTopicResponse()

    def describe_topic(self, request: pb.DescribeTopicRequest) -> pb.TopicDescription:
        return self._described(request.name, self.image())

    def list_topics(self, request: pb.ListTopicsRequest) -> pb.ListTopicsResponse:
        return pb.ListTopicsResponse(names=sorted(self.image().topics))

    def alter_configs(self, request: pb.AlterConfigsRequest) -> pb.TopicDescription:
        if request.validate_only:
            topic = self.image().topics.get(request.topic)
            if topic is None:
                raise UnknownTopicOrPartitionError(f"unknown topic {request.topic!r}")
            topic.config.with_overrides(dict(request.set))
            return self.builder.describe(topic)
        configs = self.controller.alter_configs(request.topic, set=dict(request.set), delete=list(request.delete))
        image = self._await(lambda img: (t := img.topics.get(request.topic)) is not None
                            and t.config.to_kafka_names() == configs)
        return self._described(request.topic, image)

    def register_schema(self, request: pb.RegisterSchemaRequest) -> pb.RegisterSchemaResponse:
        try:
            schema = schema_from_bytes(request.arrow_schema)
        except Exception as exc:  # noqa: BLE001 - bad input
            raise InvalidSchemaError(f"arrow_schema is not an Arrow IPC schema: {exc}") from None
        schema_id = self.controller.register_schema(request.topic, schema)
        self._await(lambda img: (t := img.topics.get(request.topic)) is not None
                    and t.schema_by_id(schema_id) is not None)
        return pb.RegisterSchemaResponse(schema_id=schema_id)
