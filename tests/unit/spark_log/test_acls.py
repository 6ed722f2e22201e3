"""The ACL model (spark_log.acls): patterns, filters, validation, the wire."""
from __future__ import annotations

import pytest

from spark_log.acls import (
    CLUSTER_NAME,
    AclBinding,
    AclBindingFilter,
    Operation,
    PatternType,
    Permission,
    Resource,
    ResourceType,
    binding_from_pb,
    binding_to_pb,
    filter_from_pb,
    filter_to_pb,
    implied_by,
    parse_enum,
    validate_binding,
)
from spark_log.errors import InvalidRequestError

T = ResourceType.TOPIC


def acl(name: str, pattern: PatternType = PatternType.LITERAL, op: Operation = Operation.READ,
        permission: Permission = Permission.ALLOW, principal: str = "User:alice") -> AclBinding:
    return AclBinding(T, name, pattern, principal, "*", op, permission)


def test_a_prefixed_pattern_covers_exactly_its_prefix() -> None:
    prefixed = acl("orders-", PatternType.PREFIXED)
    assert prefixed.applies_to(Resource(T, "orders-"))
    assert prefixed.applies_to(Resource(T, "orders-eu"))
    for other in ("orders", "order-eu", "xorders-eu", "Orders-eu"):
        assert not prefixed.applies_to(Resource(T, other)), other
    assert not prefixed.applies_to(Resource(ResourceType.GROUP, "orders-eu"))


def test_literal_and_wildcard() -> None:
    assert acl("orders").applies_to(Resource(T, "orders"))
    assert not acl("orders").applies_to(Resource(T, "orders-eu"))
    assert acl("*").applies_to(Resource(T, "anything"))


def test_implied_operations_follow_kafka() -> None:
    assert Operation.READ in implied_by(Operation.DESCRIBE) and Operation.WRITE in implied_by(Operation.DESCRIBE)
    assert Operation.ALTER_CONFIGS in implied_by(Operation.DESCRIBE_CONFIGS)
    assert implied_by(Operation.READ) == {Operation.READ, Operation.ALL}


def test_filters_match_and_select() -> None:
    bindings = [acl("orders-", PatternType.PREFIXED), acl("orders-eu"), acl("*"), acl("clicks", op=Operation.WRITE)]
    match = AclBindingFilter(resource_type=T, resource_name="orders-eu", pattern_type=PatternType.MATCH)
    assert [b.resource_name for b in bindings if match.matches(b)] == ["orders-", "orders-eu", "*"]
    literal = AclBindingFilter(resource_name="orders-eu", pattern_type=PatternType.LITERAL)
    assert [b.resource_name for b in bindings if literal.matches(b)] == ["orders-eu"]
    assert [b.resource_name for b in bindings if AclBindingFilter(operation=Operation.WRITE).matches(b)] == ["clicks"]
    assert all(AclBindingFilter().matches(b) for b in bindings)


@pytest.mark.parametrize("binding, why", [
    (AclBinding(ResourceType.ANY, "x", PatternType.LITERAL, "User:a", "*", Operation.READ, Permission.ALLOW), "ANY"),
    (AclBinding(T, "x", PatternType.MATCH, "User:a", "*", Operation.READ, Permission.ALLOW), "ANY/MATCH"),
    (AclBinding(T, "", PatternType.LITERAL, "User:a", "*", Operation.READ, Permission.ALLOW), "empty"),
    (AclBinding(T, "*", PatternType.PREFIXED, "User:a", "*", Operation.READ, Permission.ALLOW), "wildcard"),
    (AclBinding(ResourceType.CLUSTER, "kafka-cluster", PatternType.LITERAL, "User:a", "*", Operation.ALTER,
                Permission.ALLOW), "named"),
    (AclBinding(ResourceType.GROUP, "g", PatternType.LITERAL, "User:a", "*", Operation.WRITE, Permission.ALLOW),
     "does not apply"),
    (AclBinding(T, "x", PatternType.LITERAL, "alice", "*", Operation.READ, Permission.ALLOW), "principal"),
    (AclBinding(T, "x", PatternType.LITERAL, "User:a", "", Operation.READ, Permission.ALLOW), "host"),
])
def test_invalid_bindings_are_refused(binding: AclBinding, why: str) -> None:
    with pytest.raises(InvalidRequestError, match=why.split("/")[0]):
        validate_binding(binding)


def test_wire_round_trip_and_enum_spellings() -> None:
    binding = AclBinding(ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL, "User:CN=x,O=y", "10.0.0.1",
                         Operation.CLUSTER_ACTION, Permission.DENY)
    assert binding_from_pb(binding_to_pb(binding)) == binding
    selector = AclBindingFilter(resource_type=T, resource_name="a", pattern_type=PatternType.PREFIXED,
                                principal="User:b", operation=Operation.WRITE)
    assert filter_from_pb(filter_to_pb(selector)) == selector
    assert filter_from_pb(filter_to_pb(AclBindingFilter())) == AclBindingFilter()
    for spelling in ("ClusterAction", "cluster_action", "CLUSTER_ACTION", "cluster-action"):
        assert parse_enum(Operation, spelling, "operation") is Operation.CLUSTER_ACTION
    with pytest.raises(InvalidRequestError, match="operation must be one of"):
        parse_enum(Operation, "fly", "operation")
