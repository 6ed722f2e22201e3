"""Security end to end on real brokers: one SASL_SSL cluster with the authorizer on
(``sasl_cluster``: TLS on the client listener, on replica fetches and on Raft).

Refusals come as typed errors from the clients themselves (``AuthenticationError``,
``TopicAuthorizationError``); ACLs act as Kafka's (a prefix covers exactly its prefix, a
deny beats an allow); a plaintext client against the TLS listener fails cleanly; user and
ACL administration through the CLI; a session outlives nothing: deleting the user ends it,
a broker restart makes the client authenticate again.  Adds about 20 s (the cluster's
start, ~8 s, is shared with the Spark security tests).
"""
from __future__ import annotations

import io
import itertools
import time
import uuid
from pathlib import Path

import pytest

from spark_log import Admin, ClientSecurity, Consumer, Producer, cli, errors
from spark_log.acls import Operation, PatternType, Permission, ResourceType
from tests.support.secure_cluster import SecuredCluster
from tests.support.wait import wait_until

T = ResourceType.TOPIC
_n = itertools.count()


def name(prefix: str) -> str:
    return f"{prefix}-{next(_n)}-{uuid.uuid4().hex[:6]}"


def topic(cluster: SecuredCluster, partitions: int = 1, replication_factor: int = 3, base: str = "sec") -> str:
    created = name(base)
    with cluster.admin() as admin:
        admin.create_topic(created, partitions=partitions, replication_factor=replication_factor)
    return created


def consume(security: ClientSecurity, bootstrap: str, topic_name: str, count: int) -> list[bytes]:
    with Consumer(bootstrap, security=security, auto_offset_reset="earliest") as consumer:
        consumer.assign([(topic_name, 0)])
        got: list[bytes] = []

        def enough() -> bool:
            got.extend(r.value for r in consumer.poll(0.3))
            return len(got) >= count

        wait_until(enough, timeout=30, message=f"{count} records from {topic_name}")
        return got


def test_unauthenticated_and_wrongly_authenticated_clients_are_refused(sasl_cluster: SecuredCluster) -> None:
    t = topic(sasl_cluster)
    sasl_cluster.user("dora", "right-password")
    anonymous = ClientSecurity(protocol="SSL", ca_file=sasl_cluster.ca_file)
    wrong = ClientSecurity(protocol="SASL_SSL", ca_file=sasl_cluster.ca_file, username="dora", password="wrong")
    unknown = ClientSecurity(protocol="SASL_SSL", ca_file=sasl_cluster.ca_file, username="nobody-at-all",
                             password="whatever")
    for security in (anonymous, wrong, unknown):
        with pytest.raises(errors.AuthenticationError) as refused:
            with Admin(sasl_cluster.bootstrap, security=security, request_timeout_ms=5000) as admin:
                admin.list_topics()
        assert "wrong" not in str(refused.value) and "whatever" not in str(refused.value)
        with pytest.raises(errors.AuthenticationError):
            with Consumer(sasl_cluster.bootstrap, security=security, request_timeout_ms=5000) as consumer:
                consumer.assign([(t, 0)])
    with pytest.raises(errors.AuthenticationError):
        with Producer(sasl_cluster.bootstrap, security=wrong, request_timeout_ms=5000) as producer:
            producer.send(t, b"x")


def test_a_plaintext_client_against_the_tls_listener_fails_cleanly(sasl_cluster: SecuredCluster) -> None:
    started = time.monotonic()
    with pytest.raises(errors.BrokerNotAvailableError):
        with Admin(sasl_cluster.bootstrap, security=ClientSecurity(), request_timeout_ms=2000) as admin:
            admin.list_topics()
    assert time.monotonic() - started < 15  # a clean, bounded failure, not a hang
    with sasl_cluster.admin() as admin:  # and the brokers are unharmed
        assert admin.whoami() == "User:admin"


def test_an_unreachable_broker_is_skipped_while_authenticating(sasl_cluster: SecuredCluster) -> None:
    from tests.support.ports import free_port

    bootstrap = f"127.0.0.1:{free_port()},{sasl_cluster.bootstrap}"  # nobody listens on the first
    user = sasl_cluster.user(name("skip"))
    with Admin(bootstrap, security=user, request_timeout_ms=20_000) as admin:
        assert admin.whoami() == f"User:{user.username}"  # a failed SCRAM exchange moves on, as a failed call


def test_read_and_write_need_their_acls_and_replication_runs_over_tls(sasl_cluster: SecuredCluster) -> None:
    t = topic(sasl_cluster)
    reader, writer = sasl_cluster.user(name("reader")), sasl_cluster.user(name("writer"))
    sasl_cluster.allow(f"User:{reader.username}", T, t, Operation.READ)
    sasl_cluster.allow(f"User:{writer.username}", T, t, Operation.WRITE)
    with Producer(sasl_cluster.bootstrap, security=reader, acks="all", delivery_timeout_ms=10_000) as producer:
        future = producer.send(t, b"from the reader")
        with pytest.raises(errors.TopicAuthorizationError, match="not allowed write"):
            future.result(timeout=30)
    values = [f"v{i}".encode() for i in range(50)]
    with Producer(sasl_cluster.bootstrap, security=writer, acks="all") as producer:  # RF=3: replicated over TLS
        futures = [producer.send(t, v) for v in values]
        producer.flush()
        assert [f.result(timeout=30)[1] for f in futures] == list(range(50))
    with pytest.raises(errors.TopicAuthorizationError, match="not allowed read"):
        with Consumer(sasl_cluster.bootstrap, security=writer, auto_offset_reset="earliest") as consumer:
            consumer.assign([(t, 0)])  # DESCRIBE is implied by WRITE
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:  # each poll waits for the broker's answer
                consumer.poll(0.5)
    assert consume(reader, sasl_cluster.bootstrap, t, 50) == values
    with sasl_cluster.admin() as admin:
        described = admin.describe_topic(t)
        assert all(len(p.isr) == 3 for p in described.partitions.values())  # followers fetch over TLS
    # over the leaders' data listeners, authenticated as nodes (NODE_AUTH with the inter-node token)
    logs = "".join((sasl_cluster.cluster.node_dir(node.node_id) / "node.log").read_text(errors="replace")
                   for node in sasl_cluster.cluster.nodes)
    assert "over its data listener" in logs and "inter-node token" not in logs and "cluster_action" not in logs


def test_a_prefixed_acl_covers_exactly_its_prefix(sasl_cluster: SecuredCluster) -> None:
    base = name("pfx")
    inside, exact = f"{base}-a", f"{base}-"
    outside = [base, f"{base}a", f"x{base}-a"]
    with sasl_cluster.admin() as admin:
        for created in (inside, exact, *outside):
            admin.create_topic(created)
    user = sasl_cluster.user(name("prefixed"))
    sasl_cluster.allow(f"User:{user.username}", T, f"{base}-", Operation.READ, pattern=PatternType.PREFIXED)
    with Admin(sasl_cluster.bootstrap, security=user) as admin:
        assert sorted(admin.list_topics()) == sorted([inside, exact])
    for allowed in (inside, exact):
        with Consumer(sasl_cluster.bootstrap, security=user, auto_offset_reset="earliest") as consumer:
            consumer.assign([(allowed, 0)])
            assert consumer.poll(0.2) == []
    for refused in outside:
        with pytest.raises(errors.TopicAuthorizationError):
            with Consumer(sasl_cluster.bootstrap, security=user) as consumer:
                consumer.assign([(refused, 0)])


def test_a_deny_beats_an_allow(sasl_cluster: SecuredCluster) -> None:
    t = topic(sasl_cluster)
    user = sasl_cluster.user(name("denied"))
    principal = f"User:{user.username}"
    sasl_cluster.allow(principal, T, "*", Operation.ALL)
    sasl_cluster.allow(principal, T, t, Operation.WRITE, permission=Permission.DENY)
    with Producer(sasl_cluster.bootstrap, security=user, delivery_timeout_ms=10_000) as producer:
        with pytest.raises(errors.TopicAuthorizationError):
            producer.send(t, b"x").result(timeout=30)
    with sasl_cluster.admin() as admin:
        from spark_log import AclBindingFilter

        removed = admin.delete_acls([AclBindingFilter(principal=principal, permission=Permission.DENY)])
        assert [b.operation for b in removed] == [Operation.WRITE]
    with Producer(sasl_cluster.bootstrap, security=user) as producer:
        assert producer.send(t, b"x").result(timeout=30) == (0, 0)


def _cli(args: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
         stdin: str = "") -> tuple[int, str, str]:
    monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    with monkeypatch.context() as scoped:
        scoped.delenv("SPARK_LOG_CLIENT_CONFIG", raising=False)
        code = cli.main(args)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_users_and_acls_through_the_cli(sasl_cluster: SecuredCluster, tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    admin_config = str(sasl_cluster.cluster.client_properties)
    base = ["--bootstrap", sasl_cluster.bootstrap, "--command-config", admin_config]
    user = name("carol")
    code, out, _ = _cli([*base, "users", "add", user, "--password-stdin"], monkeypatch, capsys, stdin="c4r0l-pw\n")
    assert code == 0 and user in out and "c4r0l-pw" not in out
    code, out, _ = _cli([*base, "users", "list"], monkeypatch, capsys)
    assert f"{user}  SCRAM-SHA-256  iterations=4096" in out
    t = topic(sasl_cluster)
    code, out, _ = _cli([*base, "acls", "add", "--allow-principal", f"User:{user}", "--operation", "read",
                         "--operation", "describe", "--topic", t], monkeypatch, capsys)
    assert code == 0 and out.count("added allow") == 2
    code, out, _ = _cli([*base, "acls", "list", "--principal", f"User:{user}"], monkeypatch, capsys)
    assert f"allow User:{user} read topic:literal:{t} from *" in out
    carol_config = tmp_path / "carol.properties"
    carol_config.write_text(f"security.protocol=SASL_SSL\nssl.ca.location={sasl_cluster.ca_file}\n"
                            f"sasl.mechanism=SCRAM-SHA-256\nsasl.username={user}\nsasl.password=c4r0l-pw\n")
    code, out, _ = _cli(["--bootstrap", sasl_cluster.bootstrap, "--command-config", str(carol_config), "whoami"],
                        monkeypatch, capsys)
    assert (code, out.strip()) == (0, f"User:{user}")
    code, _, err = _cli(["--bootstrap", sasl_cluster.bootstrap, "--command-config", str(carol_config), "users",
                         "list"], monkeypatch, capsys)
    assert code == 1 and "CLUSTER_AUTHORIZATION_FAILED" in err
    carol = ClientSecurity.from_file(carol_config)
    with Admin(sasl_cluster.bootstrap, security=carol, request_timeout_ms=5000) as live:
        assert live.whoami() == f"User:{user}"
        code, out, _ = _cli([*base, "acls", "remove", "--principal", f"User:{user}"], monkeypatch, capsys)
        assert code == 0 and out.count("removed") == 2
        code, out, _ = _cli([*base, "users", "delete", user], monkeypatch, capsys)
        assert code == 0
        with pytest.raises(errors.AuthenticationError):  # the live session ends with the user
            live.whoami()
    code, _, err = _cli([*base, "users", "delete", user], monkeypatch, capsys)
    assert code == 1 and "RESOURCE_NOT_FOUND" in err


def test_a_session_is_reopened_after_a_broker_restart(sasl_cluster: SecuredCluster) -> None:
    t = topic(sasl_cluster, replication_factor=1)
    user = sasl_cluster.user(name("restart"))
    sasl_cluster.allow(f"User:{user.username}", T, t, Operation.WRITE, Operation.READ)
    with Producer(sasl_cluster.bootstrap, security=user, delivery_timeout_ms=60_000) as producer:
        assert producer.send(t, b"before").result(timeout=30) == (0, 0)
        with sasl_cluster.admin() as admin:
            leader = admin.describe_topic(t, live=False).partitions[0].leader
        node = next(n for n in sasl_cluster.cluster.nodes if n.node_id == leader)
        sasl_cluster.cluster.stop_node(node)
        sasl_cluster.cluster.start_node(node)
        sasl_cluster.cluster.wait_healthy(timeout_s=60)
        # the restarted broker knows no session: SESSION_EXPIRED, then a new SCRAM exchange
        assert producer.send(t, b"after").result(timeout=60) == (0, 1)
    assert consume(user, sasl_cluster.bootstrap, t, 2) == [b"before", b"after"]


def test_a_group_member_needs_read_on_its_group_and_sees_only_groups_it_may_describe(
        sasl_cluster: SecuredCluster) -> None:
    """Consumer groups on a secured cluster (Kafka's model): joining and committing need READ
    on the group (and READ on each topic committed), ``ListGroups`` answers only the groups
    the caller may describe."""
    t = topic(sasl_cluster)
    values = [f"g{i}".encode() for i in range(20)]
    with Producer(sasl_cluster.bootstrap, security=sasl_cluster.admin_security, acks="all") as producer:
        for v in values:
            producer.send(t, v)
        producer.flush()
    member = sasl_cluster.user(name("member"))
    principal = f"User:{member.username}"
    sasl_cluster.allow(principal, T, t, Operation.READ)
    refused_group, allowed_group = name("no-acl-group"), name("billing")
    with Consumer(sasl_cluster.bootstrap, security=member, group_id=refused_group, auto_offset_reset="earliest",
                  request_timeout_ms=10_000) as consumer:
        consumer.subscribe([t])
        with pytest.raises(errors.GroupAuthorizationError):
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                consumer.poll(0.5)
    sasl_cluster.allow(principal, ResourceType.GROUP, allowed_group, Operation.READ)
    with Consumer(sasl_cluster.bootstrap, security=member, group_id=allowed_group, auto_offset_reset="earliest",
                  enable_auto_commit=False) as consumer:
        consumer.subscribe([t])
        got: list[bytes] = []

        def enough() -> bool:
            got.extend(r.value for r in consumer.poll(0.3))
            return len(got) >= len(values)

        wait_until(enough, timeout=60, message="the member reads every record")
        assert got == values
        consumer.commit()
        assert consumer.committed()[(t, 0)].offset == len(values)
    with Admin(sasl_cluster.bootstrap, security=member) as admin:
        assert admin.describe_group(allowed_group).group_id == allowed_group  # DESCRIBE is implied by READ
        assert [g.group_id for g in admin.list_groups()] == [allowed_group]
        with pytest.raises(errors.GroupAuthorizationError):
            admin.delete_group(allowed_group)  # DELETE was not granted
    with sasl_cluster.admin() as admin:  # a super user sees every group
        assert allowed_group in {g.group_id for g in admin.list_groups()}
