"""Kafka's ACL decision over the ACLs of the metadata image.

``Authorizer(super_users).authorize(security, principal, host, operation, resource)``:

1. super users (``security.super_users``) and nodes (``Node:<id>``) may do anything;
2. the ACLs that apply are those whose resource pattern covers the resource (literal name,
   literal ``*``, or a prefix of the name), whose principal is the caller's or ``User:*``,
   and whose host is the caller's or ``*``;
3. a DENY for the operation (or ALL) among them refuses: deny beats allow;
4. an ALLOW for the operation, for ALL, or for an operation that implies it (READ, WRITE,
   DELETE, ALTER imply DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS) allows;
5. anything else is refused: deny by default.

Decisions are cached per ``SecurityImage`` (images are immutable; a new image, i.e. an ACL
change, starts a new cache), at most ``cache_size`` entries.  Thread-safety: any thread.
"""
from __future__ import annotations

import threading

from brokers.metadata.security_image import SecurityImage
from spark_log.acls import WILDCARD, AclBinding, Operation, Permission, Resource, ResourceType, implied_by

from .principal import is_node

__all__ = ["Authorizer"]

_Key = tuple[str, str, Operation, ResourceType, str]


class Authorizer:
    def __init__(self, super_users: frozenset[str] | tuple[str, ...] = (), *, cache_size: int = 50_000) -> None:
        self.super_users = frozenset(super_users)
        self._cache_size = cache_size
        self._lock = threading.Lock()
        self._image: SecurityImage | None = None
        self._by_type: dict[ResourceType, list[AclBinding]] = {}
        self._cache: dict[_Key, bool] = {}

    def is_super(self, principal: str) -> bool:
        return principal in self.super_users or is_node(principal)

    def authorize(self, security: SecurityImage, principal: str, host: str, operation: Operation,
                  resource: Resource) -> bool:
        if self.is_super(principal):
            return True
        key = (principal, host, operation, resource.resource_type, resource.name)
        with self._lock:
            if security is not self._image:
                self._image, self._cache = security, {}
                self._by_type = {}
                for binding in security.acls.values():
                    self._by_type.setdefault(binding.resource_type, []).append(binding)
            cached = self._cache.get(key)
            bindings = self._by_type.get(resource.resource_type, [])
        if cached is not None:
            return cached
        decision = self._decide(bindings, principal, host, operation, resource)
        with self._lock:
            if security is self._image:
                if len(self._cache) >= self._cache_size:
                    self._cache.clear()
                self._cache[key] = decision
        return decision

    @staticmethod
    def _decide(bindings: list[AclBinding], principal: str, host: str, operation: Operation,
                resource: Resource) -> bool:
        allowing = implied_by(operation)
        allowed = False
        for binding in bindings:
            if binding.principal not in (principal, "User:*") or binding.host not in (host, WILDCARD):
                continue
            if not binding.applies_to(resource):
                continue
            if binding.permission is Permission.DENY:
                if binding.operation in (operation, Operation.ALL):
                    return False
            elif binding.operation in allowing:
                allowed = True
        return allowed
