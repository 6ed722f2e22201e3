"""Pure rules for the security changes the active controller commits: SCRAM users, ACLs,
client quotas.  Each function validates a request against the current image and returns
the records to propose (plus what the caller answers); a refusal raises a typed error and
returns nothing, so nothing is proposed.

- ``scram_records``: upsert (a new credential replaces the old one) or delete users.
  Names are non-empty, at most 256 characters, without control characters, not
  ``<default>``; SCRAM-SHA-256 only; iterations within ``spark_log.scram``'s bounds; a
  salt of at least 16 bytes and 32-byte keys.  Deleting an unknown user:
  ``ResourceNotFoundError``; a name both upserted and deleted: ``InvalidRequestError``.
- ``create_acl_records``: each binding validated (``spark_log.acls.validate_binding``); a
  binding that already exists is not added again (creating is idempotent).
- ``delete_acl_records``: every binding matching each filter; returns, per filter, the
  bindings it removed (a binding matched by two filters is removed once, reported twice).
- ``quota_records``: set or remove ``producer_byte_rate`` / ``consumer_byte_rate`` of one
  entity; rates are finite and > 0.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

from brokers.metadata.image import MetadataImage
from brokers.metadata.records import (
    ClientQuotaRecord,
    MetadataRecord,
    RemoveAccessControlEntryRecord,
    RemoveUserScramCredentialRecord,
    UserScramCredentialRecord,
)
from brokers.metadata.security_image import DEFAULT, QUOTA_KEYS, QuotaEntity, binding_record
from spark_log.acls import AclBinding, AclBindingFilter, validate_binding
from spark_log.errors import InvalidConfigError, InvalidRequestError, ResourceNotFoundError
from spark_log.scram import MECHANISM, check_iterations

__all__ = ["ScramUpsertion", "scram_records", "create_acl_records", "delete_acl_records", "quota_records",
           "check_name"]


@dataclass(frozen=True, slots=True)
class ScramUpsertion:
    name: str
    mechanism: str
    iterations: int
    salt: bytes
    stored_key: bytes
    server_key: bytes


def check_name(name: str, what: str) -> str:
    """A user name or client id: non-empty, <= 256 chars, no control characters, not ``<default>``."""
    if not isinstance(name, str) or not name or len(name) > 256 or any(ord(c) < 32 for c in name):
        raise InvalidRequestError(f"{what} must be 1..256 printable characters, got {name!r}")
    if name == DEFAULT:
        raise InvalidRequestError(f"{what} {DEFAULT!r} is reserved for default quotas")
    return name


def scram_records(image: MetadataImage, upsertions: Sequence[ScramUpsertion],
                  deletions: Sequence[tuple[str, str]]) -> list[MetadataRecord]:
    if not upsertions and not deletions:
        raise InvalidRequestError("nothing to alter: give users to upsert or delete")
    records: list[MetadataRecord] = []
    touched: set[str] = set()
    for name, mechanism in deletions:
        check_name(name, "user name")
        if mechanism != MECHANISM:
            raise InvalidRequestError(f"mechanism must be {MECHANISM}, got {mechanism!r}")
        if name not in image.security.users:
            raise ResourceNotFoundError(f"no SCRAM user {name!r}")
        if name in touched:
            raise InvalidRequestError(f"user {name!r} is named twice in one request")
        touched.add(name)
        records.append(RemoveUserScramCredentialRecord(name=name, mechanism=mechanism))
    for up in upsertions:
        check_name(up.name, "user name")
        if up.mechanism != MECHANISM:
            raise InvalidRequestError(f"mechanism must be {MECHANISM}, got {up.mechanism!r}")
        try:
            check_iterations(up.iterations)
        except InvalidConfigError as exc:
            raise InvalidRequestError(exc.message) from None
        if len(up.salt) < 16 or len(up.stored_key) != 32 or len(up.server_key) != 32:
            raise InvalidRequestError("a SCRAM-SHA-256 credential has a salt of >= 16 bytes and 32-byte keys")
        if up.name in touched:
            raise InvalidRequestError(f"user {up.name!r} is named twice in one request")
        touched.add(up.name)
        records.append(UserScramCredentialRecord(name=up.name, mechanism=up.mechanism, salt=up.salt,
                                                 stored_key=up.stored_key, server_key=up.server_key,
                                                 iterations=up.iterations))
    return records


def create_acl_records(image: MetadataImage, bindings: Sequence[AclBinding],
                       new_id: Callable[[], str]) -> list[MetadataRecord]:
    if not bindings:
        raise InvalidRequestError("no ACL to create")
    existing = set(image.security.acls.values())
    records: list[MetadataRecord] = []
    for binding in bindings:
        validate_binding(binding)
        if binding in existing:
            continue
        existing.add(binding)
        records.append(binding_record(new_id(), binding))
    return records


def delete_acl_records(image: MetadataImage, filters: Sequence[AclBindingFilter]
                       ) -> tuple[list[MetadataRecord], list[list[AclBinding]]]:
    if not filters:
        raise InvalidRequestError("no ACL filter given")
    records: list[MetadataRecord] = []
    removed: set[str] = set()
    results: list[list[AclBinding]] = []
    for selector in filters:
        matched = [(acl_id, b) for acl_id, b in image.security.acls.items() if selector.matches(b)]
        results.append([b for _, b in matched])
        for acl_id, _ in matched:
            if acl_id not in removed:
                removed.add(acl_id)
                records.append(RemoveAccessControlEntryRecord(id=acl_id))
    return records, results


def quota_records(image: MetadataImage, entity: QuotaEntity,
                  changes: Sequence[tuple[str, float | None]]) -> list[MetadataRecord]:
    """``changes``: ``(key, bytes per second)`` to set, ``(key, None)`` to remove."""
    if entity.user is None and entity.client_id is None:
        raise InvalidRequestError("a quota entity names a user, a client id, or both (or their defaults)")
    for part, what in ((entity.user, "user"), (entity.client_id, "client id")):
        if part is not None and part != DEFAULT:
            check_name(part, what)
    if not changes:
        raise InvalidRequestError("no quota to set or remove")
    records: list[MetadataRecord] = []
    seen: set[str] = set()
    for key, value in changes:
        if key not in QUOTA_KEYS:
            raise InvalidRequestError(f"quota key must be one of {', '.join(QUOTA_KEYS)}, got {key!r}")
        if key in seen:
            raise InvalidRequestError(f"quota {key} is named twice")
        seen.add(key)
        if value is not None and (not math.isfinite(value) or value <= 0):
            raise InvalidRequestError(f"quota {key} must be a positive number of bytes per second, got {value!r}")
        records.append(ClientQuotaRecord(user=entity.user, client_id=entity.client_id, key=key, value=value))
    return records
