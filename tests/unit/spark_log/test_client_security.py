"""ClientSecurity: Kafka's client property names, refusals by name, and no secret in a repr or error."""
from __future__ import annotations

from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from spark_log import ClientSecurity
from spark_log.errors import InvalidConfigError

SECRET = "s3cr3t-Pa55"
JAAS = f'org.apache.kafka.common.security.scram.ScramLoginModule required username="etl" password="{SECRET}";'


def test_kafka_and_librdkafka_names() -> None:
    security = ClientSecurity.from_properties({"security.protocol": "sasl_ssl", "ssl.truststore.location": "/ca.pem",
                                               "ssl.truststore.type": "PEM", "sasl.mechanism": "SCRAM-SHA-256",
                                               "sasl.jaas.config": JAAS})
    assert (security.protocol, security.ca_file, security.username, security.password) == (
        "SASL_SSL", "/ca.pem", "etl", SECRET)
    rd = ClientSecurity.from_properties({"security.protocol": "SSL", "ssl.ca.location": "/ca.pem",
                                         "ssl.certificate.location": "/c.pem", "ssl.key.location": "/c.key"})
    assert (rd.cert_file, rd.key_file) == ("/c.pem", "/c.key")
    keystore = ClientSecurity.from_properties({"security.protocol": "SSL", "ssl.keystore.location": "/both.pem"})
    assert (keystore.cert_file, keystore.key_file) == ("/both.pem", "/both.pem")
    librdkafka = ClientSecurity.from_properties({"security.protocol": "SASL_SSL", "sasl.username": "u",
                                                 "sasl.password": SECRET})
    assert librdkafka.password == SECRET


@pytest.mark.parametrize("properties, key", [
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.username": "u", "sasl.password": SECRET}, "security.protocol"),
    ({"security.protocol": "SSL", "ssl.truststore.type": "JKS"}, "ssl.truststore.type"),
    ({"security.protocol": "SSL", "ssl.endpoint.identification.algorithm": ""}, "ssl.endpoint.identification"),
    ({"security.protocol": "SSL", "ssl.cipher.suites": "x"}, "ssl.cipher.suites"),
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.jaas.config": JAAS}, "sasl.mechanism"),
    ({"security.protocol": "SASL_SSL", "sasl.jaas.config": "PlainLoginModule required"}, "sasl.jaas.config"),
    ({"security.protocol": "SASL_SSL", "sasl.username": "u"}, "sasl.jaas.config"),
    ({"security.protocol": "PLAINTEXT", "sasl.username": "u", "sasl.password": SECRET}, "security.protocol"),
    ({"security.protocol": "SSL", "ssl.certificate.location": "/c.pem"}, "ssl.key.location"),
])
def test_refusals_name_the_setting_never_the_secret(properties: dict[str, str], key: str) -> None:
    with pytest.raises(InvalidConfigError) as caught:
        ClientSecurity.from_properties(properties)
    assert caught.value.details["key"].startswith(key)
    assert SECRET not in str(caught.value)


def test_repr_and_str_mask_secrets() -> None:
    security = ClientSecurity(protocol="SASL_SSL", username="etl", password=SECRET, key_password=SECRET,
                              ca_file="/ca.pem")
    assert SECRET not in repr(security) and SECRET not in str(security) and "password=***" in repr(security)


def test_an_encrypted_key_is_decrypted_in_memory(tmp_path: Path) -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    encrypted = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.BestAvailableEncryption(SECRET.encode()))
    (tmp_path / "k.pem").write_bytes(encrypted)
    (tmp_path / "c.pem").write_bytes(b"cert")
    security = ClientSecurity.from_properties({"security.protocol": "SSL", "ssl.certificate.location": str(tmp_path / "c.pem"),
                                               "ssl.key.location": str(tmp_path / "k.pem"), "ssl.key.password": SECRET})
    material = security.tls_material()
    assert material.private_key is not None and b"ENCRYPTED" not in material.private_key
    wrong = ClientSecurity(protocol="SSL", cert_file=str(tmp_path / "c.pem"), key_file=str(tmp_path / "k.pem"),
                           key_password="nope")
    with pytest.raises(InvalidConfigError, match="ssl.key.password"):
        wrong.tls_material()
    with pytest.raises(InvalidConfigError, match="ssl.ca.location"):
        ClientSecurity(protocol="SSL", ca_file=str(tmp_path / "missing.pem")).tls_material()


def test_properties_file(tmp_path: Path) -> None:
    path = tmp_path / "client.properties"
    path.write_text(f"# comment\nsecurity.protocol=SASL_SSL\nssl.ca.location = ca.pem\nsasl.username: u\n"
                    f"sasl.password={SECRET}\n")
    security = ClientSecurity.from_file(path).with_files_relative_to(tmp_path)
    assert security.ca_file == str(tmp_path / "ca.pem") and security.password == SECRET
