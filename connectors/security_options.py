"""The connector's security options: Kafka's names, mapped onto ``spark_log.ClientSecurity``.

Spark's Kafka source takes the Kafka client's settings with a ``kafka.`` prefix; so does
this one, for reads and writes alike:

    .option("kafka.security.protocol", "SASL_SSL")
    .option("kafka.ssl.truststore.location", "/etc/ca.pem")          # PEM (also kafka.ssl.ca.location)
    .option("kafka.sasl.mechanism", "SCRAM-SHA-256")
    .option("kafka.sasl.jaas.config", 'org.apache.kafka.common.security.scram.ScramLoginModule '
                                      'required username="etl" password="...";')
    .option("kafka.ssl.keystore.location", "/etc/etl.pem")            # mutual TLS (PEM: chain + key)

Every ``kafka.security.*``, ``kafka.ssl.*`` and ``kafka.sasl.*`` option goes, without the
prefix, to ``ClientSecurity.from_properties`` (which lists the names it reads and refuses
any other); ``kafka.client.id`` becomes the clients' ``client_id`` (quotas per client id).

Secrets: the password and key password live only in the ``ClientSecurity`` object, which
never shows them in ``repr``; errors name the option, never its value.  Spark itself
redacts option values whose name matches ``spark.redaction.regex`` (``password``,
``secret``, ...) in plans and logs; ``kafka.sasl.jaas.config`` does not match it, so
prefer ``kafka.sasl.username``/``kafka.sasl.password`` (or set ``spark.redaction.regex``
to include ``jaas``).  The checkpoint holds offsets only, never options.
"""
from __future__ import annotations

from typing import Mapping

from spark_log import ClientSecurity
from spark_log.errors import InvalidConfigError

__all__ = ["SECURITY_OPTIONS", "split_security"]

# name -> (meaning, default); shown with the reader's and writer's options in the README.
SECURITY_OPTIONS: dict[str, tuple[str, str]] = {
    "kafka.security.protocol": ("PLAINTEXT, SSL or SASL_SSL", "PLAINTEXT"),
    "kafka.ssl.truststore.location": ("PEM file of the CA that signed the brokers' certificates "
                                      "(alias kafka.ssl.ca.location)", "the system roots"),
    "kafka.ssl.keystore.location": ("PEM file with this client's certificate chain and key (mutual TLS; "
                                    "or kafka.ssl.certificate.location + kafka.ssl.key.location)", "-"),
    "kafka.ssl.key.password": ("password of an encrypted private key", "-"),
    "kafka.sasl.mechanism": ("SCRAM-SHA-256", "SCRAM-SHA-256"),
    "kafka.sasl.jaas.config": ('ScramLoginModule required username="..." password="...";', "-"),
    "kafka.sasl.username / kafka.sasl.password": ("SCRAM credentials (librdkafka's names; redacted by Spark)", "-"),
    "kafka.client.id": ("client id for quotas", "none"),
}

_PREFIXES = ("kafka.security.", "kafka.ssl.", "kafka.sasl.")


def split_security(options: Mapping[str, str]) -> tuple[dict[str, str], ClientSecurity | None, str]:
    """``(other options, security settings or None, client id)`` of a data source's options.
    ``InvalidConfigError`` names a security option that is unknown or wrong."""
    rest: dict[str, str] = {}
    properties: dict[str, str] = {}
    client_id = ""
    for key, value in options.items():
        lowered = str(key).lower()
        if lowered.startswith(_PREFIXES):
            properties[lowered[len("kafka."):]] = value
        elif lowered == "kafka.client.id":
            client_id = str(value).strip()
        else:
            rest[key] = value
    if not properties:
        return rest, None, client_id
    try:
        security = ClientSecurity.from_properties(properties)
    except InvalidConfigError as exc:
        name = f"kafka.{exc.details['key']}" if exc.details.get("key") else "kafka.security.protocol"
        raise InvalidConfigError(f"option '{name}': {exc.message}", key=name) from None
    return rest, security, client_id
