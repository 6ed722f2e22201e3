"""The security part of the metadata image: SCRAM users, ACLs and client quotas.

``SecurityImage`` is immutable (read-only mappings nobody mutates), replayed from the
records of ``records.py`` by ``SecurityDelta`` (lazy: untouched images are reused, so
``new.security is old.security`` when no security record came), and written back to
records by ``security_records`` for snapshots.

- ``users``: username -> ``spark_log.scram.ScramCredential`` (SCRAM-SHA-256 only);
- ``acls``: ACL id -> ``spark_log.acls.AclBinding``;
- ``quotas``: ``QuotaEntity`` -> {quota key: bytes per second}.

A record that cannot apply (an unknown enum value, a removal of something absent) raises
``ValueError``; ``MetadataDelta`` turns it into its ``ReplayError``.
Thread-safety: images are shared freely; a delta belongs to one thread.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping, TypeVar

from spark_log.acls import AclBinding, Operation, PatternType, Permission, ResourceType
from spark_log.scram import ScramCredential

from .records import (
    AccessControlEntryRecord,
    ClientQuotaRecord,
    MetadataRecord,
    RemoveAccessControlEntryRecord,
    RemoveUserScramCredentialRecord,
    UserScramCredentialRecord,
)

__all__ = ["DEFAULT", "QUOTA_KEYS", "QuotaEntity", "SecurityImage", "SecurityDelta", "EMPTY_SECURITY",
           "security_records", "binding_from_record", "binding_record"]

DEFAULT = "<default>"
QUOTA_KEYS = ("producer_byte_rate", "consumer_byte_rate")
SECURITY_RECORDS = (UserScramCredentialRecord, RemoveUserScramCredentialRecord, AccessControlEntryRecord,
                    RemoveAccessControlEntryRecord, ClientQuotaRecord)


@dataclass(frozen=True, slots=True)
class QuotaEntity:
    """A quota's entity: ``user``/``client_id`` None when absent, ``DEFAULT`` for the default."""

    user: str | None = None
    client_id: str | None = None

    def describe(self) -> str:
        parts = []
        if self.user is not None:
            parts.append(f"user={self.user}")
        if self.client_id is not None:
            parts.append(f"client-id={self.client_id}")
        return ",".join(parts)


_K = TypeVar("_K")
_V = TypeVar("_V")


def _frozen(values: Mapping[_K, _V] | None = None) -> Mapping[_K, _V]:
    return MappingProxyType(dict(values or {}))


@dataclass(frozen=True, slots=True, kw_only=True)
class SecurityImage:
    users: Mapping[str, ScramCredential] = field(default_factory=_frozen)
    acls: Mapping[str, AclBinding] = field(default_factory=_frozen)
    quotas: Mapping[QuotaEntity, Mapping[str, float]] = field(default_factory=_frozen)

    def is_empty(self) -> bool:
        return not (self.users or self.acls or self.quotas)


EMPTY_SECURITY = SecurityImage()


def binding_from_record(record: AccessControlEntryRecord) -> AclBinding:
    try:
        return AclBinding(
            resource_type=ResourceType(record.resource_type), resource_name=record.resource_name,
            pattern_type=PatternType(record.pattern_type), principal=record.principal, host=record.host,
            operation=Operation(record.operation), permission=Permission(record.permission))
    except ValueError as exc:
        raise ValueError(f"ACL {record.id}: {exc}") from None


def binding_record(acl_id: str, binding: AclBinding) -> AccessControlEntryRecord:
    return AccessControlEntryRecord(
        id=acl_id, resource_type=binding.resource_type.value, resource_name=binding.resource_name,
        pattern_type=binding.pattern_type.value, principal=binding.principal, host=binding.host,
        operation=binding.operation.value, permission=binding.permission.value)


class SecurityDelta:
    """Security records replayed on top of ``image`` (see the module docstring)."""

    def __init__(self, image: SecurityImage) -> None:
        self.image = image
        self._users: dict[str, ScramCredential] | None = None
        self._acls: dict[str, AclBinding] | None = None
        self._quotas: dict[QuotaEntity, Mapping[str, float]] | None = None

    @property
    def changed(self) -> bool:
        return self._users is not None or self._acls is not None or self._quotas is not None

    def replay(self, record: MetadataRecord) -> None:
        """Fold one security record in; ``ValueError`` if it cannot apply (nothing changes)."""
        match record:
            case UserScramCredentialRecord():
                credential = ScramCredential(salt=record.salt, iterations=record.iterations,
                                             stored_key=record.stored_key, server_key=record.server_key,
                                             mechanism=record.mechanism)
                self._user_map()[record.name] = credential
            case RemoveUserScramCredentialRecord():
                users = self._user_map()
                if record.name not in users:
                    raise ValueError(f"no SCRAM user {record.name!r} to remove")
                del users[record.name]
            case AccessControlEntryRecord():
                binding = binding_from_record(record)
                self._acl_map()[record.id] = binding
            case RemoveAccessControlEntryRecord():
                acls = self._acl_map()
                if record.id not in acls:
                    raise ValueError(f"no ACL {record.id!r} to remove")
                del acls[record.id]
            case ClientQuotaRecord():
                if record.key not in QUOTA_KEYS:
                    raise ValueError(f"unknown quota key {record.key!r}")
                entity = QuotaEntity(record.user, record.client_id)
                quotas = self._quota_map()
                values = dict(quotas.get(entity, {}))
                if record.value is None:
                    values.pop(record.key, None)
                else:
                    values[record.key] = float(record.value)
                if values:
                    quotas[entity] = MappingProxyType(values)
                else:
                    quotas.pop(entity, None)
            case _:
                raise ValueError(f"not a security record: {record!r}")

    def _user_map(self) -> dict[str, ScramCredential]:
        if self._users is None:
            self._users = dict(self.image.users)
        return self._users

    def _acl_map(self) -> dict[str, AclBinding]:
        if self._acls is None:
            self._acls = dict(self.image.acls)
        return self._acls

    def _quota_map(self) -> dict[QuotaEntity, Mapping[str, float]]:
        if self._quotas is None:
            self._quotas = dict(self.image.quotas)
        return self._quotas

    def apply(self) -> SecurityImage:
        if not self.changed:
            return self.image
        return SecurityImage(
            users=_frozen(dict(sorted(self._users.items()))) if self._users is not None else self.image.users,
            acls=_frozen(dict(sorted(self._acls.items()))) if self._acls is not None else self.image.acls,
            quotas=_frozen(self._quotas) if self._quotas is not None else self.image.quotas,
        )


def security_records(image: SecurityImage) -> list[MetadataRecord]:
    """The records that rebuild ``image`` from ``EMPTY_SECURITY`` (snapshots)."""
    records: list[MetadataRecord] = []
    for name, credential in image.users.items():
        records.append(UserScramCredentialRecord(name=name, mechanism=credential.mechanism, salt=credential.salt,
                                                 stored_key=credential.stored_key, server_key=credential.server_key,
                                                 iterations=credential.iterations))
    for acl_id, binding in image.acls.items():
        records.append(binding_record(acl_id, binding))
    for entity, values in image.quotas.items():
        for key, value in values.items():
            records.append(ClientQuotaRecord(user=entity.user, client_id=entity.client_id, key=key, value=value))
    return records
