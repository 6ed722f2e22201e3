"""The ``Security`` gRPC service (security.proto), on every node.

- ``ScramStart`` / ``ScramFinish``: the SCRAM-SHA-256 exchange (``sessions.py``), on
  ``SASL_SSL`` listeners only (elsewhere ``AuthenticationError``: a password must not
  cross an unencrypted or unauthenticated-by-design link);
- ``WhoAmI``: the caller's principal, host and client id, as this node sees them;
- changes (``AlterUserScramCredentials``, ``CreateAcls``, ``DeleteAcls``,
  ``AlterClientQuotas``) are forwarded to the active controller (``ControllerClient.
  security``); once committed, this node waits (up to ``wait_s``) until its own image holds
  the change, so a call sent here right after the answer is judged by it;
- describes are answered from this node's image.  A user description holds the name,
  mechanism and iteration count, never the salt or keys.

ACL calls on a node whose authorizer is off are refused with ``SecurityDisabledError``
(the ACLs would do nothing there), as Kafka does.  Thread-safety: gRPC worker threads;
stateless apart from the session store.
"""
from __future__ import annotations

from typing import Callable, TypeVar

import grpc
from google.protobuf.message import Message

from brokers.controller.client import ControllerClient
from brokers.metadata.image import MetadataImage
from brokers.metadata.security_image import QuotaEntity
from spark_log import errors
from spark_log.acls import binding_to_pb, filter_from_pb
from spark_log.errors import RequestTimeoutError
from spark_log.proto import security_pb2 as pb

from .interceptor import current_identity
from .sessions import SessionStore

__all__ = ["SecurityServicer", "SERVICE"]

T = TypeVar("T")
_Req = TypeVar("_Req", bound=Message)
_Resp = TypeVar("_Resp", bound=Message)
SERVICE = "spark_log.security.v1.Security"
WaitFor = Callable[[Callable[[MetadataImage], bool], float], MetadataImage]


def _entity_to_pb(entity: QuotaEntity) -> pb.QuotaEntity:
    message = pb.QuotaEntity()
    if entity.user is not None:
        message.user = entity.user
    if entity.client_id is not None:
        message.client_id = entity.client_id
    return message


def _guard(context: grpc.ServicerContext, name: str, fn: Callable[[], T]) -> T:
    """``errors.guard``, naming only the type of an unexpected exception (a security call's
    message may hold a secret)."""
    return errors.guard(context, f"Security.{name}", fn, lambda what, exc: errors.SparkLogError(
        f"{what} failed on the broker: {type(exc).__name__}"))


class SecurityServicer:
    def __init__(self, *, protocol: str, authorizer_enabled: bool, sessions: SessionStore,
                 image: Callable[[], MetadataImage], wait_for: WaitFor, controller: ControllerClient,
                 wait_s: float = 10.0) -> None:
        self.protocol = protocol
        self.authorizer_enabled = authorizer_enabled
        self.sessions = sessions
        self.image = image
        self.wait_for = wait_for
        self.controller = controller
        self.wait_s = wait_s

    # -- authentication ------------------------------------------------------------------------

    def _scram_enabled(self) -> None:
        if self.protocol != "SASL_SSL":
            raise errors.AuthenticationError(f"SCRAM is not enabled on this listener ({self.protocol}); "
                                             f"it needs SASL_SSL")

    def ScramStart(self, request: pb.ScramStartRequest, context: grpc.ServicerContext) -> pb.ScramStartResponse:  # noqa: N802
        def start() -> pb.ScramStartResponse:
            self._scram_enabled()
            exchange_id, server_first = self.sessions.start(request.client_first, self.image().security.users)
            return pb.ScramStartResponse(server_first=server_first, exchange_id=exchange_id)
        return _guard(context, "ScramStart", start)

    def ScramFinish(self, request: pb.ScramFinishRequest, context: grpc.ServicerContext) -> pb.ScramFinishResponse:  # noqa: N802
        def finish() -> pb.ScramFinishResponse:
            self._scram_enabled()
            result = self.sessions.finish(request.exchange_id, request.client_final)
            return pb.ScramFinishResponse(server_final=result.server_final, session_token=result.token,
                                          lifetime_ms=result.lifetime_ms, principal=result.principal)
        return _guard(context, "ScramFinish", finish)

    def WhoAmI(self, request: pb.WhoAmIRequest, context: grpc.ServicerContext) -> pb.WhoAmIResponse:  # noqa: N802
        identity = current_identity()
        if identity is None:
            errors.abort(context, errors.AuthenticationError("the caller's identity is unknown"))
            raise AssertionError("unreachable")
        return pb.WhoAmIResponse(principal=identity.principal, host=identity.host, client_id=identity.client_id)

    # -- changes, forwarded ----------------------------------------------------------------------

    def _forward(self, method: str, request: Message) -> Message:
        response: Message = self.controller.security(method, request)
        offset = int(getattr(response, "metadata_offset"))
        try:
            self.wait_for(lambda image: image.offset >= offset, self.wait_s)
        except RequestTimeoutError:
            pass  # committed; this node is just behind
        return response

    def _acls_enabled(self) -> None:
        if not self.authorizer_enabled:
            raise errors.SecurityDisabledError("no authorizer is enabled on this broker (security.authorizer_enabled): "
                                               "ACLs would have no effect")

    def AlterUserScramCredentials(self, request: pb.AlterUserScramCredentialsRequest,  # noqa: N802
                                  context: grpc.ServicerContext) -> Message:
        return _guard(context, "AlterUserScramCredentials", lambda: self._forward("AlterUserScramCredentials", request))

    def CreateAcls(self, request: pb.CreateAclsRequest, context: grpc.ServicerContext) -> Message:  # noqa: N802
        def create() -> Message:
            self._acls_enabled()
            return self._forward("CreateAcls", request)
        return _guard(context, "CreateAcls", create)

    def DeleteAcls(self, request: pb.DeleteAclsRequest, context: grpc.ServicerContext) -> Message:  # noqa: N802
        def delete() -> Message:
            self._acls_enabled()
            return self._forward("DeleteAcls", request)
        return _guard(context, "DeleteAcls", delete)

    def AlterClientQuotas(self, request: pb.AlterClientQuotasRequest,  # noqa: N802
                          context: grpc.ServicerContext) -> Message:
        return _guard(context, "AlterClientQuotas", lambda: self._forward("AlterClientQuotas", request))

    # -- describes, from the image -------------------------------------------------------------------

    def DescribeUserScramCredentials(self, request: pb.DescribeUserScramCredentialsRequest,  # noqa: N802
                                     context: grpc.ServicerContext) -> pb.DescribeUserScramCredentialsResponse:
        def describe() -> pb.DescribeUserScramCredentialsResponse:
            users = self.image().security.users
            names = list(request.names) or sorted(users)
            missing = [n for n in names if n not in users]
            if missing:
                raise errors.ResourceNotFoundError(f"no SCRAM user {missing[0]!r}")
            return pb.DescribeUserScramCredentialsResponse(users=[
                pb.UserScramCredential(name=n, mechanism=users[n].mechanism, iterations=users[n].iterations)
                for n in names])
        return _guard(context, "DescribeUserScramCredentials", describe)

    def DescribeAcls(self, request: pb.DescribeAclsRequest,  # noqa: N802
                     context: grpc.ServicerContext) -> pb.DescribeAclsResponse:
        def describe() -> pb.DescribeAclsResponse:
            self._acls_enabled()
            selector = filter_from_pb(request.filter)
            found = [b for b in self.image().security.acls.values() if selector.matches(b)]
            return pb.DescribeAclsResponse(bindings=[binding_to_pb(b) for b in found])
        return _guard(context, "DescribeAcls", describe)

    def DescribeClientQuotas(self, request: pb.DescribeClientQuotasRequest,  # noqa: N802
                             context: grpc.ServicerContext) -> pb.DescribeClientQuotasResponse:
        quotas = self.image().security.quotas
        return pb.DescribeClientQuotasResponse(quotas=[
            pb.ClientQuota(entity=_entity_to_pb(entity), values=dict(values)) for entity, values in quotas.items()])

    def rpc_handler(self) -> grpc.GenericRpcHandler:
        def unary(method: Callable[[_Req, grpc.ServicerContext], Message],
                  request: type[_Req]) -> grpc.RpcMethodHandler[_Req, Message]:
            return grpc.unary_unary_rpc_method_handler(method, request_deserializer=request.FromString,
                                                       response_serializer=lambda m: m.SerializeToString())
        return grpc.method_handlers_generic_handler(SERVICE, {
            "ScramStart": unary(self.ScramStart, pb.ScramStartRequest),
            "ScramFinish": unary(self.ScramFinish, pb.ScramFinishRequest),
            "WhoAmI": unary(self.WhoAmI, pb.WhoAmIRequest),
            "AlterUserScramCredentials": unary(self.AlterUserScramCredentials, pb.AlterUserScramCredentialsRequest),
            "DescribeUserScramCredentials": unary(self.DescribeUserScramCredentials,
                                                  pb.DescribeUserScramCredentialsRequest),
            "CreateAcls": unary(self.CreateAcls, pb.CreateAclsRequest),
            "DescribeAcls": unary(self.DescribeAcls, pb.DescribeAclsRequest),
            "DeleteAcls": unary(self.DeleteAcls, pb.DeleteAclsRequest),
            "AlterClientQuotas": unary(self.AlterClientQuotas, pb.AlterClientQuotasRequest),
            "DescribeClientQuotas": unary(self.DescribeClientQuotas, pb.DescribeClientQuotasRequest),
        })
