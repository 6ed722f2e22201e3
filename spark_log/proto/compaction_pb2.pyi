from spark_log.proto import broker_pb2 as _broker_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class CompactionPlan(_message.Message):
    __slots__ = ("offset", "end_offset", "tombstone_horizon_ms", "producer_horizon_ms")
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    END_OFFSET_FIELD_NUMBER: _ClassVar[int]
    TOMBSTONE_HORIZON_MS_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_HORIZON_MS_FIELD_NUMBER: _ClassVar[int]
    offset: int
    end_offset: int
    tombstone_horizon_ms: int
    producer_horizon_ms: int
    def __init__(self, offset: _Optional[int] = ..., end_offset: _Optional[int] = ..., tombstone_horizon_ms: _Optional[int] = ..., producer_horizon_ms: _Optional[int] = ...) -> None: ...

class PartitionCompaction(_message.Message):
    __slots__ = ("topic", "partition", "broker_id", "leader", "cleanup_policy", "cleaned_offset", "cleanable_end", "clean_bytes", "dirty_bytes", "dirty_ratio", "latest_plan", "applied_plan_offset", "requested", "log_start_offset", "high_watermark", "log_end_offset", "records_read", "records_kept", "tombstones_removed", "bytes_read", "bytes_written", "error", "markers_removed")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_FIELD_NUMBER: _ClassVar[int]
    CLEANUP_POLICY_FIELD_NUMBER: _ClassVar[int]
    CLEANED_OFFSET_FIELD_NUMBER: _ClassVar[int]
    CLEANABLE_END_FIELD_NUMBER: _ClassVar[int]
    CLEAN_BYTES_FIELD_NUMBER: _ClassVar[int]
    DIRTY_BYTES_FIELD_NUMBER: _ClassVar[int]
    DIRTY_RATIO_FIELD_NUMBER: _ClassVar[int]
    LATEST_PLAN_FIELD_NUMBER: _ClassVar[int]
    APPLIED_PLAN_OFFSET_FIELD_NUMBER: _ClassVar[int]
    REQUESTED_FIELD_NUMBER: _ClassVar[int]
    LOG_START_OFFSET_FIELD_NUMBER: _ClassVar[int]
    HIGH_WATERMARK_FIELD_NUMBER: _ClassVar[int]
    LOG_END_OFFSET_FIELD_NUMBER: _ClassVar[int]
    RECORDS_READ_FIELD_NUMBER: _ClassVar[int]
    RECORDS_KEPT_FIELD_NUMBER: _ClassVar[int]
    TOMBSTONES_REMOVED_FIELD_NUMBER: _ClassVar[int]
    BYTES_READ_FIELD_NUMBER: _ClassVar[int]
    BYTES_WRITTEN_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    MARKERS_REMOVED_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    broker_id: int
    leader: bool
    cleanup_policy: str
    cleaned_offset: int
    cleanable_end: int
    clean_bytes: int
    dirty_bytes: int
    dirty_ratio: float
    latest_plan: CompactionPlan
    applied_plan_offset: int
    requested: bool
    log_start_offset: int
    high_watermark: int
    log_end_offset: int
    records_read: int
    records_kept: int
    tombstones_removed: int
    bytes_read: int
    bytes_written: int
    error: _broker_pb2.Error
    markers_removed: int
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., broker_id: _Optional[int] = ..., leader: _Optional[bool] = ..., cleanup_policy: _Optional[str] = ..., cleaned_offset: _Optional[int] = ..., cleanable_end: _Optional[int] = ..., clean_bytes: _Optional[int] = ..., dirty_bytes: _Optional[int] = ..., dirty_ratio: _Optional[float] = ..., latest_plan: _Optional[_Union[CompactionPlan, _Mapping]] = ..., applied_plan_offset: _Optional[int] = ..., requested: _Optional[bool] = ..., log_start_offset: _Optional[int] = ..., high_watermark: _Optional[int] = ..., log_end_offset: _Optional[int] = ..., records_read: _Optional[int] = ..., records_kept: _Optional[int] = ..., tombstones_removed: _Optional[int] = ..., bytes_read: _Optional[int] = ..., bytes_written: _Optional[int] = ..., error: _Optional[_Union[_broker_pb2.Error, _Mapping]] = ..., markers_removed: _Optional[int] = ...) -> None: ...

class DescribeCompactionRequest(_message.Message):
    __slots__ = ("topics", "leaders_only")
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    LEADERS_ONLY_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedScalarFieldContainer[str]
    leaders_only: bool
    def __init__(self, topics: _Optional[_Iterable[str]] = ..., leaders_only: _Optional[bool] = ...) -> None: ...

class DescribeCompactionResponse(_message.Message):
    __slots__ = ("partitions",)
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    partitions: _containers.RepeatedCompositeFieldContainer[PartitionCompaction]
    def __init__(self, partitions: _Optional[_Iterable[_Union[PartitionCompaction, _Mapping]]] = ...) -> None: ...

class CompactRequest(_message.Message):
    __slots__ = ("topic", "partitions")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partitions: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, topic: _Optional[str] = ..., partitions: _Optional[_Iterable[int]] = ...) -> None: ...

class CompactResponse(_message.Message):
    __slots__ = ("partitions",)
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    partitions: _containers.RepeatedCompositeFieldContainer[PartitionCompaction]
    def __init__(self, partitions: _Optional[_Iterable[_Union[PartitionCompaction, _Mapping]]] = ...) -> None: ...

class OffsetMapRequest(_message.Message):
    __slots__ = ("topic", "partition", "start_offset", "end_offset", "offset_map", "plan")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    START_OFFSET_FIELD_NUMBER: _ClassVar[int]
    END_OFFSET_FIELD_NUMBER: _ClassVar[int]
    OFFSET_MAP_FIELD_NUMBER: _ClassVar[int]
    PLAN_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    start_offset: int
    end_offset: int
    offset_map: bytes
    plan: bool
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., start_offset: _Optional[int] = ..., end_offset: _Optional[int] = ..., offset_map: _Optional[bytes] = ..., plan: _Optional[bool] = ...) -> None: ...

class OffsetMapResponse(_message.Message):
    __slots__ = ("plan",)
    PLAN_FIELD_NUMBER: _ClassVar[int]
    plan: CompactionPlan
    def __init__(self, plan: _Optional[_Union[CompactionPlan, _Mapping]] = ...) -> None: ...
