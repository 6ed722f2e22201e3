from spark_log.proto import broker_pb2 as _broker_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class PartitionTier(_message.Message):
    __slots__ = ("topic", "partition", "broker_id", "leader", "remote_storage_enable", "tier_start", "tiered_end", "log_start_offset", "high_watermark", "last_stable_offset", "log_end_offset", "tierable_end", "local_bytes", "error", "topic_id", "untiered_bytes")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_FIELD_NUMBER: _ClassVar[int]
    REMOTE_STORAGE_ENABLE_FIELD_NUMBER: _ClassVar[int]
    TIER_START_FIELD_NUMBER: _ClassVar[int]
    TIERED_END_FIELD_NUMBER: _ClassVar[int]
    LOG_START_OFFSET_FIELD_NUMBER: _ClassVar[int]
    HIGH_WATERMARK_FIELD_NUMBER: _ClassVar[int]
    LAST_STABLE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LOG_END_OFFSET_FIELD_NUMBER: _ClassVar[int]
    TIERABLE_END_FIELD_NUMBER: _ClassVar[int]
    LOCAL_BYTES_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
    UNTIERED_BYTES_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    broker_id: int
    leader: bool
    remote_storage_enable: bool
    tier_start: int
    tiered_end: int
    log_start_offset: int
    high_watermark: int
    last_stable_offset: int
    log_end_offset: int
    tierable_end: int
    local_bytes: int
    error: _broker_pb2.Error
    topic_id: str
    untiered_bytes: int
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., broker_id: _Optional[int] = ..., leader: _Optional[bool] = ..., remote_storage_enable: _Optional[bool] = ..., tier_start: _Optional[int] = ..., tiered_end: _Optional[int] = ..., log_start_offset: _Optional[int] = ..., high_watermark: _Optional[int] = ..., last_stable_offset: _Optional[int] = ..., log_end_offset: _Optional[int] = ..., tierable_end: _Optional[int] = ..., local_bytes: _Optional[int] = ..., error: _Optional[_Union[_broker_pb2.Error, _Mapping]] = ..., topic_id: _Optional[str] = ..., untiered_bytes: _Optional[int] = ...) -> None: ...

class DescribeTierRequest(_message.Message):
    __slots__ = ("topics", "leaders_only")
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    LEADERS_ONLY_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedScalarFieldContainer[str]
    leaders_only: bool
    def __init__(self, topics: _Optional[_Iterable[str]] = ..., leaders_only: _Optional[bool] = ...) -> None: ...

class DescribeTierResponse(_message.Message):
    __slots__ = ("location", "partitions", "storage_options")
    class StorageOptionsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    LOCATION_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    STORAGE_OPTIONS_FIELD_NUMBER: _ClassVar[int]
    location: str
    partitions: _containers.RepeatedCompositeFieldContainer[PartitionTier]
    storage_options: _containers.ScalarMap[str, str]
    def __init__(self, location: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[PartitionTier, _Mapping]]] = ..., storage_options: _Optional[_Mapping[str, str]] = ...) -> None: ...

class CommitTieredRequest(_message.Message):
    __slots__ = ("topic", "partition", "tiered_end", "tier_start", "timeout_ms")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    TIERED_END_FIELD_NUMBER: _ClassVar[int]
    TIER_START_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    tiered_end: int
    tier_start: int
    timeout_ms: int
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., tiered_end: _Optional[int] = ..., tier_start: _Optional[int] = ..., timeout_ms: _Optional[int] = ...) -> None: ...

class CommitTieredResponse(_message.Message):
    __slots__ = ("partition",)
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    partition: PartitionTier
    def __init__(self, partition: _Optional[_Union[PartitionTier, _Mapping]] = ...) -> None: ...
