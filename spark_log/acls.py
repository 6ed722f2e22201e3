"""Access control lists in Kafka's model: who (principal, host) may or may not (permission)
do what (operation) to which resources (resource type, name, pattern).

    AclBinding(ResourceType.TOPIC, "clicks-", PatternType.PREFIXED, "User:alice", "*",
               Operation.READ, Permission.ALLOW)

- **Resource types**: ``TOPIC``, ``GROUP``, ``CLUSTER`` (one resource, named
  ``CLUSTER_NAME``), ``TRANSACTIONAL_ID``.
- **Patterns**: ``LITERAL`` (the name exactly; the literal name ``"*"`` matches every
  resource of the type) or ``PREFIXED`` (every name that starts with it).
- **Operations**: ``READ``, ``WRITE``, ``CREATE``, ``DELETE``, ``ALTER``, ``DESCRIBE``,
  ``CLUSTER_ACTION``, ``DESCRIBE_CONFIGS``, ``ALTER_CONFIGS``, ``IDEMPOTENT_WRITE`` and ``ALL``;
  ``VALID_OPERATIONS`` says which apply to which resource type.  Granting READ, WRITE, DELETE
  or ALTER implies DESCRIBE, ALTER_CONFIGS implies DESCRIBE_CONFIGS (``implied_by``).
- **Principals**: ``"User:<name>"`` (a SCRAM user, or a certificate's subject
  ``"User:CN=..."``), ``"User:*"`` (everyone), ``"User:ANONYMOUS"`` (unauthenticated).
- **Hosts**: the client's IP address, or ``"*"``.

``AclBindingFilter`` selects bindings for describe and delete: ``None`` fields match
anything; ``PatternType.ANY`` matches both patterns, ``PatternType.MATCH`` every binding
that would apply to the given resource name (literal equal, literal ``"*"``, prefixes of
it).  The decision itself (super users, deny beats allow, deny by default) is the
broker's authorizer (``brokers.security.authorizer``).  Values are immutable and hashable.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TypeVar

from .errors import InvalidRequestError
from .proto import security_pb2 as pb

__all__ = [
    "CLUSTER_NAME",
    "WILDCARD",
    "ResourceType",
    "PatternType",
    "Operation",
    "Permission",
    "Resource",
    "AclBinding",
    "AclBindingFilter",
    "VALID_OPERATIONS",
    "implied_by",
    "parse_enum",
    "validate_binding",
    "validate_principal",
    "binding_to_pb",
    "binding_from_pb",
    "filter_to_pb",
    "filter_from_pb",
]

CLUSTER_NAME = "spark-log-cluster"
WILDCARD = "*"


class ResourceType(enum.Enum):
    ANY = "any"  # filters only
    TOPIC = "topic"
    GROUP = "group"
    CLUSTER = "cluster"
    TRANSACTIONAL_ID = "transactional_id"


class PatternType(enum.Enum):
    ANY = "any"  # filters only
    MATCH = "match"  # filters only
    LITERAL = "literal"
    PREFIXED = "prefixed"


class Operation(enum.Enum):
    ANY = "any"  # filters only
    ALL = "all"
    READ = "read"
    WRITE = "write"
    CREATE = "create"
    DELETE = "delete"
    ALTER = "alter"
    DESCRIBE = "describe"
    CLUSTER_ACTION = "cluster_action"
    DESCRIBE_CONFIGS = "describe_configs"
    ALTER_CONFIGS = "alter_configs"
    IDEMPOTENT_WRITE = "idempotent_write"


class Permission(enum.Enum):
    ANY = "any"  # filters only
    ALLOW = "allow"
    DENY = "deny"


_O = Operation
VALID_OPERATIONS: dict[ResourceType, frozenset[Operation]] = {
    ResourceType.TOPIC: frozenset({_O.ALL, _O.READ, _O.WRITE, _O.CREATE, _O.DELETE, _O.ALTER, _O.DESCRIBE,
                                   _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS}),
    ResourceType.GROUP: frozenset({_O.ALL, _O.READ, _O.DELETE, _O.DESCRIBE}),
    ResourceType.CLUSTER: frozenset({_O.ALL, _O.CREATE, _O.ALTER, _O.DESCRIBE, _O.CLUSTER_ACTION,
                                     _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS, _O.IDEMPOTENT_WRITE}),
    ResourceType.TRANSACTIONAL_ID: frozenset({_O.ALL, _O.WRITE, _O.DESCRIBE}),
}

_IMPLIED: dict[Operation, frozenset[Operation]] = {
    _O.DESCRIBE: frozenset({_O.READ, _O.WRITE, _O.DELETE, _O.ALTER}),
    _O.DESCRIBE_CONFIGS: frozenset({_O.ALTER_CONFIGS}),
}


def implied_by(operation: Operation) -> frozenset[Operation]:
    """Operations whose ALLOW also allows ``operation`` (itself and ALL included)."""
    return frozenset({operation, _O.ALL}) | _IMPLIED.get(operation, frozenset())


_E = TypeVar("_E", bound=enum.Enum)


def parse_enum(cls: type[_E], value: object, what: str) -> _E:
    """``cls`` member named by ``value`` (a member, or its name in any case, with or without
    underscores: "Read", "cluster_action", "ClusterAction", "TRANSACTIONAL_ID");
    ``InvalidRequestError`` otherwise."""
    if isinstance(value, cls):
        return value
    if isinstance(value, str):
        wanted = value.strip().replace("_", "").replace("-", "").lower()
        for member in cls:
            if member.name.replace("_", "").lower() == wanted:
                return member
    names = ", ".join(m.name.lower() for m in cls)
    raise InvalidRequestError(f"{what} must be one of {names}; got {value!r}")


@dataclass(frozen=True, slots=True)
class Resource:
    """One concrete resource a request touches (never a pattern)."""

    resource_type: ResourceType
    name: str


@dataclass(frozen=True, slots=True)
class AclBinding:
    """One ACL (see the module docstring).  Build it with concrete values (no ANY/MATCH)."""

    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: Operation
    permission: Permission

    def applies_to(self, resource: Resource) -> bool:
        """Whether the binding's resource pattern covers ``resource``."""
        if self.resource_type is not resource.resource_type:
            return False
        if self.pattern_type is PatternType.LITERAL:
            return self.resource_name == resource.name or self.resource_name == WILDCARD
        return resource.name.startswith(self.resource_name)

    def describe(self) -> str:
        """One line, as ``kafka-acls --list`` prints it."""
        return (f"{self.permission.name.lower()} {self.principal} {self.operation.name.lower()} "
                f"{self.resource_type.name.lower()}:{self.pattern_type.name.lower()}:{self.resource_name} "
                f"from {self.host}")


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """Selects bindings (describe, delete); ``None`` fields match any value."""

    resource_type: ResourceType = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: Operation = Operation.ANY
    permission: Permission = Permission.ANY

    def matches(self, binding: AclBinding) -> bool:
        if self.resource_type is not ResourceType.ANY and binding.resource_type is not self.resource_type:
            return False
        if not self._name_matches(binding):
            return False
        if self.principal is not None and binding.principal != self.principal:
            return False
        if self.host is not None and binding.host != self.host:
            return False
        if self.operation is not Operation.ANY and binding.operation is not self.operation:
            return False
        return self.permission is Permission.ANY or binding.permission is self.permission

    def _name_matches(self, binding: AclBinding) -> bool:
        pattern = self.pattern_type
        if pattern is PatternType.MATCH:
            if self.resource_name is None:
                return True
            return binding.applies_to(Resource(binding.resource_type, self.resource_name))
        if pattern is not PatternType.ANY and binding.pattern_type is not pattern:
            return False
        return self.resource_name is None or binding.resource_name == self.resource_name


def validate_principal(principal: str) -> str:
    """``"Type:name"`` with a non-empty type and name; returns it, else ``InvalidRequestError``."""
    kind, sep, name = principal.partition(":") if isinstance(principal, str) else ("", "", "")
    if not sep or not kind or not name or kind.strip() != kind:
        raise InvalidRequestError(f"a principal is 'User:<name>' (or 'User:*'), got {principal!r}")
    return principal


def validate_binding(binding: AclBinding) -> AclBinding:
    """Refuse what Kafka refuses: filter-only values, an operation the resource type does
    not have, the cluster under another name, an empty name, host or principal."""
    if not isinstance(binding, AclBinding):
        raise InvalidRequestError(f"expected an AclBinding, got {type(binding).__name__}")
    if binding.resource_type is ResourceType.ANY or binding.pattern_type in (PatternType.ANY, PatternType.MATCH):
        raise InvalidRequestError("an ACL names one resource type and a literal or prefixed pattern (ANY/MATCH "
                                  "are for filters)")
    if binding.operation is Operation.ANY or binding.permission is Permission.ANY:
        raise InvalidRequestError("an ACL names one operation and allow or deny (ANY is for filters)")
    if not isinstance(binding.resource_name, str) or not binding.resource_name:
        raise InvalidRequestError("an ACL's resource name must not be empty")
    if binding.pattern_type is PatternType.PREFIXED and binding.resource_name == WILDCARD:
        raise InvalidRequestError("a prefixed ACL cannot use the wildcard '*' (use a literal '*')")
    if binding.resource_type is ResourceType.CLUSTER and binding.resource_name != CLUSTER_NAME:
        raise InvalidRequestError(f"the cluster resource is named {CLUSTER_NAME!r}, got {binding.resource_name!r}")
    if binding.operation not in VALID_OPERATIONS[binding.resource_type]:
        valid = ", ".join(sorted(o.name.lower() for o in VALID_OPERATIONS[binding.resource_type]))
        raise InvalidRequestError(f"operation {binding.operation.name.lower()} does not apply to "
                                  f"{binding.resource_type.name.lower()} resources (valid: {valid})")
    if not isinstance(binding.host, str) or not binding.host:
        raise InvalidRequestError("an ACL's host is an IP address or '*'")
    validate_principal(binding.principal)
    return binding


# --- the wire (spark_log/proto/security.proto) ------------------------------------------------


def binding_to_pb(binding: AclBinding) -> pb.AclBinding:
    return pb.AclBinding(resource_type=binding.resource_type.value, resource_name=binding.resource_name,
                         pattern_type=binding.pattern_type.value, principal=binding.principal, host=binding.host,
                         operation=binding.operation.value, permission=binding.permission.value)


def binding_from_pb(message: pb.AclBinding) -> AclBinding:
    """A validated binding (``InvalidRequestError`` for anything ``validate_binding`` refuses)."""
    return validate_binding(AclBinding(
        resource_type=parse_enum(ResourceType, message.resource_type, "resource type"),
        resource_name=message.resource_name,
        pattern_type=parse_enum(PatternType, message.pattern_type, "pattern type"),
        principal=message.principal, host=message.host,
        operation=parse_enum(Operation, message.operation, "operation"),
        permission=parse_enum(Permission, message.permission, "permission")))


def filter_to_pb(selector: AclBindingFilter) -> pb.AclFilter:
    message = pb.AclFilter(resource_type=selector.resource_type.value, pattern_type=selector.pattern_type.value,
                           operation=selector.operation.value, permission=selector.permission.value)
    if selector.resource_name is not None:
        message.resource_name = selector.resource_name
    if selector.principal is not None:
        message.principal = selector.principal
    if selector.host is not None:
        message.host = selector.host
    return message


def filter_from_pb(message: pb.AclFilter) -> AclBindingFilter:
    def member(cls: type[_E], value: str, what: str, default: _E) -> _E:
        return default if not value else parse_enum(cls, value, what)

    return AclBindingFilter(
        resource_type=member(ResourceType, message.resource_type, "resource type", ResourceType.ANY),
        resource_name=message.resource_name if message.HasField("resource_name") else None,
        pattern_type=member(PatternType, message.pattern_type, "pattern type", PatternType.ANY),
        principal=message.principal if message.HasField("principal") else None,
        host=message.host if message.HasField("host") else None,
        operation=member(Operation, message.operation, "operation", Operation.ANY),
        permission=member(Permission, message.permission, "permission", Permission.ANY))
