"""The gRPC servicers: thin adapters from RPCs to the handlers.

Whole-request errors (a ``SparkLogError`` raised by a handler) abort the call with
``errors.abort`` so the client re-raises the same typed error; per-partition errors are
already inside the responses.  Anything unexpected is logged and aborted as
``StorageError`` with its message, never a bare traceback to the client.
"""
from __future__ import annotations

import logging
from typing import Callable, TypeVar

import grpc
from google.protobuf.message import Message

from brokers.metrics.counters import BrokerCounters
from spark_log import errors
from spark_log.errors import BrokerNotAvailableError, SparkLogError, StorageError
from spark_log.proto import broker_pb2 as pb

from .admin import AdminHandler
from .describe_partitions import DescribePartitionsHandler
from .errors import to_pb
from .fetch import FetchHandler
from .leader_fetch import LeaderFetchHandler
from .list_offsets import ListOffsetsHandler
from .metadata import MetadataBuilder
from .partition_manager import PartitionManager
from .produce import ProduceHandler, Verifier
from .reassignment_admin import ReassignmentAdmin
from .topic_defaults import AutoCreator
from .wire import unary

__all__ = ["BrokerServicer", "AdminServicer"]

log = logging.getLogger(__name__)

T = TypeVar("T")


def _serialize(message: Message) -> bytes:
    return message.SerializeToString()


def _guard(context: grpc.ServicerContext, name: str, call: Callable[[], T], counters: BrokerCounters | None = None) -> T:
    try:
        return call()
    except StorageError as exc:  # a whole request failed on the disk: logged and counted, then answered
        if counters is not None:
            counters.storage_error("request", name, -1, exc)
        else:
            log.error("%s failed on storage: %s", name, exc.message)
        errors.abort(context, exc)
        raise
    except SparkLogError as exc:
        errors.abort(context, exc)
        raise  # abort raises; for type checkers
    except Exception as exc:  # noqa: BLE001 - map to a typed error
        log.exception("%s failed", name)
        if counters is not None:
            counters.storage_error("request", name, -1, exc)
        errors.abort(context, StorageError(f"{name} failed on the broker: {exc}"))
        raise


class BrokerServicer:
    """The ``Broker`` service (registered by ``wire.broker_handler``).  ``follower_fetches``
    answers fetches from follower brokers (None: refused)."""

    def __init__(self, *, manager: PartitionManager, builder: MetadataBuilder,
                 controller_id: Callable[[], int | None], follower_fetches: LeaderFetchHandler | None = None,
                 verifier: Verifier | None = None, counters: BrokerCounters | None = None,
                 auto_create: AutoCreator | None = None) -> None:
        self.manager = manager
        self.auto_create = auto_create
        self.builder = builder
        self.controller_id = controller_id
        self.counters = counters if counters is not None else BrokerCounters(manager.broker_id)
        self.produce = ProduceHandler(manager, verifier, self.counters)
        self.fetch = FetchHandler(manager, follower_fetches=follower_fetches, counters=self.counters)
        self.list_offsets = ListOffsetsHandler(manager)
        self.describe_partitions = DescribePartitionsHandler(manager)

    def Metadata(self, request: pb.MetadataRequest, context: grpc.ServicerContext) -> pb.MetadataResponse:  # noqa: N802
        """Refused with a retriable ``BrokerNotAvailableError`` while the broker catches up
        with the metadata log (``PartitionManager.caught_up``): clients ask another broker
        rather than taking "unknown topic" from an image that is not served yet.  With
        ``allow_auto_topic_creation``, named topics that do not exist are created first when
        this broker has ``auto_create_topics`` on (``topic_defaults.py``)."""
        def answer() -> pb.MetadataResponse:
            if not self.manager.caught_up:
                raise BrokerNotAvailableError(f"broker {self.manager.broker_id} is catching up with the metadata log")
            refused: dict[str, SparkLogError] = {}
            if request.allow_auto_topic_creation and not request.all_topics and self.auto_create is not None:
                refused = self.auto_create.create_missing(request.topics, self.manager.image)
            response = self.builder.metadata(request, self.manager.image, self.controller_id())
            for meta in response.topics:
                if meta.name in refused and meta.error.code:
                    meta.error.CopyFrom(to_pb(refused[meta.name]))
            return response
        return _guard(context, "Metadata", answer, self.counters)

    def Produce(self, request: pb.ProduceRequest, context: grpc.ServicerContext) -> pb.ProduceResponse:  # noqa: N802
        return _guard(context, "Produce", lambda: self.produce.handle(request), self.counters)

    def Fetch(self, request: pb.FetchRequest, context: grpc.ServicerContext) -> bytes:  # noqa: N802
        """A serialised ``FetchResponse`` (``wire.broker_handler`` passes it through)."""
        return _guard(context, "Fetch", lambda: self.fetch.handle(request, is_active=context.is_active), self.counters)

    def ListOffsets(self, request: pb.ListOffsetsRequest, context: grpc.ServicerContext) -> pb.ListOffsetsResponse:  # noqa: N802
        return _guard(context, "ListOffsets", lambda: self.list_offsets.handle(request), self.counters)

    def DescribePartitions(self, request: pb.DescribePartitionsRequest,  # noqa: N802
                           context: grpc.ServicerContext) -> pb.DescribePartitionsResponse:
        return _guard(context, "DescribePartitions", lambda: self.describe_partitions.handle(request), self.counters)


class AdminServicer:
    """The ``Admin`` service (registered through ``rpc_handler()``)."""

    def __init__(self, handler: AdminHandler) -> None:
        self.handler = handler
        self.reassignments = ReassignmentAdmin(handler)

    def rpc_handler(self) -> grpc.GenericRpcHandler:
        """The service's gRPC handlers, for ``grpc.Server.add_generic_rpc_handlers``."""
        ser = _serialize
        return grpc.method_handlers_generic_handler("spark_log.broker.v1.Admin", {
            "CreateTopic": unary(self.CreateTopic, pb.CreateTopicRequest, ser),
            "DeleteTopic": unary(self.DeleteTopic, pb.DeleteTopicRequest, ser),
            "DescribeTopic": unary(self.DescribeTopic, pb.DescribeTopicRequest, ser),
            "ListTopics": unary(self.ListTopics, pb.ListTopicsRequest, ser),
            "AlterConfigs": unary(self.AlterConfigs, pb.AlterConfigsRequest, ser),
            "RegisterSchema": unary(self.RegisterSchema, pb.RegisterSchemaRequest, ser),
            "AlterPartitionReassignments": unary(self.AlterPartitionReassignments,
                                                 pb.AlterPartitionReassignmentsRequest, ser),
            "ListPartitionReassignments": unary(self.ListPartitionReassignments,
                                                pb.ListPartitionReassignmentsRequest, ser),
            "ElectLeaders": unary(self.ElectLeaders, pb.ElectLeadersRequest, ser),
        })

    def _run(self, name: str, context: grpc.ServicerContext, call: Callable[[], T]) -> T:
        return _guard(context, name, call)

    def CreateTopic(self, request: pb.CreateTopicRequest, context: grpc.ServicerContext) -> pb.TopicDescription:  # noqa: N802
        return self._run("CreateTopic", context, lambda: self.handler.create_topic(request))

    def DeleteTopic(self, request: pb.DeleteTopicRequest, context: grpc.ServicerContext) -> pb.DeleteTopicResponse:  # noqa: N802
        return self._run("DeleteTopic", context, lambda: self.handler.delete_topic(request))

    def DescribeTopic(self, request: pb.DescribeTopicRequest, context: grpc.ServicerContext) -> pb.TopicDescription:  # noqa: N802
        return self._run("DescribeTopic", context, lambda: self.handler.describe_topic(request))

    def ListTopics(self, request: pb.ListTopicsRequest, context: grpc.ServicerContext) -> pb.ListTopicsResponse:  # noqa: N802
        return self._run("ListTopics", context, lambda: self.handler.list_topics(request))

    def AlterConfigs(self, request: pb.AlterConfigsRequest, context: grpc.ServicerContext) -> pb.TopicDescription:  # noqa: N802
        return self._run("AlterConfigs", context, lambda: self.handler.alter_configs(request))

    def RegisterSchema(self, request: pb.RegisterSchemaRequest, context: grpc.ServicerContext) -> pb.RegisterSchemaResponse:  # noqa: N802
        return self._run("RegisterSchema", context, lambda: self.handler.register_schema(request))

    # reassignment and preferred-leader election (brokers/server/reassignment_admin.py)

    def AlterPartitionReassignments(self, request: pb.AlterPartitionReassignmentsRequest,  # noqa: N802
                                    context: grpc.ServicerContext) -> pb.AlterPartitionReassignmentsResponse:
        return self._run("AlterPartitionReassignments", context, lambda: self.reassignments.alter(request))

    def ListPartitionReassignments(self, request: pb.ListPartitionReassignmentsRequest,  # noqa: N802
                                   context: grpc.ServicerContext) -> pb.ListPartitionReassignmentsResponse:
        return self._run("ListPartitionReassignments", context, lambda: self.reassignments.list(request))

    def ElectLeaders(self, request: pb.ElectLeadersRequest,  # noqa: N802
                     context: grpc.ServicerContext) -> pb.ElectLeadersResponse:
        return self._run("ElectLeaders", context, lambda: self.reassignments.elect(request))
