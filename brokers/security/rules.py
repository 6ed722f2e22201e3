"""Every RPC's access rule, declared in one table (``RULES``, keyed by gRPC method path).

A ``Rule`` says what a request needs: a list of checks, each a tuple of alternatives
``(operation, resource)`` of which one must be allowed (Kafka's model: creating a topic
needs CREATE on the cluster *or* on the topic).  The interceptor (``interceptor.py``) runs
it before the handler with the caller's principal; once the authorizer is on, an RPC
whose path is not in ``RULES`` is refused (deny by default), so a service added later
is closed until its rule is declared here.  Optional parts of a rule:

- ``exempt``: served without authentication (the SCRAM exchange itself only);
- ``response_filter``: trims an answer to what the caller may see (topics it may
  DESCRIBE in ``Metadata``/``ListTopics``: existence of other topics is not revealed);
- ``quota``: the byte-rate quota the call counts against (Produce: the request's record
  bytes; consumer Fetch: the answer's bytes), and how to stamp ``throttle_time_ms``.

The table (Kafka's choices where Kafka has the same request):

    Broker.Metadata                 DESCRIBE each named topic; all topics: filtered
    Broker.Produce                  WRITE each topic (+ WRITE the transactional id)
    Broker.Fetch                    consumers: READ each topic; followers: CLUSTER_ACTION
                                    (also the data listener's FETCH and FETCH_TIER, the tier read)
    Broker.ListOffsets              DESCRIBE each topic (followers: CLUSTER_ACTION)
    Broker.DescribePartitions       DESCRIBE each topic
    Admin.CreateTopic               CREATE on the cluster or the topic
    Admin.DeleteTopic               DELETE the topic
    Admin.DescribeTopic             DESCRIBE the topic
    Admin.ListTopics                filtered by DESCRIBE
    Admin.AlterConfigs              ALTER_CONFIGS the topic
    Admin.RegisterSchema            ALTER the topic
    Admin.AlterPartitionReassignments / ElectLeaders          ALTER the cluster
    Compaction.Describe             DESCRIBE each named topic; all topics: DESCRIBE the cluster
    Compaction.Compact / OfferOffsetMap   ALTER the topic (they rewrite its segments)
    Tiering.DescribeTier            DESCRIBE each named topic; all topics: DESCRIBE the cluster
    Tiering.CommitTiered            ALTER the topic (the brokers then delete tiered segments)
    Admin.ListPartitionReassignments                         DESCRIBE the cluster
    Security.ScramStart / ScramFinish                        exempt (authentication itself)
    Security.WhoAmI                 any authenticated caller
    Security.AlterUserScramCredentials / CreateAcls / DeleteAcls   ALTER the cluster
    Security.DescribeUserScramCredentials / DescribeAcls     DESCRIBE the cluster
    Security.AlterClientQuotas      ALTER_CONFIGS the cluster
    Security.DescribeClientQuotas   DESCRIBE_CONFIGS the cluster
    Quorum.DescribeQuorum           DESCRIBE the cluster (Kafka's DescribeQuorum)
    ControllerService.*, SecurityController.*, QuorumController.*, IsrController.*,
    RaftService.Call                CLUSTER_ACTION (nodes only)
    GroupCoordinator.FindCoordinator / DescribeGroup           DESCRIBE the group
    GroupCoordinator.ConsumerGroupHeartbeat                     READ the group
    GroupCoordinator.OffsetCommit   READ the group and READ each topic committed
    GroupCoordinator.OffsetFetch    DESCRIBE the group and each named topic (all: filtered)
    GroupCoordinator.ListGroups     filtered by DESCRIBE on each group
    GroupCoordinator.DeleteGroup    DELETE the group
    GroupCoordinator.OffsetDelete   DELETE the group and READ each topic
    GroupCoordinator.TxnOffsetCommit  CLUSTER_ACTION (transaction coordinators only)
    TransactionCoordinator.FindCoordinator / DescribeTxn        DESCRIBE the transactional id
    TransactionCoordinator.InitProducerId / JoinTxn / EndTxn    WRITE the transactional id
    TransactionCoordinator.AddPartitions  WRITE the id and each topic (verify_only: a node, or WRITE the id)
    TransactionCoordinator.AddOffsets     WRITE the id and READ the group
    TxnMarkers.WriteTxnMarkers     CLUSTER_ACTION (coordinators only)

A new service (consumer groups, transactions, compaction admin, a JVM connector's data
listener) adds its methods here: GROUP resources for group calls, TRANSACTIONAL_ID for
transactional ones.  Two tests fail, listing the paths, while any method lacks a rule:
``tests/unit/brokers/security/test_rule_coverage.py`` (every service of every
``spark_log/proto/*_pb2`` module) and ``tests/integration/test_security_rpcs.py`` (every
method a secured node's server actually registered).  ``undeclared()`` is their check.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

from spark_log.acls import CLUSTER_NAME, Operation, Resource, ResourceType
from spark_log.proto import broker_pb2 as bpb
from spark_log.proto import controller_pb2 as cpb
from spark_log.proto import groups_pb2 as gpb
from spark_log.proto import isr_pb2 as ipb
from spark_log.proto import quorum_pb2 as qpb
from spark_log.proto import security_pb2 as spb

__all__ = ["Check", "Rule", "Quota", "RULES", "Allowed", "CLUSTER", "topic", "group", "undeclared"]

Check = tuple[tuple[Operation, Resource], ...]
Allowed = Callable[[Operation, Resource], bool]

CLUSTER = Resource(ResourceType.CLUSTER, CLUSTER_NAME)
_O = Operation


def topic(name: str) -> Resource:
    return Resource(ResourceType.TOPIC, name)


@dataclass(frozen=True, slots=True)
class Quota:
    """``key``: the quota (``producer_byte_rate``/``consumer_byte_rate``); ``measure(request,
    response)``: the bytes the call counts (0: not counted); ``stamp(response, ms)``: the
    response reporting ``throttle_time_ms``."""

    key: str
    measure: Callable[[Any, Any], int]
    stamp: Callable[[Any, int], Any]


@dataclass(frozen=True, slots=True)
class Rule:
    checks: Callable[[Any], Sequence[Check]]
    exempt: bool = False
    response_filter: Callable[[Any, Any, Allowed], Any] | None = None
    quota: Quota | None = None
    identity: bool = False  # the handler reads the caller's identity (interceptor.current_identity)


def _none(_request: Any) -> Sequence[Check]:
    return ()


def _on_cluster(operation: Operation) -> Callable[[Any], Sequence[Check]]:
    checks: Sequence[Check] = (((operation, CLUSTER),),)
    return lambda _request: checks


def _each_topic(operation: Operation, names: Callable[[Any], Sequence[str]]) -> Callable[[Any], Sequence[Check]]:
    return lambda request: [((operation, topic(name)),) for name in dict.fromkeys(names(request))]


def _one_topic(operation: Operation, field: str) -> Callable[[Any], Sequence[Check]]:
    return lambda request: (((operation, topic(getattr(request, field))),),)


# --- Broker ----------------------------------------------------------------------------------


def _metadata(request: bpb.MetadataRequest) -> Sequence[Check]:
    if request.all_topics or not request.topics:
        return ()
    return [((_O.DESCRIBE, topic(name)),) for name in dict.fromkeys(request.topics)]


def _metadata_filter(request: bpb.MetadataRequest, response: bpb.MetadataResponse,
                     allowed: Allowed) -> bpb.MetadataResponse:
    if not (request.all_topics or not request.topics):
        return response
    visible = [t for t in response.topics if allowed(_O.DESCRIBE, topic(t.name))]
    if len(visible) != len(response.topics):
        del response.topics[:]
        response.topics.extend(visible)
    return response


def _list_topics_filter(_request: Any, response: bpb.ListTopicsResponse, allowed: Allowed) -> bpb.ListTopicsResponse:
    return bpb.ListTopicsResponse(names=[n for n in response.names if allowed(_O.DESCRIBE, topic(n))])


def _produce(request: bpb.ProduceRequest) -> Sequence[Check]:
    checks: list[Check] = [((_O.WRITE, topic(name)),) for name in dict.fromkeys(p.topic for p in request.partitions)]
    if request.transactional_id:
        checks.append(((_O.WRITE, Resource(ResourceType.TRANSACTIONAL_ID, request.transactional_id)),))
    return checks


def _produce_stamp(response: bpb.ProduceResponse, throttle_ms: int) -> bpb.ProduceResponse:
    response.throttle_time_ms = throttle_ms
    return response


def _fetch(request: bpb.FetchRequest) -> Sequence[Check]:
    if request.replica_id >= 0:
        return (((_O.CLUSTER_ACTION, CLUSTER),),)
    return [((_O.READ, topic(name)),) for name in dict.fromkeys(p.topic for p in request.partitions)]


def _fetch_bytes(request: bpb.FetchRequest, response: bytes) -> int:
    return 0 if request.replica_id >= 0 else len(response)


def _fetch_stamp(response: bytes, throttle_ms: int) -> bytes:
    # a serialised FetchResponse (brokers.server.wire); a later occurrence of a field wins
    return response + bpb.FetchResponse(throttle_time_ms=throttle_ms).SerializeToString()


def _list_offsets(request: bpb.ListOffsetsRequest) -> Sequence[Check]:
    if request.replica_id >= 0:
        return (((_O.CLUSTER_ACTION, CLUSTER),),)
    return [((_O.DESCRIBE, topic(name)),) for name in dict.fromkeys(p.topic for p in request.partitions)]


def _create_topic(request: bpb.CreateTopicRequest) -> Sequence[Check]:
    return (((_O.CREATE, CLUSTER), (_O.CREATE, topic(request.name))),)


# --- GroupCoordinator (consumer groups) -------------------------------------------------------


def group(name: str) -> Resource:
    return Resource(ResourceType.GROUP, name)


def _on_group(operation: Operation) -> Callable[[Any], Sequence[Check]]:
    return lambda request: (((operation, group(request.group_id)),),)


def _group_and_topics(group_operation: Operation, topic_operation: Operation,
                      topics: Callable[[Any], Sequence[str]]) -> Callable[[Any], Sequence[Check]]:
    def checks(request: Any) -> Sequence[Check]:
        out: list[Check] = [((group_operation, group(request.group_id)),)]
        out.extend(((topic_operation, topic(name)),) for name in dict.fromkeys(topics(request)))
        return out
    return checks


def _offset_fetch_filter(_request: gpb.OffsetFetchRequest, response: gpb.OffsetFetchResponse,
                         allowed: Allowed) -> gpb.OffsetFetchResponse:
    visible = [o for o in response.offsets if allowed(_O.DESCRIBE, topic(o.topic))]
    if len(visible) != len(response.offsets):
        del response.offsets[:]
        response.offsets.extend(visible)
    return response


def _describe_group_filter(_request: Any, response: gpb.DescribeGroupResponse,
                           allowed: Allowed) -> gpb.DescribeGroupResponse:
    """DescribeGroup shows only topics the caller may DESCRIBE: committed offsets (as
    OffsetFetch), and each member's subscribed names and assignments (the pattern is the
    member's own text)."""
    def visible(name: str) -> bool:
        return allowed(_O.DESCRIBE, topic(name))

    offsets = [o for o in response.offsets if visible(o.topic)]
    del response.offsets[:]
    response.offsets.extend(offsets)
    for member in response.members:
        names = [n for n in member.subscribed_topic_names if visible(n)]
        del member.subscribed_topic_names[:]
        member.subscribed_topic_names.extend(names)
        for field in (member.assignment, member.target_assignment, member.pending_revocation):
            kept = [t for t in field if visible(t.topic)]
            del field[:]
            field.extend(kept)
    return response


def _list_groups_filter(_request: Any, response: gpb.ListGroupsResponse, allowed: Allowed) -> gpb.ListGroupsResponse:
    if allowed(_O.DESCRIBE, CLUSTER):
        return response
    return gpb.ListGroupsResponse(groups=[g for g in response.groups if allowed(_O.DESCRIBE, group(g.group_id))])


# --- Compaction ----------------------------------------------------------------------------------


def _describe_compaction(request: Any) -> Sequence[Check]:
    if not request.topics:
        return (((_O.DESCRIBE, CLUSTER),),)
    return [((_O.DESCRIBE, topic(name)),) for name in dict.fromkeys(request.topics)]


_BROKER = "/spark_log.broker.v1.Broker/"
_GROUPS = "/spark_log.groups.v1.GroupCoordinator/"
_COMPACTION = "/spark_log.compaction.v1.Compaction/"
_ADMIN = "/spark_log.broker.v1.Admin/"
_TIERING = "/spark_log.tiering.v1.Tiering/"
_SECURITY = "/spark_log.security.v1.Security/"
_TXN = "/spark_log.transactions.v1.TransactionCoordinator/"


def _on_txn(operation: Operation) -> Callable[[Any], Sequence[Check]]:
    return lambda request: (((operation, Resource(ResourceType.TRANSACTIONAL_ID, request.transactional_id)),),)


def _txn_add_partitions(request: Any) -> Sequence[Check]:
    if request.verify_only:  # a partition leader's KIP-890 check: nodes, or the producer itself
        return (((_O.CLUSTER_ACTION, CLUSTER),
                 (_O.WRITE, Resource(ResourceType.TRANSACTIONAL_ID, request.transactional_id))),)
    checks: list[Check] = [((_O.WRITE, Resource(ResourceType.TRANSACTIONAL_ID, request.transactional_id)),)]
    checks.extend(((_O.WRITE, topic(name)),) for name in dict.fromkeys(p.topic for p in request.partitions))
    return checks


def _txn_add_offsets(request: Any) -> Sequence[Check]:
    """WRITE on the transactional id, READ on the group and on every topic of the offsets
    (the offsets are later written by a node: the caller's own rights are checked here, as
    OffsetCommit checks them and Kafka's TxnOffsetCommit does)."""
    checks: list[Check] = [((_O.WRITE, Resource(ResourceType.TRANSACTIONAL_ID, request.transactional_id)),),
                           ((_O.READ, group(request.group_id)),)]
    checks.extend(((_O.READ, topic(name)),) for name in dict.fromkeys(o.topic for o in request.offsets))
    return checks

RULES: dict[str, Rule] = {
    _BROKER + "Metadata": Rule(_metadata, response_filter=_metadata_filter),
    _BROKER + "Produce": Rule(_produce, quota=Quota(
        "producer_byte_rate", lambda request, _response: sum(len(p.records) for p in request.partitions),
        _produce_stamp)),
    _BROKER + "Fetch": Rule(_fetch, quota=Quota("consumer_byte_rate", _fetch_bytes, _fetch_stamp)),
    _BROKER + "ListOffsets": Rule(_list_offsets),
    _BROKER + "DescribePartitions": Rule(_each_topic(_O.DESCRIBE, lambda r: [t.topic for t in r.topics])),
    _ADMIN + "CreateTopic": Rule(_create_topic),
    _ADMIN + "DeleteTopic": Rule(_one_topic(_O.DELETE, "name")),
    _ADMIN + "DescribeTopic": Rule(_one_topic(_O.DESCRIBE, "name")),
    _ADMIN + "ListTopics": Rule(_none, response_filter=_list_topics_filter),
    _ADMIN + "AlterConfigs": Rule(_one_topic(_O.ALTER_CONFIGS, "topic")),
    _ADMIN + "RegisterSchema": Rule(_one_topic(_O.ALTER, "topic")),
    _ADMIN + "AlterPartitionReassignments": Rule(_on_cluster(_O.ALTER)),
    _ADMIN + "ListPartitionReassignments": Rule(_on_cluster(_O.DESCRIBE)),
    _ADMIN + "ElectLeaders": Rule(_on_cluster(_O.ALTER)),
    _COMPACTION + "Describe": Rule(_describe_compaction),
    # where a broker's binary data listener is (brokers/server/data_listener.py): broker addresses, as Metadata shows
    "/spark_log.data.v1.DataListener/Describe": Rule(_none),
    _COMPACTION + "Compact": Rule(_one_topic(_O.ALTER, "topic")),
    _COMPACTION + "OfferOffsetMap": Rule(_one_topic(_O.ALTER, "topic")),
    _TIERING + "DescribeTier": Rule(_describe_compaction),   # DESCRIBE each topic (none named: the cluster)
    _TIERING + "CommitTiered": Rule(_one_topic(_O.ALTER, "topic")),  # it lets the brokers delete local segments
    _SECURITY + "ScramStart": Rule(_none, exempt=True),
    _SECURITY + "ScramFinish": Rule(_none, exempt=True),
    _SECURITY + "WhoAmI": Rule(_none, identity=True),
    _SECURITY + "AlterUserScramCredentials": Rule(_on_cluster(_O.ALTER)),
    _SECURITY + "DescribeUserScramCredentials": Rule(_on_cluster(_O.DESCRIBE)),
    _SECURITY + "CreateAcls": Rule(_on_cluster(_O.ALTER)),
    _SECURITY + "DeleteAcls": Rule(_on_cluster(_O.ALTER)),
    _SECURITY + "DescribeAcls": Rule(_on_cluster(_O.DESCRIBE)),
    _SECURITY + "AlterClientQuotas": Rule(_on_cluster(_O.ALTER_CONFIGS)),
    _SECURITY + "DescribeClientQuotas": Rule(_on_cluster(_O.DESCRIBE_CONFIGS)),
    "/spark_log.raft.RaftService/Call": Rule(_on_cluster(_O.CLUSTER_ACTION)),
    "/spark_log.quorum.v1.Quorum/DescribeQuorum": Rule(_on_cluster(_O.DESCRIBE)),
    _GROUPS + "FindCoordinator": Rule(_on_group(_O.DESCRIBE)),
    _GROUPS + "DescribeGroup": Rule(_on_group(_O.DESCRIBE), response_filter=_describe_group_filter),
    _GROUPS + "ConsumerGroupHeartbeat": Rule(_group_and_topics(_O.READ, _O.DESCRIBE,
                                                               lambda r: list(r.subscribed_topic_names))),
    _GROUPS + "TxnOffsetCommit": Rule(_on_cluster(_O.CLUSTER_ACTION)),
    _GROUPS + "HoldTxnOffsets": Rule(_on_cluster(_O.CLUSTER_ACTION)),
    _GROUPS + "ReleaseTxnOffsets": Rule(_on_cluster(_O.CLUSTER_ACTION)),
    _GROUPS + "OffsetCommit": Rule(_group_and_topics(_O.READ, _O.READ, lambda r: [p.topic for p in r.partitions])),
    _GROUPS + "OffsetFetch": Rule(_group_and_topics(_O.DESCRIBE, _O.DESCRIBE, lambda r: [t.topic for t in r.partitions]),
                                  response_filter=_offset_fetch_filter),
    _GROUPS + "ListGroups": Rule(_none, response_filter=_list_groups_filter),
    _GROUPS + "DeleteGroup": Rule(_on_group(_O.DELETE)),
    _TXN + "FindCoordinator": Rule(_on_txn(_O.DESCRIBE)),
    _TXN + "DescribeTxn": Rule(_on_txn(_O.DESCRIBE)),
    _TXN + "InitProducerId": Rule(_on_txn(_O.WRITE)),
    _TXN + "AddPartitions": Rule(_txn_add_partitions),
    _TXN + "JoinTxn": Rule(_on_txn(_O.WRITE)),
    _TXN + "AddOffsets": Rule(_txn_add_offsets),
    _TXN + "EndTxn": Rule(_on_txn(_O.WRITE)),
    "/spark_log.transactions.v1.TxnMarkers/WriteTxnMarkers": Rule(_on_cluster(_O.CLUSTER_ACTION)),
    _GROUPS + "OffsetDelete": Rule(_group_and_topics(_O.DELETE, _O.READ, lambda r: [t.topic for t in r.partitions])),
}
# Node-to-node services: every method, present and future, is for nodes only.
for _service in (cpb.DESCRIPTOR.services_by_name["ControllerService"],
                 spb.DESCRIPTOR.services_by_name["SecurityController"],
                 ipb.DESCRIPTOR.services_by_name["IsrController"],
                 qpb.DESCRIPTOR.services_by_name["QuorumController"]):
    for _method in _service.methods:
        RULES[f"/{_service.full_name}/{_method.name}"] = Rule(_on_cluster(_O.CLUSTER_ACTION))


def undeclared(paths: Iterable[str], rules: Mapping[str, Rule] = RULES) -> list[str]:
    """The gRPC method paths (``"/pkg.Service/Method"``) among ``paths`` that have no rule
    in ``rules``, in the order given, without repeats: what must be declared above before
    the authorizer lets anyone but super users and nodes call them."""
    return [path for path in dict.fromkeys(paths) if path not in rules]
