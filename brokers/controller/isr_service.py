"""IsrController: batched ISR changes (isr.proto), the gRPC face of
``QuorumController.alter_partitions``.

A partition leader's ``IsrUpdater`` sends the ISR changes of many partitions in one call;
each item is answered with the partition's new state or its typed refusal, and the
accepted ones commit in one metadata-log proposal.  A failure of the whole call
(NOT_CONTROLLER, THROTTLED, a proposal that timed out) leaves through ``errors.abort``.
Thread-safety: gRPC worker threads; the controller serialises.
"""
from __future__ import annotations

import logging
from typing import Any

import grpc

from spark_log import errors
from spark_log.proto import isr_pb2 as pb

from brokers.metadata.alter_isr import AlterIsr

from .controller import QuorumController
from .wire import partition_to_pb

__all__ = ["IsrControllerServicer", "add_to_server", "SERVICE"]

log = logging.getLogger(__name__)
SERVICE = "spark_log.isr.v1.IsrController"


class IsrControllerServicer:
    def __init__(self, controller: QuorumController) -> None:
        self.controller = controller

    def AlterPartitions(self, request: pb.AlterPartitionsRequest,  # noqa: N802
                        context: grpc.ServicerContext) -> pb.AlterPartitionsResponse:
        items = [AlterIsr(broker_id=i.broker_id, broker_epoch=i.broker_epoch, topic=i.topic, partition=i.partition,
                          leader_epoch=i.leader_epoch, partition_epoch=i.partition_epoch, new_isr=tuple(i.new_isr))
                 for i in request.items]
        try:
            outcomes = self.controller.alter_partitions(items)
        except errors.SparkLogError as exc:
            errors.abort(context, exc)
            raise
        except Exception as exc:  # noqa: BLE001 - never leak a traceback as UNKNOWN
            log.exception("batched ISR change failed on the controller")
            errors.abort(context, errors.SparkLogError(f"internal controller error: {exc!r}"))
            raise
        response = pb.AlterPartitionsResponse()
        for item, outcome in zip(items, outcomes):
            result = response.results.add()
            if isinstance(outcome, errors.SparkLogError):
                result.error_code, result.error_message = int(outcome.code), outcome.message
            else:
                result.partition.CopyFrom(partition_to_pb(item.partition, outcome))
        return response


def add_to_server(controller: QuorumController, server: Any) -> None:
    """Register the ``IsrController`` service for ``controller`` (before the server starts)."""
    servicer = IsrControllerServicer(controller)
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, {
        "AlterPartitions": grpc.unary_unary_rpc_method_handler(
            servicer.AlterPartitions, request_deserializer=pb.AlterPartitionsRequest.FromString,
            response_serializer=pb.AlterPartitionsResponse.SerializeToString),
    }),))
