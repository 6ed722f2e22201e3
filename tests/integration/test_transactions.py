"""Transactions through the public clients against the shared 3-broker cluster (issue 14):
commit and abort across partitions, the last stable offset, read_committed consumers and
ListOffsets, fencing by a newer producer, the coordinator's timeout abort, KIP-890's
refusal of a write to a partition outside the transaction, and bad input.  Kill -9 and
failover: tests/fault/test_transactions_failover.py; Spark: tests/spark/test_transactional_sink.py.
"""
from __future__ import annotations

import time
import uuid
from typing import Iterator

import pytest

from brokers.launcher.local import LocalCluster
from spark_log import Admin, Consumer, Producer, errors
from spark_log.frame import encode_batch
from spark_log.proto import broker_pb2 as pb
from spark_log.proto import transactions_pb2 as tpb
from spark_log.schemas import BYTES_SCHEMA
from tests.support.replica_logs import replica_dir, replica_markers
from tests.support.wait import wait_until

import pyarrow as pa

pytestmark = pytest.mark.integration


@pytest.fixture()
def admin(bootstrap: str) -> Iterator[Admin]:
    with Admin(bootstrap) as client:
        yield client


def _tid() -> str:
    return f"tx-{uuid.uuid4().hex[:10]}"


def _read_all(bootstrap: str, topic: str, partitions: int, isolation: str, want: int | None = None,
              timeout: float = 15.0) -> list[bytes]:
    """Every record a fresh consumer reads from the start up to the end offsets of the
    moment (read_committed: the last stable offsets), or up to ``want`` records."""
    with Admin(bootstrap) as admin:
        ends = admin.list_offsets(topic, "latest", isolation_level=isolation)
    with Consumer(bootstrap, isolation_level=isolation, auto_offset_reset="earliest") as consumer:
        consumer.assign([(topic, p) for p in range(partitions)])
        out: list[bytes] = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            out += [r.value for r in consumer.poll(0.2)]
            if want is not None and len(out) >= want:
                break
            if want is None and all(consumer.position(topic, p) >= ends[p] for p in range(partitions)):
                break
        else:
            raise AssertionError(f"read {len(out)} records of {topic} before the deadline; ends {ends}")
        return out


def test_commit_is_visible_to_read_committed_only_after_the_commit(bootstrap: str, admin: Admin,
                                                                  topic_name: str) -> None:
    admin.create_topic(topic_name, partitions=3, replication_factor=3)
    with Producer(bootstrap, transactional_id=_tid()) as producer:
        producer.init_transactions()
        producer.begin_transaction()
        for i in range(60):
            producer.send(topic_name, f"c{i}".encode(), key=str(i).encode())
        producer.flush()
        hw = admin.list_offsets(topic_name, "latest")
        assert sum(hw.values()) == 60
        assert admin.list_offsets(topic_name, "latest", isolation_level="read_committed") == {0: 0, 1: 0, 2: 0}
        assert _read_all(bootstrap, topic_name, 3, "read_committed") == []
        assert len(_read_all(bootstrap, topic_name, 3, "read_uncommitted", want=60)) == 60
        producer.commit_transaction()
    stable = admin.list_offsets(topic_name, "latest", isolation_level="read_committed")
    assert all(stable[p] == hw[p] + 1 for p in hw if hw[p])  # one marker after the records of each partition
    got = _read_all(bootstrap, topic_name, 3, "read_committed", want=60)
    assert sorted(got) == sorted(f"c{i}".encode() for i in range(60))


def test_aborted_records_are_never_read_committed_and_later_commits_are(bootstrap: str, admin: Admin,
                                                                        topic_name: str) -> None:
    admin.create_topic(topic_name, partitions=2, replication_factor=3)
    with Producer(bootstrap, transactional_id=_tid()) as producer:
        producer.init_transactions()
        for round_ in range(3):
            producer.begin_transaction()
            producer.send_batch(topic_name, pa.table({"key": [str(i).encode() for i in range(20)],
                                                      "value": [f"r{round_}-{i}".encode() for i in range(20)]}))
            if round_ == 1:
                producer.abort_transaction()
            else:
                producer.commit_transaction()
    got = _read_all(bootstrap, topic_name, 2, "read_committed", want=40)
    assert sorted(got) == sorted(f"r{r}-{i}".encode() for r in (0, 2) for i in range(20))
    assert len(_read_all(bootstrap, topic_name, 2, "read_committed")) == 40  # and nothing more arrives
    assert len(_read_all(bootstrap, topic_name, 2, "read_uncommitted", want=60)) == 60


def test_a_newer_producer_fences_the_old_one_and_aborts_its_transaction(bootstrap: str, admin: Admin,
                                                                        topic_name: str) -> None:
    admin.create_topic(topic_name, partitions=1, replication_factor=3)
    tid = _tid()
    old = Producer(bootstrap, transactional_id=tid)
    old.init_transactions()
    old.begin_transaction()
    old.send(topic_name, b"zombie", key=b"k")
    old.flush()
    with Producer(bootstrap, transactional_id=tid) as new:
        new.init_transactions()  # aborts the old one's open transaction
        with pytest.raises(errors.ProducerFencedError):
            old.commit_transaction()
        with pytest.raises(errors.ProducerFencedError):
            old.begin_transaction()
        new.begin_transaction()
        new.send(topic_name, b"fresh", key=b"k")
        new.commit_transaction()
    old.close()
    assert _read_all(bootstrap, topic_name, 1, "read_committed", want=1) == [b"fresh"]


def test_a_fenced_producer_stays_fenced_when_the_new_one_has_not_retried_its_init(bootstrap: str, admin: Admin,
                                                                                 topic_name: str) -> None:
    """The new instance's first InitProducerId aborts the old producer's transaction and
    answers "retry"; before that retry (a crash, a backoff) the old producer aborts.  That
    abort is no retry of the fencing one: the old producer is fenced and commits nothing."""
    admin.create_topic(topic_name, partitions=1, replication_factor=3)
    tid = _tid()
    with Producer(bootstrap, transactional_id=tid) as old:
        old.init_transactions()
        old.begin_transaction()
        old.send(topic_name, b"before", key=b"k")
        old.flush()
        rpc = old._txn.rpc  # type: ignore[union-attr]  # the new instance's one call, as it would send it
        with pytest.raises(errors.ConcurrentTransactionsError):
            rpc.once(tid, "InitProducerId", tpb.InitProducerIdRequest(transactional_id=tid,
                                                                       transaction_timeout_ms=60_000))
        wait_until(lambda: rpc.call(tid, "DescribeTxn", tpb.DescribeTxnRequest(transactional_id=tid)).state
                   == "CompleteAbort", timeout=20, message="the fencing abort did not complete")
        with pytest.raises(errors.ProducerFencedError):
            old.abort_transaction()
        with pytest.raises(errors.ProducerFencedError):
            old.begin_transaction()
    with Producer(bootstrap, transactional_id=tid) as new:
        new.init_transactions()
        new.begin_transaction()
        new.send(topic_name, b"fresh", key=b"k")
        new.commit_transaction()
    assert _read_all(bootstrap, topic_name, 1, "read_committed", want=1) == [b"fresh"]


def test_the_coordinator_aborts_a_transaction_open_past_its_timeout(bootstrap: str, admin: Admin,
                                                                     topic_name: str) -> None:
    admin.create_topic(topic_name, partitions=1, replication_factor=3)
    with Producer(bootstrap, transactional_id=_tid(), transaction_timeout_ms=1000) as producer:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(topic_name, b"slow", key=b"k")
        producer.flush()
        # the open transaction holds the last stable offset at its first record until the abort marker
        wait_until(lambda: admin.list_offsets(topic_name, "latest", isolation_level="read_committed")[0] == 2,
                   timeout=20, message="the timed-out transaction was not aborted")
        with pytest.raises(errors.TransactionTimedOutError):
            producer.commit_transaction()
        # as the error says: initialise again, and the producer goes on
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(topic_name, b"after", key=b"k")
        producer.commit_transaction()
    assert _read_all(bootstrap, topic_name, 1, "read_committed", want=1) == [b"after"]


def _sneaky_frame(producer: Producer, *, base_sequence: int) -> bytes:
    """A one-record transactional frame stamped with ``producer``'s id and epoch, sent by hand."""
    batch = pa.record_batch([pa.array([b"k"]), pa.array([b"sneaky"]), pa.nulls(1, BYTES_SCHEMA.field("headers").type),
                             pa.array([0], pa.timestamp("ms"))], schema=BYTES_SCHEMA)
    return encode_batch(batch, producer_id=producer.producer_id, producer_epoch=producer.producer_epoch,
                        base_sequence=base_sequence, transactional=True)


def test_a_transactional_write_outside_the_transaction_is_refused(bootstrap: str, admin: Admin,
                                                                  topic_name: str) -> None:
    """KIP-890: the leader verifies a producer's first transactional write to a partition
    with the coordinator; a partition never added (or a transaction already ended) is refused."""
    admin.create_topic(topic_name, partitions=2, replication_factor=3)
    tid = _tid()
    with Producer(bootstrap, transactional_id=tid) as producer:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(topic_name, b"in", partition=0)
        producer.flush()
        frame = _sneaky_frame(producer, base_sequence=0)
        address, _ = producer._cluster.leader(topic_name, 1)
        stub = producer._cluster.broker(address)
        answer = stub.Produce(pb.ProduceRequest(acks=-1, timeout_ms=5000, transactional_id=tid, partitions=[
            pb.PartitionRecords(topic=topic_name, partition=1, records=frame, current_leader_epoch=-1)]))
        assert answer.partitions[0].error.code == errors.ErrorCode.INVALID_TXN_STATE
        answer = stub.Produce(pb.ProduceRequest(acks=-1, timeout_ms=5000, partitions=[
            pb.PartitionRecords(topic=topic_name, partition=1, records=frame, current_leader_epoch=-1)]))
        assert answer.partitions[0].error.code == errors.ErrorCode.INVALID_REQUEST  # no transactional_id
        producer.commit_transaction()
    assert admin.list_offsets(topic_name, "latest")[1] == 0  # nothing was appended to partition 1


def test_a_write_into_another_transactional_ids_open_transaction_is_refused(bootstrap: str, admin: Admin,
                                                                           topic_name: str) -> None:
    """A request naming transactional id A may not write frames of B's producer id into B's
    transaction open on the partition (the leader skipped the coordinator whenever the
    producer id had a transaction open there, whatever the request's transactional id)."""
    admin.create_topic(topic_name, partitions=1, replication_factor=3)
    with Producer(bootstrap, transactional_id=_tid()) as owner, Producer(bootstrap, transactional_id=_tid()) as other:
        owner.init_transactions()
        other.init_transactions()
        owner.begin_transaction()
        owner.send(topic_name, b"owner's", partition=0)
        owner.flush()
        frame = _sneaky_frame(owner, base_sequence=1)
        address, _ = other._cluster.leader(topic_name, 0)
        answer = other._cluster.broker(address).Produce(pb.ProduceRequest(
            acks=-1, timeout_ms=5000, transactional_id=other._txn.transactional_id, partitions=[
                pb.PartitionRecords(topic=topic_name, partition=0, records=frame, current_leader_epoch=-1)]))
        assert answer.partitions[0].error.code != 0
        owner.commit_transaction()
    assert _read_all(bootstrap, topic_name, 1, "read_committed", want=1) == [b"owner's"]
    assert admin.list_offsets(topic_name, "latest")[0] == 2  # the record and the commit marker, nothing else


def test_bad_use_of_a_transactional_producer_gets_typed_errors(bootstrap: str, admin: Admin, topic_name: str) -> None:
    admin.create_topic(topic_name, partitions=1, replication_factor=3)
    with pytest.raises(errors.InvalidConfigError):
        Producer(bootstrap, transactional_id="x" * 300)
    with pytest.raises(errors.InvalidConfigError):
        Producer(bootstrap, transactional_id=_tid(), acks=1)
    with pytest.raises(errors.InvalidConfigError):
        Producer(bootstrap, transactional_id=_tid(), producer_id=5)
    with Producer(bootstrap, transactional_id=_tid(), transaction_timeout_ms=10**9) as producer:
        with pytest.raises(errors.InvalidTxnStateError):
            producer.send(topic_name, b"before init")
        with pytest.raises(errors.InvalidTransactionTimeoutError):
            producer.init_transactions()
    with Producer(bootstrap, transactional_id=_tid()) as producer:
        producer.init_transactions()
        with pytest.raises(errors.InvalidTxnStateError):
            producer.send(topic_name, b"outside a transaction")
        with pytest.raises(errors.InvalidTxnStateError):
            producer.commit_transaction()
        producer.begin_transaction()
        with pytest.raises(errors.InvalidTxnStateError):
            producer.begin_transaction()
        producer.abort_transaction()
    with Producer(bootstrap) as plain, pytest.raises(errors.InvalidTxnStateError):
        plain.begin_transaction()
    with pytest.raises(errors.InvalidTopicError):
        admin.create_topic("__transaction_state", partitions=1, replication_factor=1)
    assert admin.list_offsets(topic_name, "latest") == {0: 0}  # every refused send appended nothing, and no marker


def test_compaction_drops_aborted_records_and_keeps_the_committed_value(bootstrap: str, admin: Admin,
                                                                        topic_name: str) -> None:
    """An aborted write of a key must not replace its committed value when the log is
    compacted (the cleaner treats aborted records as never written), and the open
    transaction's records stay above the cleaned range (compaction stops at the LSO)."""
    admin.create_topic(topic_name, partitions=1, replication_factor=3,
                       config={"cleanup.policy": "compact", "segment.bytes": 2048})
    with Producer(bootstrap, transactional_id=_tid()) as producer:
        producer.init_transactions()
        for round_ in range(12):
            producer.begin_transaction()
            for key in range(5):
                producer.send(topic_name, f"{'aborted' if round_ % 2 else 'kept'}-{round_}-{key}".encode(),
                              key=f"k{key}".encode())
            if round_ % 2:
                producer.abort_transaction()
            else:
                producer.commit_transaction()
    states = admin.compact(topic_name, wait=True, timeout_s=60)[0]
    cleaned = min(state.cleaned_offset for state in states)
    assert cleaned > 0
    got = _read_all(bootstrap, topic_name, 1, "read_committed")
    assert sorted(got) == sorted(f"kept-10-{key}".encode() for key in range(5))
    end = admin.list_offsets(topic_name, "latest")[0]
    with Consumer(bootstrap, auto_offset_reset="earliest") as consumer:  # read_uncommitted: what the log holds
        consumer.assign([(topic_name, 0)])
        held: list[tuple[int, bytes]] = []
        wait_until(lambda: held.extend((r.offset, r.value) for r in consumer.poll(0.2)) or
                   consumer.position(topic_name, 0) >= end, timeout=15, message="could not read the log")
    assert not [offset for offset, value in held if value.startswith(b"aborted") and offset < cleaned]



def test_compaction_removes_the_markers_of_transactions_with_no_record_left(cluster: LocalCluster, admin: Admin,
                                                                             topic_name: str) -> None:
    """Kafka's rule for markers: once every record of a transaction is superseded (or
    aborted) and the marker is past delete.retention.ms, the cleaner removes it, on every
    replica alike, except the producer's last frame (it holds the bumped epoch); the last
    stable offset is not held back by what stays."""
    bootstrap = cluster.bootstrap
    admin.create_topic(topic_name, partitions=1, replication_factor=3,
                       config={"cleanup.policy": "compact", "segment.bytes": 2048, "delete.retention.ms": 0})
    with Producer(bootstrap, transactional_id=_tid()) as producer:
        producer.init_transactions()
        for round_ in range(10):
            producer.begin_transaction()
            for key in range(3):
                producer.send(topic_name, f"t-{round_}-{key}".encode(), key=f"k{key}".encode())
            if round_ % 2:
                producer.abort_transaction()
            else:
                producer.commit_transaction()
    with Producer(bootstrap) as plain:  # every key written again; rolls the segments the markers are in
        for round_ in range(30):
            for key in range(3):
                plain.send(topic_name, f"p-{round_}-{key}".encode(), key=f"k{key}".encode())
            plain.flush()  # a frame per round: the segments roll, only the last one stays active
    states = admin.compact(topic_name, wait=True, timeout_s=60)[0]
    cleaned = min(state.cleaned_offset for state in states)
    markers = {node.node_id: replica_markers(replica_dir(cluster.node_dir(node.node_id), topic_name, 0))
               for node in cluster.nodes}
    last = max(max(found) for found in markers.values())
    assert len({tuple(m for m in found if m < cleaned) for found in markers.values()}) == 1, markers  # alike
    for found in markers.values():
        assert len(found) < 10 and all(m >= cleaned or m == last for m in found), (cleaned, markers)
    ends = admin.list_offsets(topic_name, "latest", isolation_level="read_committed")
    assert ends == admin.list_offsets(topic_name, "latest")  # no transaction left open by a removed marker
    got = _read_all(bootstrap, topic_name, 1, "read_committed")
    assert sorted(got[-3:]) == sorted(f"p-29-{key}".encode() for key in range(3))

def _source_and_sink(bootstrap: str, admin: Admin, topic_name: str) -> tuple[str, str, str]:
    """A source topic holding 20 records ``in-0``.. at offsets 0-19, an empty sink topic
    (one partition each, RF=3) and a fresh group id."""
    source, sink, group = topic_name + "-in", topic_name + "-out", f"g-{uuid.uuid4().hex[:8]}"
    admin.create_topic(source, partitions=1, replication_factor=3)
    admin.create_topic(sink, partitions=1, replication_factor=3)
    with Producer(bootstrap) as plain:
        for i in range(20):
            plain.send(source, f"in-{i}".encode(), partition=0)
        plain.flush()
    return source, sink, group


def test_consume_transform_produce_commits_offsets_with_the_transaction(bootstrap: str, admin: Admin,
                                                                        topic_name: str) -> None:
    """send_offsets_to_transaction: a group's committed offsets move if and only if the
    transaction commits; a member fenced by its group cannot add them."""
    source, sink, group = _source_and_sink(bootstrap, admin, topic_name)
    with Consumer(bootstrap, group_id=group, auto_offset_reset="earliest", enable_auto_commit=False,
                  isolation_level="read_committed") as consumer, \
            Producer(bootstrap, transactional_id=_tid()) as producer:
        consumer.subscribe([source])
        producer.init_transactions()
        got: list = []
        wait_until(lambda: got.extend(consumer.poll(0.2)) or len(got) >= 20, timeout=30, message="nothing consumed")
        meta = consumer.group_metadata()
        assert meta.group_id == group and meta.member_id and meta.member_epoch > 0
        # an aborted attempt moves nothing
        producer.begin_transaction()
        for record in got[:10]:
            producer.send(sink, record.value.upper(), partition=0)
        producer.send_offsets_to_transaction({(source, 0): got[9].offset + 1}, meta)
        producer.abort_transaction()
        assert admin.list_group_offsets(group) == {}
        # the committed one moves the group's offset with the output
        producer.begin_transaction()
        for record in got[:10]:
            producer.send(sink, record.value.upper(), partition=0)
        producer.send_offsets_to_transaction({(source, 0): got[9].offset + 1}, meta)
        producer.commit_transaction()
        assert admin.list_group_offsets(group)[(source, 0)].offset == got[9].offset + 1
        producer.begin_transaction()
        with pytest.raises(errors.FencedEpochError):  # an epoch the group never gave is refused when added
            producer.send_offsets_to_transaction({(source, 0): 15}, type(meta)(group, meta.member_id,
                                                                               meta.member_epoch + 5))
        producer.abort_transaction()
    assert _read_all(bootstrap, sink, 1, "read_committed") == [f"IN-{i}".encode() for i in range(10)]


def test_a_member_taking_over_waits_for_the_offsets_an_open_transaction_holds(bootstrap: str, admin: Admin,
                                                                               topic_name: str) -> None:
    """KIP-447: member A consumed 10 records and its transaction holds the group's offset 10
    for them (send_offsets_to_transaction); A leaves before the commit.  Member B, given the
    partition meanwhile, reads nothing while the transaction is open (a read_committed
    offset fetch is unstable), then starts at 10 once it commits: no input twice."""
    source, sink, group = _source_and_sink(bootstrap, admin, topic_name)
    settings = dict(group_id=group, auto_offset_reset="earliest", enable_auto_commit=False,
                    isolation_level="read_committed")
    with Producer(bootstrap, transactional_id=_tid()) as producer:
        producer.init_transactions()
        with Consumer(bootstrap, **settings) as a:  # type: ignore[arg-type]
            a.subscribe([source])
            got: list = []
            wait_until(lambda: got.extend(a.poll(0.2)) or len(got) >= 10, timeout=30, message="A consumed nothing")
            producer.begin_transaction()
            for record in got[:10]:
                producer.send(sink, record.value.upper(), partition=0)
            producer.send_offsets_to_transaction({(source, 0): got[9].offset + 1}, a.group_metadata())
        with Consumer(bootstrap, **settings) as b:  # type: ignore[arg-type]
            b.subscribe([source])
            early: list = []

            def given_to_b() -> bool:
                early.extend(b.poll(0.2))
                members = admin.describe_group(group).members
                return len(members) == 1 and (source, 0) in members[0].assignment

            wait_until(given_to_b, timeout=30, message="B was never given the partition")
            for _ in range(5):  # B polls on while the transaction is open
                early.extend(b.poll(0.2))
            assert [r.offset for r in early] == []
            producer.commit_transaction()
            late: list = []
            wait_until(lambda: late.extend(b.poll(0.2)) or len(late) >= 10, timeout=30,
                       message="B read nothing after the commit")
            assert [r.offset for r in late] == list(range(10, 20))


def test_a_transaction_commits_when_a_topic_of_its_offsets_was_deleted_meanwhile(
        bootstrap: str, admin: Admin, topic_name: str) -> None:
    """send_offsets_to_transaction checks the group's commit when the offsets are added; the
    group takes them only when the transaction completes.  A topic of those offsets deleted
    in between made the group refuse them (unknown partition) at every try, so the
    transaction never completed: its commit timed out and every later transaction of the
    producer met ConcurrentTransactionsError.  The deleted topic's offsets are skipped now;
    the rest of the transaction commits."""
    source, kept, sink, group = topic_name + "-in", topic_name + "-in2", topic_name + "-out", f"g-{uuid.uuid4().hex[:8]}"
    for name in (source, kept, sink):
        admin.create_topic(name, partitions=1, replication_factor=3)
    with Producer(bootstrap) as plain:
        for name in (source, kept):
            plain.send(name, b"in", partition=0)
        plain.flush()
    with Consumer(bootstrap, group_id=group, auto_offset_reset="earliest", enable_auto_commit=False) as consumer, \
            Producer(bootstrap, transactional_id=_tid()) as producer:
        consumer.subscribe([source, kept])
        producer.init_transactions()
        got: list = []
        wait_until(lambda: got.extend(consumer.poll(0.2)) or len(got) >= 2, timeout=30, message="nothing consumed")
        producer.begin_transaction()
        producer.send(sink, b"out", partition=0)
        producer.send_offsets_to_transaction({(source, 0): 1, (kept, 0): 1}, consumer.group_metadata())
        admin.delete_topic(source)
        wait_until(lambda: source not in admin.list_topics(), timeout=30, message="the topic was not deleted")
        started = time.monotonic()
        producer.commit_transaction()
        assert time.monotonic() - started < 10
        producer.begin_transaction()  # the producer goes on: nothing of the last one is left open
        producer.send(sink, b"out2", partition=0)
        producer.commit_transaction()
    offsets = admin.list_group_offsets(group)
    assert offsets[(kept, 0)].offset == 1 and (source, 0) not in offsets
    assert _read_all(bootstrap, sink, 1, "read_committed") == [b"out", b"out2"]
