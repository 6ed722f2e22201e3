"""The broker's ``[security]`` settings refuse what is not built or cannot be honoured, with
``InvalidConfigError`` naming the setting; ``conf/broker.toml``'s table loads as documented.
Adds well under 1 s."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from spark_log.config import BrokerConfig, SecurityConfig, from_mapping, load_toml
from spark_log.errors import InvalidConfigError

REPO = Path(__file__).resolve().parents[4]
TLS = {"security_protocol": "SSL", "ssl_certfile": "node.pem", "ssl_keyfile": "node.key"}


@pytest.mark.parametrize(("values", "key", "says"), [
    ({"security_protocol": "SASL_PLAINTEXT"}, "security.security_protocol", "never crosses a plaintext link"),
    ({"security_protocol": "TLS"}, "security.security_protocol", "PLAINTEXT, SSL, SASL_SSL"),
    ({**TLS, "ssl_cafile": "ca.pem", "ssl_client_auth": "requested"}, "security.ssl_client_auth", "optional"),
    ({**TLS, "security_protocol": "SASL_SSL", "inter_node_secret_file": "s",
      "sasl_enabled_mechanisms": ["PLAIN"]}, "security.sasl_enabled_mechanisms", "only SCRAM-SHA-256"),
    ({**TLS, "security_protocol": "SASL_SSL", "inter_node_secret_file": "s",
      "sasl_enabled_mechanisms": ["GSSAPI"]}, "security.sasl_enabled_mechanisms", "only SCRAM-SHA-256"),
    ({"security_protocol": "SSL"}, "security.ssl_certfile", "certificate and key"),
    ({"ssl_certfile": "node.pem", "ssl_keyfile": "node.key"}, "security.security_protocol", "need security_protocol"),
    ({"authorizer_enabled": True}, "security.authorizer_enabled", "authenticated callers"),
    ({**TLS, "authorizer_enabled": True}, "security.inter_node_secret_file", "nodes must authenticate"),
    ({**TLS, "security_protocol": "SASL_SSL"}, "security.inter_node_secret_file", "nodes must authenticate"),
    ({**TLS, "ssl_client_auth": "required"}, "security.ssl_cafile", "CA"),
    ({**TLS, "inter_node_secret_file": "s", "authorizer_enabled": True, "super_users": ["admin"]},
     "security.super_users", "User:<name>"),
    ({"sasl_session_lifetime_ms": 10}, "security.sasl_session_lifetime_ms", ">= 1000"),
])
def test_what_is_not_built_is_refused_by_name(values: dict[str, Any], key: str, says: str) -> None:
    with pytest.raises(InvalidConfigError) as refused:
        from_mapping(SecurityConfig, values)
    assert refused.value.details["key"] == key and says in str(refused.value)


def test_an_unknown_security_key_is_refused() -> None:
    with pytest.raises(InvalidConfigError) as refused:
        from_mapping(SecurityConfig, {**TLS, "ssl_keystore_type": "JKS"})
    assert "ssl_keystore_type" in str(refused.value)


def test_accepted_settings_and_the_documented_table() -> None:
    mtls = from_mapping(SecurityConfig, {**TLS, "ssl_cafile": "ca.pem", "ssl_client_auth": "required",
                                         "authorizer_enabled": True, "super_users": ["User:CN=node-1"]})
    assert mtls.tls and mtls.super_users == ("User:CN=node-1",)
    shipped = load_toml(BrokerConfig, REPO / "conf" / "broker.toml")
    assert shipped.security == SecurityConfig()  # the documented defaults: everything off


def test_auto_created_topics_are_refused_beside_the_authorizer() -> None:
    """Auto-creation has no CREATE check (Kafka asks for it): refused with the authorizer on."""
    secured = from_mapping(SecurityConfig, {**TLS, "ssl_cafile": "ca.pem", "ssl_client_auth": "required",
                                            "authorizer_enabled": True, "super_users": ["User:CN=node-1"]})
    with pytest.raises(InvalidConfigError, match="auto_create_topics"):
        BrokerConfig(broker_id=1, auto_create_topics=True, security=secured)
    assert BrokerConfig(broker_id=1, auto_create_topics=True).auto_create_topics  # without it: accepted
    assert not BrokerConfig(broker_id=1, security=secured).auto_create_topics
