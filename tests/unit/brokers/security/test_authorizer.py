"""Kafka's ACL decision: deny by default, deny beats allow, prefixes, implied operations, super users."""
from __future__ import annotations

from types import MappingProxyType

from brokers.metadata.security_image import SecurityImage
from brokers.security.authorizer import Authorizer
from spark_log.acls import AclBinding, Operation, PatternType, Permission, Resource, ResourceType

T = ResourceType.TOPIC
O = Operation


def image(*bindings: AclBinding) -> SecurityImage:
    return SecurityImage(acls=MappingProxyType({str(i): b for i, b in enumerate(bindings)}))


def acl(name: str, op: Operation, permission: Permission = Permission.ALLOW, *, principal: str = "User:alice",
        pattern: PatternType = PatternType.LITERAL, host: str = "*") -> AclBinding:
    return AclBinding(T, name, pattern, principal, host, op, permission)


def allowed(security: SecurityImage, op: Operation, name: str, principal: str = "User:alice",
            host: str = "10.0.0.1", authorizer: Authorizer | None = None) -> bool:
    return (authorizer or Authorizer()).authorize(security, principal, host, op, Resource(T, name))


def test_deny_by_default() -> None:
    assert not allowed(image(), O.READ, "clicks")
    assert not allowed(image(acl("clicks", O.READ, principal="User:bob")), O.READ, "clicks")


def test_deny_beats_allow() -> None:
    security = image(acl("clicks", O.READ), acl("clicks", O.READ, Permission.DENY))
    assert not allowed(security, O.READ, "clicks")
    wildcard_deny = image(acl("clicks", O.ALL), acl("*", O.READ, Permission.DENY, principal="User:*"))
    assert not allowed(wildcard_deny, O.READ, "clicks")
    assert allowed(wildcard_deny, O.WRITE, "clicks")  # the deny names READ only


def test_a_prefixed_acl_covers_exactly_its_prefix() -> None:
    security = image(acl("orders-", O.READ, pattern=PatternType.PREFIXED))
    assert allowed(security, O.READ, "orders-eu") and allowed(security, O.READ, "orders-")
    for other in ("orders", "order-eu", "xorders-eu"):
        assert not allowed(security, O.READ, other), other


def test_implied_describe_but_not_the_reverse() -> None:
    security = image(acl("clicks", O.WRITE))
    assert allowed(security, O.DESCRIBE, "clicks")
    assert not allowed(security, O.READ, "clicks")
    assert not allowed(image(acl("clicks", O.DESCRIBE)), O.READ, "clicks")
    # a deny of READ does not deny DESCRIBE (Kafka's rule)
    assert allowed(image(acl("clicks", O.WRITE), acl("clicks", O.READ, Permission.DENY)), O.DESCRIBE, "clicks")


def test_hosts_wildcard_principal_super_users_and_nodes() -> None:
    security = image(acl("clicks", O.READ, host="10.0.0.2"), acl("public", O.READ, principal="User:*"))
    assert not allowed(security, O.READ, "clicks", host="10.0.0.1")
    assert allowed(security, O.READ, "clicks", host="10.0.0.2")
    assert allowed(security, O.READ, "public", principal="User:ANONYMOUS")
    supers = Authorizer(("User:admin",))
    assert allowed(image(acl("clicks", O.READ, Permission.DENY, principal="User:admin")), O.READ, "clicks",
                   principal="User:admin", authorizer=supers)
    assert allowed(image(), O.CLUSTER_ACTION, "x", principal="Node:3")


def test_a_new_image_is_a_new_decision() -> None:
    authorizer = Authorizer()
    before = image()
    assert not allowed(before, O.READ, "clicks", authorizer=authorizer)
    after = image(acl("clicks", O.READ))
    assert allowed(after, O.READ, "clicks", authorizer=authorizer)
    assert not allowed(before, O.READ, "clicks", authorizer=authorizer)
