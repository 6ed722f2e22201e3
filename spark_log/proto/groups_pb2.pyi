from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class TopicPartitions(_message.Message):
    __slots__ = ("topic", "partitions")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partitions: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, topic: _Optional[str] = ..., partitions: _Optional[_Iterable[int]] = ...) -> None: ...

class FindCoordinatorRequest(_message.Message):
    __slots__ = ("group_id",)
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    def __init__(self, group_id: _Optional[str] = ...) -> None: ...

class FindCoordinatorResponse(_message.Message):
    __slots__ = ("broker_id", "address", "partition")
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    address: str
    partition: int
    def __init__(self, broker_id: _Optional[int] = ..., address: _Optional[str] = ..., partition: _Optional[int] = ...) -> None: ...

class ConsumerGroupHeartbeatRequest(_message.Message):
    __slots__ = ("group_id", "member_id", "member_epoch", "instance_id", "rebalance_timeout_ms", "session_timeout_ms", "subscribed_topic_names", "subscribed_topic_regex", "server_assignor", "owned", "client_id", "client_host")
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    REBALANCE_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    SESSION_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIBED_TOPIC_NAMES_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIBED_TOPIC_REGEX_FIELD_NUMBER: _ClassVar[int]
    SERVER_ASSIGNOR_FIELD_NUMBER: _ClassVar[int]
    OWNED_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    CLIENT_HOST_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscribed_topic_names: _containers.RepeatedScalarFieldContainer[str]
    subscribed_topic_regex: str
    server_assignor: str
    owned: _containers.RepeatedCompositeFieldContainer[TopicPartitions]
    client_id: str
    client_host: str
    def __init__(self, group_id: _Optional[str] = ..., member_id: _Optional[str] = ..., member_epoch: _Optional[int] = ..., instance_id: _Optional[str] = ..., rebalance_timeout_ms: _Optional[int] = ..., session_timeout_ms: _Optional[int] = ..., subscribed_topic_names: _Optional[_Iterable[str]] = ..., subscribed_topic_regex: _Optional[str] = ..., server_assignor: _Optional[str] = ..., owned: _Optional[_Iterable[_Union[TopicPartitions, _Mapping]]] = ..., client_id: _Optional[str] = ..., client_host: _Optional[str] = ...) -> None: ...

class ConsumerGroupHeartbeatResponse(_message.Message):
    __slots__ = ("member_id", "member_epoch", "heartbeat_interval_ms", "assignment")
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_INTERVAL_MS_FIELD_NUMBER: _ClassVar[int]
    ASSIGNMENT_FIELD_NUMBER: _ClassVar[int]
    member_id: str
    member_epoch: int
    heartbeat_interval_ms: int
    assignment: _containers.RepeatedCompositeFieldContainer[TopicPartitions]
    def __init__(self, member_id: _Optional[str] = ..., member_epoch: _Optional[int] = ..., heartbeat_interval_ms: _Optional[int] = ..., assignment: _Optional[_Iterable[_Union[TopicPartitions, _Mapping]]] = ...) -> None: ...

class CommitPartition(_message.Message):
    __slots__ = ("topic", "partition", "offset", "metadata", "leader_epoch")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    offset: int
    metadata: str
    leader_epoch: int
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., offset: _Optional[int] = ..., metadata: _Optional[str] = ..., leader_epoch: _Optional[int] = ...) -> None: ...

class OffsetCommitRequest(_message.Message):
    __slots__ = ("group_id", "member_id", "member_epoch", "partitions", "validate_only", "transactional_id", "hold_until_ms")
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    VALIDATE_ONLY_FIELD_NUMBER: _ClassVar[int]
    TRANSACTIONAL_ID_FIELD_NUMBER: _ClassVar[int]
    HOLD_UNTIL_MS_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    member_id: str
    member_epoch: int
    partitions: _containers.RepeatedCompositeFieldContainer[CommitPartition]
    validate_only: bool
    transactional_id: str
    hold_until_ms: int
    def __init__(self, group_id: _Optional[str] = ..., member_id: _Optional[str] = ..., member_epoch: _Optional[int] = ..., partitions: _Optional[_Iterable[_Union[CommitPartition, _Mapping]]] = ..., validate_only: _Optional[bool] = ..., transactional_id: _Optional[str] = ..., hold_until_ms: _Optional[int] = ...) -> None: ...

class OffsetCommitResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class OffsetFetchRequest(_message.Message):
    __slots__ = ("group_id", "partitions", "all", "require_stable")
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    ALL_FIELD_NUMBER: _ClassVar[int]
    REQUIRE_STABLE_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    partitions: _containers.RepeatedCompositeFieldContainer[TopicPartitions]
    all: bool
    require_stable: bool
    def __init__(self, group_id: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[TopicPartitions, _Mapping]]] = ..., all: _Optional[bool] = ..., require_stable: _Optional[bool] = ...) -> None: ...

class FetchedOffset(_message.Message):
    __slots__ = ("topic", "partition", "offset", "metadata", "commit_timestamp_ms")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    COMMIT_TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    offset: int
    metadata: str
    commit_timestamp_ms: int
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., offset: _Optional[int] = ..., metadata: _Optional[str] = ..., commit_timestamp_ms: _Optional[int] = ...) -> None: ...

class OffsetFetchResponse(_message.Message):
    __slots__ = ("offsets",)
    OFFSETS_FIELD_NUMBER: _ClassVar[int]
    offsets: _containers.RepeatedCompositeFieldContainer[FetchedOffset]
    def __init__(self, offsets: _Optional[_Iterable[_Union[FetchedOffset, _Mapping]]] = ...) -> None: ...

class ListGroupsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GroupListing(_message.Message):
    __slots__ = ("group_id", "state", "members", "coordinator_id")
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    COORDINATOR_ID_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    state: str
    members: int
    coordinator_id: int
    def __init__(self, group_id: _Optional[str] = ..., state: _Optional[str] = ..., members: _Optional[int] = ..., coordinator_id: _Optional[int] = ...) -> None: ...

class ListGroupsResponse(_message.Message):
    __slots__ = ("groups",)
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    groups: _containers.RepeatedCompositeFieldContainer[GroupListing]
    def __init__(self, groups: _Optional[_Iterable[_Union[GroupListing, _Mapping]]] = ...) -> None: ...

class DescribeGroupRequest(_message.Message):
    __slots__ = ("group_id",)
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    def __init__(self, group_id: _Optional[str] = ...) -> None: ...

class MemberDescription(_message.Message):
    __slots__ = ("member_id", "instance_id", "client_id", "client_host", "member_epoch", "state", "subscribed_topic_names", "subscribed_topic_regex", "assignment", "target_assignment", "pending_revocation", "session_timeout_ms")
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    CLIENT_HOST_FIELD_NUMBER: _ClassVar[int]
    MEMBER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIBED_TOPIC_NAMES_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIBED_TOPIC_REGEX_FIELD_NUMBER: _ClassVar[int]
    ASSIGNMENT_FIELD_NUMBER: _ClassVar[int]
    TARGET_ASSIGNMENT_FIELD_NUMBER: _ClassVar[int]
    PENDING_REVOCATION_FIELD_NUMBER: _ClassVar[int]
    SESSION_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    member_id: str
    instance_id: str
    client_id: str
    client_host: str
    member_epoch: int
    state: str
    subscribed_topic_names: _containers.RepeatedScalarFieldContainer[str]
    subscribed_topic_regex: str
    assignment: _containers.RepeatedCompositeFieldContainer[TopicPartitions]
    target_assignment: _containers.RepeatedCompositeFieldContainer[TopicPartitions]
    pending_revocation: _containers.RepeatedCompositeFieldContainer[TopicPartitions]
    session_timeout_ms: int
    def __init__(self, member_id: _Optional[str] = ..., instance_id: _Optional[str] = ..., client_id: _Optional[str] = ..., client_host: _Optional[str] = ..., member_epoch: _Optional[int] = ..., state: _Optional[str] = ..., subscribed_topic_names: _Optional[_Iterable[str]] = ..., subscribed_topic_regex: _Optional[str] = ..., assignment: _Optional[_Iterable[_Union[TopicPartitions, _Mapping]]] = ..., target_assignment: _Optional[_Iterable[_Union[TopicPartitions, _Mapping]]] = ..., pending_revocation: _Optional[_Iterable[_Union[TopicPartitions, _Mapping]]] = ..., session_timeout_ms: _Optional[int] = ...) -> None: ...

class DescribeGroupResponse(_message.Message):
    __slots__ = ("group_id", "state", "group_epoch", "assignment_epoch", "assignor", "coordinator_id", "members", "offsets")
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    GROUP_EPOCH_FIELD_NUMBER: _ClassVar[int]
    ASSIGNMENT_EPOCH_FIELD_NUMBER: _ClassVar[int]
    ASSIGNOR_FIELD_NUMBER: _ClassVar[int]
    COORDINATOR_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    OFFSETS_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    state: str
    group_epoch: int
    assignment_epoch: int
    assignor: str
    coordinator_id: int
    members: _containers.RepeatedCompositeFieldContainer[MemberDescription]
    offsets: _containers.RepeatedCompositeFieldContainer[FetchedOffset]
    def __init__(self, group_id: _Optional[str] = ..., state: _Optional[str] = ..., group_epoch: _Optional[int] = ..., assignment_epoch: _Optional[int] = ..., assignor: _Optional[str] = ..., coordinator_id: _Optional[int] = ..., members: _Optional[_Iterable[_Union[MemberDescription, _Mapping]]] = ..., offsets: _Optional[_Iterable[_Union[FetchedOffset, _Mapping]]] = ...) -> None: ...

class DeleteGroupRequest(_message.Message):
    __slots__ = ("group_id",)
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    def __init__(self, group_id: _Optional[str] = ...) -> None: ...

class DeleteGroupResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class OffsetDeleteRequest(_message.Message):
    __slots__ = ("group_id", "partitions")
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    partitions: _containers.RepeatedCompositeFieldContainer[TopicPartitions]
    def __init__(self, group_id: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[TopicPartitions, _Mapping]]] = ...) -> None: ...

class OffsetDeleteResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...
