"""``SecurityInterceptor``: the one place every RPC of the node is authenticated,
authorized and counted against quotas.

Installed on the node's one ``grpc.Server`` (``grpc.server(..., interceptors=[...])``), it
wraps the handler of every method the server serves, whoever registered it (broker,
controller, Raft, security, and services added later).  For each call:

1. ``exempt`` rules (the SCRAM exchange) go straight to the handler;
2. the caller's principal (``authn.Authenticator``): refusals abort with
   ``AuthenticationError`` / ``SessionExpiredError`` (gRPC ``UNAUTHENTICATED``);
3. with the authorizer on, the method's rule (``rules.RULES``) must exist and each of its
   checks must be allowed (``authorizer.Authorizer``), else the call is aborted with the
   typed authorization error of the resource (``TopicAuthorizationError``,
   ``ClusterAuthorizationError``, ...; gRPC ``PERMISSION_DENIED``) before the handler runs;
4. a call counted against a byte-rate quota (``quotas.QuotaManager``) whose bucket already
   has too many delayed answers is refused with ``ThrottledError``;
5. the handler runs, with the caller's identity readable through ``current_identity()``;
6. a rule's ``response_filter`` trims the answer to what the caller may see;
7. the quota is charged and the answer delayed by the throttle time, which it reports in
   ``throttle_time_ms``.

Fast path: without authorizer, with no quota in the image and unless the listener is
``SASL_SSL`` (which refuses unauthenticated calls), the principal is not computed: one
image read and a few comparisons per call.  Time (``sleep``) is injected for tests.  Thread-safety: the
interceptor is shared by every worker thread; it keeps no per-call state outside the
thread-local identity.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import grpc

from brokers.metadata.image import MetadataImage
from spark_log import errors
from spark_log.acls import ResourceType
from spark_log.errors import SparkLogError

from .authn import CLIENT_ID_HEADER, Authenticator
from .authorizer import Authorizer
from .principal import is_node
from .quotas import QuotaManager
from .rules import RULES, Check, Rule

__all__ = ["SecurityInterceptor", "CallIdentity", "current_identity", "peer_host"]


@dataclass(frozen=True, slots=True)
class CallIdentity:
    principal: str
    host: str
    client_id: str


_local = threading.local()

_DENIED: dict[ResourceType, type[errors.UnauthorizedError]] = {
    ResourceType.TOPIC: errors.TopicAuthorizationError,
    ResourceType.GROUP: errors.GroupAuthorizationError,
    ResourceType.CLUSTER: errors.ClusterAuthorizationError,
    ResourceType.TRANSACTIONAL_ID: errors.TransactionalIdAuthorizationError,
}


def current_identity() -> CallIdentity | None:
    """The identity of the call the current thread serves (None outside a call, or on the
    fast path where nobody needs it)."""
    identity: CallIdentity | None = getattr(_local, "identity", None)
    return identity


def peer_host(peer: str) -> str:
    """The IP address of a gRPC peer string ("ipv4:1.2.3.4:5", "ipv6:[::1]:5")."""
    kind, _, rest = peer.partition(":")
    if kind == "ipv4":
        return rest.rpartition(":")[0]
    if kind == "ipv6":
        return rest.rpartition(":")[0].strip("[]")
    return peer


def _denied(check: Check, principal: str) -> errors.UnauthorizedError:
    operation, resource = check[0]
    names = " or ".join(f"{op.name.lower()} on {res.resource_type.name.lower()} {res.name!r}" for op, res in check)
    return _DENIED[resource.resource_type](f"principal {principal} is not allowed {names}")


class SecurityInterceptor(grpc.ServerInterceptor):
    """See the module docstring.  ``image()`` gives the node's current metadata image."""

    def __init__(self, *, authenticator: Authenticator, authorizer: Authorizer | None, quotas: QuotaManager,
                 image: Callable[[], MetadataImage], always_authenticate: bool,
                 rules: Mapping[str, Rule] = RULES, sleep: Callable[[float], None] = time.sleep) -> None:
        self.authenticator = authenticator
        self.authorizer = authorizer
        self.quotas = quotas
        self.image = image
        self.always_authenticate = always_authenticate
        self.rules = rules
        self._sleep = sleep

    def intercept_service(self, continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler[Any, Any] | None],
                          handler_call_details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler[Any, Any] | None:
        handler = continuation(handler_call_details)
        if handler is None:
            return None
        method = handler_call_details.method
        rule = self.rules.get(method)
        if handler.unary_unary is not None:
            inner = handler.unary_unary

            def unary(request: Any, context: grpc.ServicerContext) -> Any:
                return self.serve(method, rule, inner, request, context)

            return grpc.unary_unary_rpc_method_handler(unary, request_deserializer=handler.request_deserializer,
                                                       response_serializer=handler.response_serializer)
        return self._wrap_streaming(method, rule, handler)

    def _wrap_streaming(self, method: str, rule: Rule | None,
                        handler: grpc.RpcMethodHandler[Any, Any]) -> grpc.RpcMethodHandler[Any, Any]:
        """Streaming methods (none today): authenticated and, with the authorizer on,
        checked with ``rule.checks(None)`` (undeclared: refused); no quotas or filters."""
        def guard(context: grpc.ServicerContext) -> None:
            if rule is not None and rule.exempt:
                return
            self._admit(method, rule, None, context, self.image())

        kinds = (("unary_stream", grpc.unary_stream_rpc_method_handler),
                 ("stream_unary", grpc.stream_unary_rpc_method_handler),
                 ("stream_stream", grpc.stream_stream_rpc_method_handler))
        for name, build in kinds:
            inner = getattr(handler, name)
            if inner is not None:
                def behavior(request: Any, context: grpc.ServicerContext, _inner: Any = inner) -> Any:
                    guard(context)
                    return _inner(request, context)
                wrapped: grpc.RpcMethodHandler[Any, Any] = build(
                    behavior, request_deserializer=handler.request_deserializer,
                    response_serializer=handler.response_serializer)
                return wrapped
        return handler

    # -- one unary call -----------------------------------------------------------------------

    def serve(self, method: str, rule: Rule | None, inner: Callable[[Any, grpc.ServicerContext], Any],
              request: Any, context: grpc.ServicerContext) -> Any:
        if rule is not None and rule.exempt:
            return inner(request, context)
        image = self.image()
        security = image.security
        quota = rule.quota if rule is not None and security.quotas else None
        needed = self.always_authenticate or self.authorizer is not None or quota is not None
        if not needed and not (rule is not None and rule.identity):
            return inner(request, context)  # fast path: nothing to check, nobody to name
        identity = self._admit(method, rule, request, context, image)
        charge_key = None
        if quota is not None and not is_node(identity.principal):
            user = identity.principal.partition(":")[2]
            if not self.quotas.admit(security.quotas, quota.key, user, identity.client_id):
                errors.abort(context, errors.ThrottledError(
                    f"{identity.principal} is over its {quota.key} quota with answers still being delayed; "
                    f"nothing was done, retry after the delayed answers"))
            charge_key = user
        _local.identity = identity
        try:
            response = inner(request, context)
        finally:
            _local.identity = None
        if rule is not None and rule.response_filter is not None and self.authorizer is not None:
            authorizer = self.authorizer
            response = rule.response_filter(request, response, lambda op, res: authorizer.authorize(
                security, identity.principal, identity.host, op, res))
        if quota is not None and charge_key is not None:
            nbytes = quota.measure(request, response)
            if nbytes:
                charge = self.quotas.charge(security.quotas, quota.key, charge_key, identity.client_id, nbytes)
                if charge.throttle_ms:
                    try:
                        self._sleep(charge.throttle_ms / 1000)
                    finally:
                        self.quotas.done(charge)
                    response = quota.stamp(response, charge.throttle_ms)
        return response

    def _admit(self, method: str, rule: Rule | None, request: Any, context: grpc.ServicerContext,
               image: MetadataImage) -> CallIdentity:
        """Authenticate and authorize one call (aborting it on refusal); its identity."""
        client_id = ""
        metadata = context.invocation_metadata() or ()
        for key, value in metadata:
            if key == CLIENT_ID_HEADER:
                client_id = value if isinstance(value, str) else value.decode(errors="replace")
        try:
            # grpc's stubs type auth_context() as Mapping[str, bytes]; it maps names to lists of bytes
            auth: Any = context.auth_context()
            principal = self.authenticator.authenticate(auth, metadata)
        except SparkLogError as exc:
            errors.abort(context, exc)
            raise  # abort raises
        identity = CallIdentity(principal, peer_host(context.peer()), client_id)
        if self.authorizer is None or self.authorizer.is_super(principal):
            return identity
        if rule is None:
            errors.abort(context, errors.UnauthorizedError(
                f"{method} has no declared access rule (brokers/security/rules.py): refused"))
        assert rule is not None
        try:
            checks = rule.checks(request)
        except Exception:  # noqa: BLE001 - a request the rule cannot read is refused, not served
            errors.abort(context, errors.UnauthorizedError(f"{method}: the request cannot be authorized"))
            raise
        authorize = self.authorizer.authorize
        for check in checks:
            if not any(authorize(image.security, principal, identity.host, op, res) for op, res in check):
                errors.abort(context, _denied(check, principal))
        return identity

