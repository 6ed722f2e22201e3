"""The ``TransactionCoordinator`` and ``TxnMarkers`` gRPC services
(``spark_log/proto/transactions.proto``): wire <-> typed, refusals as typed whole-request
errors (``errors.abort``), anything unexpected logged and aborted as ``StorageError``."""
from __future__ import annotations

from typing import Callable, TypeVar

import grpc
from google.protobuf.message import Message

from spark_log import errors
from spark_log.proto import transactions_pb2 as pb

from .coordinator import TransactionCoordinator
from .markers import MarkerHandler
from .model import GroupOffset

__all__ = ["TxnServicer", "MarkerServicer", "SERVICE_NAME", "MARKERS_SERVICE_NAME"]


SERVICE_NAME = "spark_log.transactions.v1.TransactionCoordinator"
MARKERS_SERVICE_NAME = "spark_log.transactions.v1.TxnMarkers"

_ANSWER_MARGIN_S = 0.5  # EndTxn answers this long before its caller's deadline

_Req = TypeVar("_Req", bound=Message)
_Resp = TypeVar("_Resp", bound=Message)


def _unary(method: Callable[[_Req, grpc.ServicerContext], _Resp],
           request: type[_Req]) -> grpc.RpcMethodHandler[_Req, _Resp]:
    return grpc.unary_unary_rpc_method_handler(method, request_deserializer=request.FromString,
                                               response_serializer=lambda m: m.SerializeToString())


def _within_deadline_ms(context: grpc.ServicerContext) -> int | None:
    """How long EndTxn may wait for the markers: until ``_ANSWER_MARGIN_S`` before the
    caller's deadline, so a transaction still completing is answered with the retriable
    ``RequestTimeoutError`` (a retry waits for the same completion) instead of the caller
    meeting its own deadline with no answer; None when the call has no deadline."""
    remaining: float | None = context.time_remaining()  # None without a deadline (typed as float)
    if remaining is None:
        return None
    return max(0, int((remaining - _ANSWER_MARGIN_S) * 1000))


class TxnServicer:
    def __init__(self, coordinator: TransactionCoordinator) -> None:
        self.coordinator = coordinator

    def rpc_handler(self) -> grpc.GenericRpcHandler:
        return grpc.method_handlers_generic_handler(SERVICE_NAME, {
            "FindCoordinator": _unary(self.FindCoordinator, pb.FindTxnCoordinatorRequest),
            "InitProducerId": _unary(self.InitProducerId, pb.InitProducerIdRequest),
            "AddPartitions": _unary(self.AddPartitions, pb.AddPartitionsRequest),
            "JoinTxn": _unary(self.JoinTxn, pb.JoinTxnRequest),
            "AddOffsets": _unary(self.AddOffsets, pb.AddOffsetsRequest),
            "EndTxn": _unary(self.EndTxn, pb.EndTxnRequest),
            "DescribeTxn": _unary(self.DescribeTxn, pb.DescribeTxnRequest),
        })

    def FindCoordinator(self, request: pb.FindTxnCoordinatorRequest,  # noqa: N802
                        context: grpc.ServicerContext) -> pb.FindTxnCoordinatorResponse:
        def answer() -> pb.FindTxnCoordinatorResponse:
            where = self.coordinator.find_coordinator(request.transactional_id)
            return pb.FindTxnCoordinatorResponse(broker_id=where.broker_id, address=where.address,
                                                 partition=where.partition)
        return errors.guard(context, "FindCoordinator", answer)

    def InitProducerId(self, request: pb.InitProducerIdRequest,  # noqa: N802
                       context: grpc.ServicerContext) -> pb.InitProducerIdResponse:
        def answer() -> pb.InitProducerIdResponse:
            pid, epoch, committed = self.coordinator.init_producer_id(request.transactional_id,
                                                                      request.transaction_timeout_ms)
            return pb.InitProducerIdResponse(producer_id=pid, producer_epoch=epoch, committed_label=committed)
        return errors.guard(context, "InitProducerId", answer)

    def AddPartitions(self, request: pb.AddPartitionsRequest,  # noqa: N802
                      context: grpc.ServicerContext) -> pb.AddPartitionsResponse:
        def answer() -> pb.AddPartitionsResponse:
            tps = [(p.topic, p.partition) for p in request.partitions]
            if request.verify_only:
                for tp in tps:
                    self.coordinator.verify(request.transactional_id, request.producer_id, request.producer_epoch, tp)
            else:
                self.coordinator.add_partitions(request.transactional_id, request.producer_id, request.producer_epoch,
                                                tps)
            return pb.AddPartitionsResponse()
        return errors.guard(context, "AddPartitions", answer)

    def JoinTxn(self, request: pb.JoinTxnRequest, context: grpc.ServicerContext) -> pb.JoinTxnResponse:  # noqa: N802
        def answer() -> pb.JoinTxnResponse:
            pid, epoch, committed = self.coordinator.join(request.transactional_id, request.label, request.run,
                                                          request.transaction_timeout_ms)
            return pb.JoinTxnResponse(producer_id=pid, producer_epoch=epoch, already_committed=committed)
        return errors.guard(context, "JoinTxn", answer)

    def AddOffsets(self, request: pb.AddOffsetsRequest,  # noqa: N802
                   context: grpc.ServicerContext) -> pb.AddOffsetsResponse:
        def answer() -> pb.AddOffsetsResponse:
            offsets = [GroupOffset(request.group_id, o.topic, o.partition, o.offset, o.metadata)
                       for o in request.offsets]
            self.coordinator.add_offsets(request.transactional_id, request.producer_id, request.producer_epoch,
                                         offsets, member_id=request.member_id, member_epoch=request.member_epoch)
            return pb.AddOffsetsResponse()
        return errors.guard(context, "AddOffsets", answer)

    def EndTxn(self, request: pb.EndTxnRequest, context: grpc.ServicerContext) -> pb.EndTxnResponse:  # noqa: N802
        def answer() -> pb.EndTxnResponse:
            wait_ms = _within_deadline_ms(context)
            if request.run:
                self.coordinator.end_batch(request.transactional_id, request.label, request.run, request.commit,
                                           list(request.participants), timeout_ms=wait_ms)
                return pb.EndTxnResponse(producer_epoch=-1)
            pid, epoch = self.coordinator.end(request.transactional_id, request.producer_id, request.producer_epoch,
                                              request.commit, timeout_ms=wait_ms)
            return pb.EndTxnResponse(producer_epoch=epoch, producer_id=pid)
        return errors.guard(context, "EndTxn", answer)

    def DescribeTxn(self, request: pb.DescribeTxnRequest,  # noqa: N802
                    context: grpc.ServicerContext) -> pb.DescribeTxnResponse:
        def answer() -> pb.DescribeTxnResponse:
            meta = self.coordinator.describe(request.transactional_id)
            if meta is None:
                return pb.DescribeTxnResponse(transactional_id=request.transactional_id, state="Unknown",
                                              producer_id=-1, producer_epoch=-1, label=-1, committed_label=-1,
                                              coordinator_id=self.coordinator.broker_id)
            return pb.DescribeTxnResponse(
                transactional_id=meta.transactional_id, producer_id=meta.producer_id,
                producer_epoch=meta.producer_epoch, state=meta.state.value, label=meta.label,
                committed_label=meta.committed_label, timeout_ms=meta.timeout_ms,
                coordinator_id=self.coordinator.broker_id,
                participants=[pb.Participant(producer_id=p.producer_id, producer_epoch=p.epoch,
                                             partitions=[pb.TopicPartition(topic=t, partition=i)
                                                         for t, i in sorted(p.partitions)])
                              for p in meta.participants])
        return errors.guard(context, "DescribeTxn", answer)


class MarkerServicer:
    def __init__(self, handler: MarkerHandler) -> None:
        self.handler = handler

    def rpc_handler(self) -> grpc.GenericRpcHandler:
        return grpc.method_handlers_generic_handler(MARKERS_SERVICE_NAME, {
            "WriteTxnMarkers": _unary(self.WriteTxnMarkers, pb.WriteTxnMarkersRequest)})

    def WriteTxnMarkers(self, request: pb.WriteTxnMarkersRequest,  # noqa: N802
                        context: grpc.ServicerContext) -> pb.WriteTxnMarkersResponse:
        return errors.guard(context, "WriteTxnMarkers", lambda: self.handler.write(request))
