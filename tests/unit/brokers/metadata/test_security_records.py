"""Users, ACLs and quotas in the metadata log: records, replay, snapshots, and the controller's rules."""
from __future__ import annotations

import itertools

import pytest

from brokers.controller.security import (
    ScramUpsertion,
    create_acl_records,
    delete_acl_records,
    quota_records,
    scram_records,
)
from brokers.metadata.delta import MetadataDelta, ReplayError
from brokers.metadata.image import EMPTY, MetadataImage
from brokers.metadata.records import (
    ClientQuotaRecord,
    RemoveAccessControlEntryRecord,
    RemoveUserScramCredentialRecord,
    decode,
    encode,
)
from brokers.metadata.security_image import DEFAULT, QuotaEntity
from brokers.metadata.snapshot import decode_image, encode_image
from spark_log.acls import AclBinding, AclBindingFilter, Operation, PatternType, Permission, ResourceType
from spark_log.errors import InvalidRequestError, ResourceNotFoundError
from spark_log.scram import make_credential

PASSWORD = "Planted-Password-42"
CRED = make_credential(PASSWORD, b"salt" * 4, 4096)
ALICE = ScramUpsertion("alice", "SCRAM-SHA-256", 4096, CRED.salt, CRED.stored_key, CRED.server_key)
READ = AclBinding(ResourceType.TOPIC, "orders-", PatternType.PREFIXED, "User:alice", "*", Operation.READ,
                  Permission.ALLOW)
DENY = AclBinding(ResourceType.TOPIC, "orders-eu", PatternType.LITERAL, "User:alice", "*", Operation.READ,
                  Permission.DENY)


def applied(image: MetadataImage, records: list) -> MetadataImage:  # type: ignore[type-arg]
    delta = MetadataDelta(image)
    for record in records:
        delta.replay(decode(encode(record)))  # through the wire format, as every node does
    return delta.apply(offset=image.offset + len(records))


def test_users_acls_and_quotas_replay_and_survive_a_snapshot() -> None:
    ids = (f"acl-{i}" for i in itertools.count())
    image = applied(EMPTY, scram_records(EMPTY, [ALICE], []))
    image = applied(image, create_acl_records(image, [READ, DENY, READ], lambda: next(ids)))
    image = applied(image, quota_records(image, QuotaEntity(DEFAULT, "etl"), [("producer_byte_rate", 1024.0)]))
    security = image.security
    assert security.users["alice"] == CRED
    assert sorted(security.acls.values(), key=repr) == sorted([READ, DENY], key=repr)  # READ once
    assert security.quotas[QuotaEntity(DEFAULT, "etl")] == {"producer_byte_rate": 1024.0}
    again = decode_image(encode_image(image))
    assert again.security == security and again == image
    assert PASSWORD.encode() not in encode_image(image)  # only the salted, hashed credential


def test_untouched_security_is_shared_and_deletes_apply() -> None:
    ids = (f"acl-{i}" for i in itertools.count())
    image = applied(EMPTY, scram_records(EMPTY, [ALICE], []) + create_acl_records(EMPTY, [READ, DENY],
                                                                                  lambda: next(ids)))
    records, results = delete_acl_records(image, [AclBindingFilter(permission=Permission.DENY),
                                                  AclBindingFilter(resource_name="orders-eu")])
    assert results == [[DENY], [DENY]] and len(records) == 1
    image = applied(image, records + scram_records(image, [], [("alice", "SCRAM-SHA-256")]))
    assert list(image.security.acls.values()) == [READ] and not image.security.users
    image2 = applied(image, quota_records(image, QuotaEntity("bob", None), [("consumer_byte_rate", 5.0)]))
    removed = applied(image2, quota_records(image2, QuotaEntity("bob", None), [("consumer_byte_rate", None)]))
    assert not removed.security.quotas
    plain = MetadataDelta(image).apply()
    assert plain.security is image.security


@pytest.mark.parametrize("record", [RemoveUserScramCredentialRecord(name="ghost", mechanism="SCRAM-SHA-256"),
                                    RemoveAccessControlEntryRecord(id="ghost"),
                                    ClientQuotaRecord(user="a", key="request_percentage", value=1.0)])
def test_records_that_cannot_apply_are_replay_errors(record: object) -> None:
    with pytest.raises(ReplayError):
        MetadataDelta(EMPTY).replay(record)  # type: ignore[arg-type]


def test_controller_refusals() -> None:
    with pytest.raises(ResourceNotFoundError):
        scram_records(EMPTY, [], [("ghost", "SCRAM-SHA-256")])
    for bad in (ScramUpsertion("", "SCRAM-SHA-256", 4096, CRED.salt, CRED.stored_key, CRED.server_key),
                ScramUpsertion(DEFAULT, "SCRAM-SHA-256", 4096, CRED.salt, CRED.stored_key, CRED.server_key),
                ScramUpsertion("a", "SCRAM-SHA-512", 4096, CRED.salt, CRED.stored_key, CRED.server_key),
                ScramUpsertion("a", "SCRAM-SHA-256", 100, CRED.salt, CRED.stored_key, CRED.server_key),
                ScramUpsertion("a", "SCRAM-SHA-256", 4096, b"x", CRED.stored_key, CRED.server_key)):
        with pytest.raises(InvalidRequestError):
            scram_records(EMPTY, [bad], [])
    with pytest.raises(InvalidRequestError):
        create_acl_records(EMPTY, [AclBinding(ResourceType.GROUP, "g", PatternType.LITERAL, "User:a", "*",
                                              Operation.WRITE, Permission.ALLOW)], lambda: "x")
    for entity, changes in ((QuotaEntity(None, None), [("producer_byte_rate", 1.0)]),
                            (QuotaEntity("a", None), [("producer_byte_rate", -1.0)]),
                            (QuotaEntity("a", None), [("producer_byte_rate", float("inf"))]),
                            (QuotaEntity("a", None), [("request_percentage", 5.0)]),
                            (QuotaEntity("a", None), [])):
        with pytest.raises(InvalidRequestError):
            quota_records(EMPTY, entity, changes)
