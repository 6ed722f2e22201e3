"""SecurityController: the gRPC face of the controller's security changes (security.proto).

Brokers forward their clients' user, ACL and quota changes here (``ControllerClient.
security``); each RPC decodes the request, commits it through ``QuorumController.change``
with the pure rules of ``security.py`` and answers the metadata offset that holds it.
Typed refusals (and NOT_CONTROLLER) leave through ``errors.abort``.  Thread-safety: gRPC
worker threads; the controller serialises.
"""
from __future__ import annotations

import uuid
from typing import Callable, TypeVar

import grpc
from google.protobuf.message import Message

from brokers.metadata.image import MetadataImage
from brokers.metadata.records import MetadataRecord
from brokers.metadata.security_image import QuotaEntity
from spark_log import errors
from spark_log.acls import binding_from_pb, binding_to_pb, filter_from_pb
from spark_log.proto import security_pb2 as pb
from spark_log.scram import MECHANISM

from .controller import QuorumController
from .security import ScramUpsertion, create_acl_records, delete_acl_records, quota_records, scram_records

__all__ = ["SecurityControllerServicer", "add_to_server", "quota_entity_from_pb", "SERVICE"]

T = TypeVar("T")
_Req = TypeVar("_Req", bound=Message)
_Resp = TypeVar("_Resp", bound=Message)
SERVICE = "spark_log.security.v1.SecurityController"


def quota_entity_from_pb(entity: pb.QuotaEntity) -> QuotaEntity:
    return QuotaEntity(user=entity.user if entity.HasField("user") else None,
                       client_id=entity.client_id if entity.HasField("client_id") else None)


def _guard(context: grpc.ServicerContext, fn: Callable[[], T]) -> T:
    return errors.guard(context, "a security change on the controller", fn, lambda _, exc: errors.SparkLogError(
        f"internal controller error: {exc!r}"))


class SecurityControllerServicer:
    def __init__(self, controller: QuorumController, *, id_factory: Callable[[], str] | None = None) -> None:
        self.controller = controller
        self._new_id = id_factory or (lambda: uuid.uuid4().hex)

    def _commit(self, context: grpc.ServicerContext,
                build: Callable[[MetadataImage], tuple[list[MetadataRecord], T]]) -> tuple[T, int]:
        return _guard(context, lambda: self.controller.change(build))

    def AlterUserScramCredentials(self, request: pb.AlterUserScramCredentialsRequest,  # noqa: N802
                                  context: grpc.ServicerContext) -> pb.AlterUserScramCredentialsResponse:
        upsertions = [ScramUpsertion(u.name, u.mechanism or MECHANISM, u.iterations, u.salt, u.stored_key,
                                     u.server_key) for u in request.upsertions]
        deletions = [(d.name, d.mechanism or MECHANISM) for d in request.deletions]
        _, offset = self._commit(context, lambda image: (scram_records(image, upsertions, deletions), None))
        return pb.AlterUserScramCredentialsResponse(metadata_offset=offset)

    def CreateAcls(self, request: pb.CreateAclsRequest,  # noqa: N802
                   context: grpc.ServicerContext) -> pb.CreateAclsResponse:
        bindings = _guard(context, lambda: [binding_from_pb(b) for b in request.bindings])
        _, offset = self._commit(context, lambda image: (create_acl_records(image, bindings, self._new_id), None))
        return pb.CreateAclsResponse(metadata_offset=offset)

    def DeleteAcls(self, request: pb.DeleteAclsRequest,  # noqa: N802
                   context: grpc.ServicerContext) -> pb.DeleteAclsResponse:
        filters = _guard(context, lambda: [filter_from_pb(f) for f in request.filters])
        results, offset = self._commit(context, lambda image: delete_acl_records(image, filters))
        return pb.DeleteAclsResponse(metadata_offset=offset, results=[
            pb.DeleteAclsResult(deleted=[binding_to_pb(b) for b in deleted]) for deleted in results])

    def AlterClientQuotas(self, request: pb.AlterClientQuotasRequest,  # noqa: N802
                          context: grpc.ServicerContext) -> pb.AlterClientQuotasResponse:
        entity = quota_entity_from_pb(request.entity)
        changes = [(op.key, None if op.remove else op.value) for op in request.ops]
        _, offset = self._commit(context, lambda image: (quota_records(image, entity, changes), None))
        return pb.AlterClientQuotasResponse(metadata_offset=offset)


def _unary(method: Callable[[_Req, grpc.ServicerContext], _Resp],
           request: type[_Req]) -> grpc.RpcMethodHandler[_Req, _Resp]:
    return grpc.unary_unary_rpc_method_handler(method, request_deserializer=request.FromString,
                                               response_serializer=lambda m: m.SerializeToString())


def add_to_server(controller: QuorumController, server: grpc.Server) -> None:
    """Register the ``SecurityController`` service for ``controller`` (before the server starts)."""
    servicer = SecurityControllerServicer(controller)
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, {
        "AlterUserScramCredentials": _unary(servicer.AlterUserScramCredentials, pb.AlterUserScramCredentialsRequest),
        "CreateAcls": _unary(servicer.CreateAcls, pb.CreateAclsRequest),
        "DeleteAcls": _unary(servicer.DeleteAcls, pb.DeleteAclsRequest),
        "AlterClientQuotas": _unary(servicer.AlterClientQuotas, pb.AlterClientQuotasRequest),
    }),))
