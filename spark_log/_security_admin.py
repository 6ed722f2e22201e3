"""``Admin``'s security calls: SCRAM users, ACLs, client quotas, whoami.

Each is one ``Security`` RPC (security.proto) to any broker, retried as ``Admin``'s other
calls.  User passwords never leave this process: ``add_user`` draws a 16-byte random salt
and sends only the SCRAM-SHA-256 credential (``spark_log.scram.make_credential``: salt,
iterations, StoredKey, ServerKey).  Quota entities are Kafka's: a mapping with ``"user"``
and/or ``"client-id"``, whose value ``None`` means the default entity.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from .acls import AclBinding, AclBindingFilter, binding_from_pb, binding_to_pb, filter_to_pb, validate_binding
from .errors import InvalidRequestError
from .proto import security_pb2 as pb
from .scram import MECHANISM, make_credential

__all__ = ["ScramUser", "QuotaEntry", "add_user", "delete_user", "list_users", "create_acls", "describe_acls",
           "delete_acls", "alter_client_quotas", "describe_client_quotas", "DEFAULT"]

DEFAULT = "<default>"
Call = Callable[[str, Any], Any]  # (Security method, request) -> response


@dataclass(frozen=True, slots=True)
class ScramUser:
    """A SCRAM user as the cluster stores it (never the password, salt or keys)."""

    name: str
    mechanism: str
    iterations: int


@dataclass(frozen=True, slots=True)
class QuotaEntry:
    """One entity's quotas: ``entity`` as Kafka writes it (``{"user": "alice"}``,
    ``{"user": None}`` for the default user, ``{"client-id": "etl"}``...), ``values`` in
    bytes per second by key (``producer_byte_rate``, ``consumer_byte_rate``)."""

    entity: dict[str, str | None]
    values: dict[str, float]


def add_user(call: Call, name: str, password: str, *, iterations: int, salt: bytes | None = None) -> None:
    if not isinstance(name, str) or not name:
        raise InvalidRequestError("a user name must be a non-empty string")
    credential = make_credential(password, salt if salt is not None else os.urandom(16), iterations)
    call("AlterUserScramCredentials", pb.AlterUserScramCredentialsRequest(upsertions=[pb.ScramCredentialUpsertion(
        name=name, mechanism=MECHANISM, iterations=iterations, salt=credential.salt,
        stored_key=credential.stored_key, server_key=credential.server_key)]))


def delete_user(call: Call, name: str) -> None:
    call("AlterUserScramCredentials", pb.AlterUserScramCredentialsRequest(
        deletions=[pb.ScramCredentialDeletion(name=name, mechanism=MECHANISM)]))


def list_users(call: Call, names: Sequence[str] = ()) -> list[ScramUser]:
    response = call("DescribeUserScramCredentials", pb.DescribeUserScramCredentialsRequest(names=list(names)))
    return [ScramUser(u.name, u.mechanism, u.iterations) for u in response.users]


def create_acls(call: Call, bindings: Sequence[AclBinding]) -> None:
    if isinstance(bindings, AclBinding):
        bindings = [bindings]
    call("CreateAcls", pb.CreateAclsRequest(bindings=[binding_to_pb(validate_binding(b)) for b in bindings]))


def describe_acls(call: Call, selector: AclBindingFilter) -> list[AclBinding]:
    response = call("DescribeAcls", pb.DescribeAclsRequest(filter=filter_to_pb(selector)))
    return [binding_from_pb(b) for b in response.bindings]


def delete_acls(call: Call, filters: Sequence[AclBindingFilter]) -> list[AclBinding]:
    if isinstance(filters, AclBindingFilter):
        filters = [filters]
    response = call("DeleteAcls", pb.DeleteAclsRequest(filters=[filter_to_pb(f) for f in filters]))
    deleted = [binding_from_pb(b) for result in response.results for b in result.deleted]
    return list(dict.fromkeys(deleted))


def _entity_pb(entity: Mapping[str, str | None]) -> pb.QuotaEntity:
    message = pb.QuotaEntity()
    for key, value in entity.items():
        name = key.replace("_", "-")
        if name not in ("user", "client-id"):
            raise InvalidRequestError(f"a quota entity has 'user' and/or 'client-id', got {key!r}")
        if value is not None and (not isinstance(value, str) or not value):
            raise InvalidRequestError(f"quota entity {name} must be a name or None (the default), got {value!r}")
        setattr(message, "user" if name == "user" else "client_id", DEFAULT if value is None else value)
    if not entity:
        raise InvalidRequestError("a quota entity names a user, a client id, or both")
    return message


def alter_client_quotas(call: Call, entity: Mapping[str, str | None], set_: Mapping[str, float] | None,
                        remove: Sequence[str]) -> None:
    ops = [pb.QuotaOp(key=key, value=float(value)) for key, value in (set_ or {}).items()]
    ops += [pb.QuotaOp(key=key, remove=True) for key in remove]
    call("AlterClientQuotas", pb.AlterClientQuotasRequest(entity=_entity_pb(entity), ops=ops))


def describe_client_quotas(call: Call) -> list[QuotaEntry]:
    response = call("DescribeClientQuotas", pb.DescribeClientQuotasRequest())
    out = []
    for quota in response.quotas:
        entity: dict[str, str | None] = {}
        if quota.entity.HasField("user"):
            entity["user"] = None if quota.entity.user == DEFAULT else quota.entity.user
        if quota.entity.HasField("client_id"):
            entity["client-id"] = None if quota.entity.client_id == DEFAULT else quota.entity.client_id
        out.append(QuotaEntry(entity=entity, values=dict(quota.values)))
    return out
