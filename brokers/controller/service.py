"""ControllerService: the gRPC face of ``QuorumController`` (controller.proto).

Each RPC decodes its request, calls the controller and encodes the answer.  Every
``SparkLogError`` (refusals, NOT_CONTROLLER with ``leader_address``) leaves through
``errors.abort`` so the client re-raises the same typed error; malformed input (a schema
that is not Arrow IPC bytes, say) is an ``InvalidRequestError``/``InvalidSchemaError``.
``DescribeCluster`` and ``DescribeImage`` are answered by any voter from its own image.

Thread-safety: called from the server's worker threads; the controller serialises.
"""
from __future__ import annotations

import logging
from typing import Any, Callable, TypeVar

import grpc

from brokers.metadata.schema_codec import schema_from_bytes
from brokers.metadata.snapshot import encode_image
from spark_log import errors
from spark_log.proto import controller_pb2 as pb
from spark_log.proto import controller_pb2_grpc as pb_grpc

from .controller import QuorumController
from .wire import broker_to_pb, partition_to_pb, topic_to_pb

__all__ = ["ControllerServicer", "add_to_server"]

log = logging.getLogger(__name__)
T = TypeVar("T")


def _call(context: grpc.ServicerContext, fn: Callable[[], T]) -> T:
    try:
        return fn()
    except errors.SparkLogError as exc:
        errors.abort(context, exc)
        raise  # abort raises; this keeps type checkers satisfied
    except Exception as exc:  # noqa: BLE001 - never leak a traceback as UNKNOWN
        log.exception("controller request failed")
        errors.abort(context, errors.SparkLogError(f"internal controller error: {exc!r}"))
        raise


class ControllerServicer(pb_grpc.ControllerServiceServicer):
    def __init__(self, controller: QuorumController) -> None:
        self.controller = controller

    def RegisterBroker(self, request: pb.RegisterBrokerRequest, context: Any) -> pb.RegisterBrokerResponse:
        epoch = _call(
            context,
            lambda: self.controller.register_broker(
                broker_id=request.broker_id, incarnation=request.incarnation, address=request.address, rack=request.rack
            ),
        )
        return pb.RegisterBrokerResponse(broker_epoch=epoch)

    def BrokerHeartbeat(self, request: pb.BrokerHeartbeatRequest, context: Any) -> pb.BrokerHeartbeatResponse:
        result = _call(
            context, lambda: self.controller.heartbeat(broker_id=request.broker_id, broker_epoch=request.broker_epoch)
        )
        return pb.BrokerHeartbeatResponse(
            fenced=result.fenced, broker_epoch=result.broker_epoch, metadata_offset=result.metadata_offset
        )

    def CreateTopic(self, request: pb.CreateTopicRequest, context: Any) -> pb.CreateTopicResponse:
        def create() -> Any:
            schema = schema_from_bytes(request.schema) if request.schema else None
            return self.controller.create_topic(
                name=request.name,
                partitions=request.partitions,
                replication_factor=request.replication_factor,
                config=dict(request.configs),
                schema=schema,
                key_columns=tuple(request.key_columns),
                kind=request.kind or None,
            )

        return pb.CreateTopicResponse(topic=topic_to_pb(_call(context, create)))

    def DeleteTopic(self, request: pb.DeleteTopicRequest, context: Any) -> pb.DeleteTopicResponse:
        _call(context, lambda: self.controller.delete_topic(name=request.name))
        return pb.DeleteTopicResponse()

    def DescribeCluster(self, request: pb.DescribeClusterRequest, context: Any) -> pb.DescribeClusterResponse:
        controller = self.controller
        listener = controller.metadata
        image = listener.image
        leader_id = listener.leader_id
        return pb.DescribeClusterResponse(
            node_id=controller.node_id,
            is_active=controller.is_active,
            controller_id=-1 if leader_id is None else leader_id,
            controller_address=controller.leader_address() or "",
            controller_epoch=listener.leader_epoch,
            metadata_offset=image.offset,
            brokers=[broker_to_pb(b) for _, b in sorted(image.brokers.items())],
        )

    def DescribeImage(self, request: pb.DescribeImageRequest, context: Any) -> pb.DescribeImageResponse:
        image = self.controller.image
        return pb.DescribeImageResponse(node_id=self.controller.node_id, offset=image.offset, snapshot=encode_image(image))

    def AlterPartition(self, request: pb.AlterPartitionRequest, context: Any) -> pb.AlterPartitionResponse:
        info = _call(
            context,
            lambda: self.controller.alter_partition(
                broker_id=request.broker_id,
                broker_epoch=request.broker_epoch,
                topic=request.topic,
                partition=request.partition,
                leader_epoch=request.leader_epoch,
                partition_epoch=request.partition_epoch,
                new_isr=tuple(request.new_isr),
            ),
        )
        return pb.AlterPartitionResponse(partition=partition_to_pb(request.partition, info))

    def AlterConfigs(self, request: pb.AlterConfigsRequest, context: Any) -> pb.AlterConfigsResponse:
        config = _call(
            context,
            lambda: self.controller.alter_configs(topic=request.topic, set=dict(request.set), delete=tuple(request.delete)),
        )
        return pb.AlterConfigsResponse(configs=config.to_kafka_names())

    def RegisterSchema(self, request: pb.RegisterSchemaRequest, context: Any) -> pb.RegisterSchemaResponse:
        schema_id = _call(
            context,
            lambda: self.controller.register_schema(topic=request.topic, schema=schema_from_bytes(request.schema)),
        )
        return pb.RegisterSchemaResponse(schema_id=schema_id)

    def AlterPartitionReassignments(
        self, request: pb.AlterPartitionReassignmentsRequest, context: Any
    ) -> pb.AlterPartitionReassignmentsResponse:
        info = _call(
            context,
            lambda: self.controller.alter_partition_reassignment(
                topic=request.topic, partition=request.partition, target=tuple(request.target_replicas)
            ),
        )
        return pb.AlterPartitionReassignmentsResponse(partition=partition_to_pb(request.partition, info))

    def ElectLeaders(self, request: pb.ElectLeadersRequest, context: Any) -> pb.ElectLeadersResponse:
        partitions = [(p.topic, p.partition) for p in request.partitions] or None
        outcomes = _call(context, lambda: self.controller.elect_leaders(partitions=partitions))
        return pb.ElectLeadersResponse(
            results=[
                pb.ElectionResult(
                    topic=o.topic,
                    partition=o.partition,
                    preferred=-1 if o.preferred is None else o.preferred,
                    leader=-1 if o.leader is None else o.leader,
                    reason=o.reason or "",
                )
                for o in outcomes
            ]
        )


# The generated gRPC module (spark_log/proto/controller_pb2_grpc.py) has no annotations; this
# name gives its registration function the type relied on here.
_add_servicer: Callable[[pb_grpc.ControllerServiceServicer, grpc.Server], None] = (
    pb_grpc.add_ControllerServiceServicer_to_server)


def add_to_server(controller: QuorumController, server: grpc.Server) -> None:
    """Register the ``ControllerService`` for ``controller`` on ``server`` (before it starts)."""
    _add_servicer(ControllerServicer(controller), server)
