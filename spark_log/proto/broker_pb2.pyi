from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class IsolationLevel(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    READ_UNCOMMITTED: _ClassVar[IsolationLevel]
    READ_COMMITTED: _ClassVar[IsolationLevel]
READ_UNCOMMITTED: IsolationLevel
READ_COMMITTED: IsolationLevel

class Error(_message.Message):
    __slots__ = ("code", "message", "leader_address", "leader_id")
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    LEADER_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    code: int
    message: str
    leader_address: str
    leader_id: int
    def __init__(self, code: _Optional[int] = ..., message: _Optional[str] = ..., leader_address: _Optional[str] = ..., leader_id: _Optional[int] = ...) -> None: ...

class MetadataRequest(_message.Message):
    __slots__ = ("topics", "all_topics", "allow_auto_topic_creation")
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    ALL_TOPICS_FIELD_NUMBER: _ClassVar[int]
    ALLOW_AUTO_TOPIC_CREATION_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedScalarFieldContainer[str]
    all_topics: bool
    allow_auto_topic_creation: bool
    def __init__(self, topics: _Optional[_Iterable[str]] = ..., all_topics: _Optional[bool] = ..., allow_auto_topic_creation: _Optional[bool] = ...) -> None: ...

class BrokerMeta(_message.Message):
    __slots__ = ("broker_id", "address", "rack", "fenced")
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    RACK_FIELD_NUMBER: _ClassVar[int]
    FENCED_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    address: str
    rack: str
    fenced: bool
    def __init__(self, broker_id: _Optional[int] = ..., address: _Optional[str] = ..., rack: _Optional[str] = ..., fenced: _Optional[bool] = ...) -> None: ...

class PartitionMeta(_message.Message):
    __slots__ = ("partition", "leader_id", "leader_epoch", "replicas", "isr", "partition_epoch", "adding_replicas", "removing_replicas")
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    ISR_FIELD_NUMBER: _ClassVar[int]
    PARTITION_EPOCH_FIELD_NUMBER: _ClassVar[int]
    ADDING_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    REMOVING_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    partition: int
    leader_id: int
    leader_epoch: int
    replicas: _containers.RepeatedScalarFieldContainer[int]
    isr: _containers.RepeatedScalarFieldContainer[int]
    partition_epoch: int
    adding_replicas: _containers.RepeatedScalarFieldContainer[int]
    removing_replicas: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, partition: _Optional[int] = ..., leader_id: _Optional[int] = ..., leader_epoch: _Optional[int] = ..., replicas: _Optional[_Iterable[int]] = ..., isr: _Optional[_Iterable[int]] = ..., partition_epoch: _Optional[int] = ..., adding_replicas: _Optional[_Iterable[int]] = ..., removing_replicas: _Optional[_Iterable[int]] = ...) -> None: ...

class SchemaVersion(_message.Message):
    __slots__ = ("schema_id", "arrow_schema")
    SCHEMA_ID_FIELD_NUMBER: _ClassVar[int]
    ARROW_SCHEMA_FIELD_NUMBER: _ClassVar[int]
    schema_id: int
    arrow_schema: bytes
    def __init__(self, schema_id: _Optional[int] = ..., arrow_schema: _Optional[bytes] = ...) -> None: ...

class TopicMeta(_message.Message):
    __slots__ = ("name", "error", "topic_id", "kind", "partitions", "schemas", "key_columns")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    SCHEMAS_FIELD_NUMBER: _ClassVar[int]
    KEY_COLUMNS_FIELD_NUMBER: _ClassVar[int]
    name: str
    error: Error
    topic_id: str
    kind: str
    partitions: _containers.RepeatedCompositeFieldContainer[PartitionMeta]
    schemas: _containers.RepeatedCompositeFieldContainer[SchemaVersion]
    key_columns: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, name: _Optional[str] = ..., error: _Optional[_Union[Error, _Mapping]] = ..., topic_id: _Optional[str] = ..., kind: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[PartitionMeta, _Mapping]]] = ..., schemas: _Optional[_Iterable[_Union[SchemaVersion, _Mapping]]] = ..., key_columns: _Optional[_Iterable[str]] = ...) -> None: ...

class MetadataResponse(_message.Message):
    __slots__ = ("brokers", "controller_id", "topics", "metadata_offset")
    BROKERS_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_ID_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    METADATA_OFFSET_FIELD_NUMBER: _ClassVar[int]
    brokers: _containers.RepeatedCompositeFieldContainer[BrokerMeta]
    controller_id: int
    topics: _containers.RepeatedCompositeFieldContainer[TopicMeta]
    metadata_offset: int
    def __init__(self, brokers: _Optional[_Iterable[_Union[BrokerMeta, _Mapping]]] = ..., controller_id: _Optional[int] = ..., topics: _Optional[_Iterable[_Union[TopicMeta, _Mapping]]] = ..., metadata_offset: _Optional[int] = ...) -> None: ...

class ProduceRequest(_message.Message):
    __slots__ = ("acks", "timeout_ms", "transactional_id", "partitions")
    ACKS_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    TRANSACTIONAL_ID_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    acks: int
    timeout_ms: int
    transactional_id: str
    partitions: _containers.RepeatedCompositeFieldContainer[PartitionRecords]
    def __init__(self, acks: _Optional[int] = ..., timeout_ms: _Optional[int] = ..., transactional_id: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[PartitionRecords, _Mapping]]] = ...) -> None: ...

class PartitionRecords(_message.Message):
    __slots__ = ("topic", "partition", "records", "current_leader_epoch")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    CURRENT_LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    records: bytes
    current_leader_epoch: int
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., records: _Optional[bytes] = ..., current_leader_epoch: _Optional[int] = ...) -> None: ...

class PartitionProduceResult(_message.Message):
    __slots__ = ("topic", "partition", "error", "base_offset", "last_offset", "log_append_time_ms", "log_start_offset", "duplicate", "high_watermark")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    BASE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LAST_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LOG_APPEND_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    LOG_START_OFFSET_FIELD_NUMBER: _ClassVar[int]
    DUPLICATE_FIELD_NUMBER: _ClassVar[int]
    HIGH_WATERMARK_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    error: Error
    base_offset: int
    last_offset: int
    log_append_time_ms: int
    log_start_offset: int
    duplicate: bool
    high_watermark: int
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., error: _Optional[_Union[Error, _Mapping]] = ..., base_offset: _Optional[int] = ..., last_offset: _Optional[int] = ..., log_append_time_ms: _Optional[int] = ..., log_start_offset: _Optional[int] = ..., duplicate: _Optional[bool] = ..., high_watermark: _Optional[int] = ...) -> None: ...

class ProduceResponse(_message.Message):
    __slots__ = ("partitions", "throttle_time_ms")
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    THROTTLE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    partitions: _containers.RepeatedCompositeFieldContainer[PartitionProduceResult]
    throttle_time_ms: int
    def __init__(self, partitions: _Optional[_Iterable[_Union[PartitionProduceResult, _Mapping]]] = ..., throttle_time_ms: _Optional[int] = ...) -> None: ...

class FetchPartition(_message.Message):
    __slots__ = ("topic", "partition", "fetch_offset", "partition_max_bytes", "current_leader_epoch", "last_fetched_epoch", "log_start_offset", "max_offset", "topic_id")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    FETCH_OFFSET_FIELD_NUMBER: _ClassVar[int]
    PARTITION_MAX_BYTES_FIELD_NUMBER: _ClassVar[int]
    CURRENT_LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    LAST_FETCHED_EPOCH_FIELD_NUMBER: _ClassVar[int]
    LOG_START_OFFSET_FIELD_NUMBER: _ClassVar[int]
    MAX_OFFSET_FIELD_NUMBER: _ClassVar[int]
    TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int
    last_fetched_epoch: int
    log_start_offset: int
    max_offset: int
    topic_id: str
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., fetch_offset: _Optional[int] = ..., partition_max_bytes: _Optional[int] = ..., current_leader_epoch: _Optional[int] = ..., last_fetched_epoch: _Optional[int] = ..., log_start_offset: _Optional[int] = ..., max_offset: _Optional[int] = ..., topic_id: _Optional[str] = ...) -> None: ...

class FetchRequest(_message.Message):
    __slots__ = ("replica_id", "max_wait_ms", "min_bytes", "max_bytes", "isolation_level", "partitions", "project", "columns", "row_filter", "replica_epoch", "rack_id")
    REPLICA_ID_FIELD_NUMBER: _ClassVar[int]
    MAX_WAIT_MS_FIELD_NUMBER: _ClassVar[int]
    MIN_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_BYTES_FIELD_NUMBER: _ClassVar[int]
    ISOLATION_LEVEL_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    COLUMNS_FIELD_NUMBER: _ClassVar[int]
    ROW_FILTER_FIELD_NUMBER: _ClassVar[int]
    REPLICA_EPOCH_FIELD_NUMBER: _ClassVar[int]
    RACK_ID_FIELD_NUMBER: _ClassVar[int]
    replica_id: int
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    isolation_level: IsolationLevel
    partitions: _containers.RepeatedCompositeFieldContainer[FetchPartition]
    project: bool
    columns: _containers.RepeatedScalarFieldContainer[str]
    row_filter: bytes
    replica_epoch: int
    rack_id: str
    def __init__(self, replica_id: _Optional[int] = ..., max_wait_ms: _Optional[int] = ..., min_bytes: _Optional[int] = ..., max_bytes: _Optional[int] = ..., isolation_level: _Optional[_Union[IsolationLevel, str]] = ..., partitions: _Optional[_Iterable[_Union[FetchPartition, _Mapping]]] = ..., project: _Optional[bool] = ..., columns: _Optional[_Iterable[str]] = ..., row_filter: _Optional[bytes] = ..., replica_epoch: _Optional[int] = ..., rack_id: _Optional[str] = ...) -> None: ...

class EpochEndOffset(_message.Message):
    __slots__ = ("epoch", "end_offset")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    END_OFFSET_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    end_offset: int
    def __init__(self, epoch: _Optional[int] = ..., end_offset: _Optional[int] = ...) -> None: ...

class AbortedTransaction(_message.Message):
    __slots__ = ("producer_id", "first_offset", "last_offset")
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    FIRST_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LAST_OFFSET_FIELD_NUMBER: _ClassVar[int]
    producer_id: int
    first_offset: int
    last_offset: int
    def __init__(self, producer_id: _Optional[int] = ..., first_offset: _Optional[int] = ..., last_offset: _Optional[int] = ...) -> None: ...

class FetchPartitionResult(_message.Message):
    __slots__ = ("topic", "partition", "error", "high_watermark", "last_stable_offset", "log_start_offset", "log_end_offset", "records", "arrow_stream", "next_fetch_offset", "diverging_epoch", "aborted_transactions", "preferred_read_replica")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    HIGH_WATERMARK_FIELD_NUMBER: _ClassVar[int]
    LAST_STABLE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LOG_START_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LOG_END_OFFSET_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    ARROW_STREAM_FIELD_NUMBER: _ClassVar[int]
    NEXT_FETCH_OFFSET_FIELD_NUMBER: _ClassVar[int]
    DIVERGING_EPOCH_FIELD_NUMBER: _ClassVar[int]
    ABORTED_TRANSACTIONS_FIELD_NUMBER: _ClassVar[int]
    PREFERRED_READ_REPLICA_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    error: Error
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    log_end_offset: int
    records: bytes
    arrow_stream: bytes
    next_fetch_offset: int
    diverging_epoch: EpochEndOffset
    aborted_transactions: _containers.RepeatedCompositeFieldContainer[AbortedTransaction]
    preferred_read_replica: int
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., error: _Optional[_Union[Error, _Mapping]] = ..., high_watermark: _Optional[int] = ..., last_stable_offset: _Optional[int] = ..., log_start_offset: _Optional[int] = ..., log_end_offset: _Optional[int] = ..., records: _Optional[bytes] = ..., arrow_stream: _Optional[bytes] = ..., next_fetch_offset: _Optional[int] = ..., diverging_epoch: _Optional[_Union[EpochEndOffset, _Mapping]] = ..., aborted_transactions: _Optional[_Iterable[_Union[AbortedTransaction, _Mapping]]] = ..., preferred_read_replica: _Optional[int] = ...) -> None: ...

class FetchResponse(_message.Message):
    __slots__ = ("partitions", "throttle_time_ms")
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    THROTTLE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    partitions: _containers.RepeatedCompositeFieldContainer[FetchPartitionResult]
    throttle_time_ms: int
    def __init__(self, partitions: _Optional[_Iterable[_Union[FetchPartitionResult, _Mapping]]] = ..., throttle_time_ms: _Optional[int] = ...) -> None: ...

class ListOffsetsPartition(_message.Message):
    __slots__ = ("topic", "partition", "timestamp", "current_leader_epoch")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    CURRENT_LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    timestamp: int
    current_leader_epoch: int
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., timestamp: _Optional[int] = ..., current_leader_epoch: _Optional[int] = ...) -> None: ...

class ListOffsetsRequest(_message.Message):
    __slots__ = ("replica_id", "isolation_level", "partitions")
    REPLICA_ID_FIELD_NUMBER: _ClassVar[int]
    ISOLATION_LEVEL_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    replica_id: int
    isolation_level: IsolationLevel
    partitions: _containers.RepeatedCompositeFieldContainer[ListOffsetsPartition]
    def __init__(self, replica_id: _Optional[int] = ..., isolation_level: _Optional[_Union[IsolationLevel, str]] = ..., partitions: _Optional[_Iterable[_Union[ListOffsetsPartition, _Mapping]]] = ...) -> None: ...

class ListOffsetsPartitionResult(_message.Message):
    __slots__ = ("topic", "partition", "error", "offset", "timestamp", "leader_epoch")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    error: Error
    offset: int
    timestamp: int
    leader_epoch: int
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., error: _Optional[_Union[Error, _Mapping]] = ..., offset: _Optional[int] = ..., timestamp: _Optional[int] = ..., leader_epoch: _Optional[int] = ...) -> None: ...

class ListOffsetsResponse(_message.Message):
    __slots__ = ("partitions",)
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    partitions: _containers.RepeatedCompositeFieldContainer[ListOffsetsPartitionResult]
    def __init__(self, partitions: _Optional[_Iterable[_Union[ListOffsetsPartitionResult, _Mapping]]] = ...) -> None: ...

class DescribePartitionsTopic(_message.Message):
    __slots__ = ("topic", "partitions")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partitions: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, topic: _Optional[str] = ..., partitions: _Optional[_Iterable[int]] = ...) -> None: ...

class DescribePartitionsRequest(_message.Message):
    __slots__ = ("topics",)
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedCompositeFieldContainer[DescribePartitionsTopic]
    def __init__(self, topics: _Optional[_Iterable[_Union[DescribePartitionsTopic, _Mapping]]] = ...) -> None: ...

class ReplicaProgress(_message.Message):
    __slots__ = ("broker_id", "log_end_offset", "caught_up_ms_ago")
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    LOG_END_OFFSET_FIELD_NUMBER: _ClassVar[int]
    CAUGHT_UP_MS_AGO_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    log_end_offset: int
    caught_up_ms_ago: int
    def __init__(self, broker_id: _Optional[int] = ..., log_end_offset: _Optional[int] = ..., caught_up_ms_ago: _Optional[int] = ...) -> None: ...

class PartitionState(_message.Message):
    __slots__ = ("topic", "partition", "error", "leader_id", "leader_epoch", "partition_epoch", "replicas", "isr", "pending_isr", "log_start_offset", "high_watermark", "last_stable_offset", "log_end_offset", "replicas_progress", "log_size_bytes")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    PARTITION_EPOCH_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    ISR_FIELD_NUMBER: _ClassVar[int]
    PENDING_ISR_FIELD_NUMBER: _ClassVar[int]
    LOG_START_OFFSET_FIELD_NUMBER: _ClassVar[int]
    HIGH_WATERMARK_FIELD_NUMBER: _ClassVar[int]
    LAST_STABLE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LOG_END_OFFSET_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_PROGRESS_FIELD_NUMBER: _ClassVar[int]
    LOG_SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    error: Error
    leader_id: int
    leader_epoch: int
    partition_epoch: int
    replicas: _containers.RepeatedScalarFieldContainer[int]
    isr: _containers.RepeatedScalarFieldContainer[int]
    pending_isr: _containers.RepeatedScalarFieldContainer[int]
    log_start_offset: int
    high_watermark: int
    last_stable_offset: int
    log_end_offset: int
    replicas_progress: _containers.RepeatedCompositeFieldContainer[ReplicaProgress]
    log_size_bytes: int
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., error: _Optional[_Union[Error, _Mapping]] = ..., leader_id: _Optional[int] = ..., leader_epoch: _Optional[int] = ..., partition_epoch: _Optional[int] = ..., replicas: _Optional[_Iterable[int]] = ..., isr: _Optional[_Iterable[int]] = ..., pending_isr: _Optional[_Iterable[int]] = ..., log_start_offset: _Optional[int] = ..., high_watermark: _Optional[int] = ..., last_stable_offset: _Optional[int] = ..., log_end_offset: _Optional[int] = ..., replicas_progress: _Optional[_Iterable[_Union[ReplicaProgress, _Mapping]]] = ..., log_size_bytes: _Optional[int] = ...) -> None: ...

class DescribePartitionsResponse(_message.Message):
    __slots__ = ("partitions",)
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    partitions: _containers.RepeatedCompositeFieldContainer[PartitionState]
    def __init__(self, partitions: _Optional[_Iterable[_Union[PartitionState, _Mapping]]] = ...) -> None: ...

class CreateTopicRequest(_message.Message):
    __slots__ = ("name", "partitions", "replication_factor", "configs", "arrow_schema", "key_columns", "validate_only", "kind")
    class ConfigsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    REPLICATION_FACTOR_FIELD_NUMBER: _ClassVar[int]
    CONFIGS_FIELD_NUMBER: _ClassVar[int]
    ARROW_SCHEMA_FIELD_NUMBER: _ClassVar[int]
    KEY_COLUMNS_FIELD_NUMBER: _ClassVar[int]
    VALIDATE_ONLY_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    name: str
    partitions: int
    replication_factor: int
    configs: _containers.ScalarMap[str, str]
    arrow_schema: bytes
    key_columns: _containers.RepeatedScalarFieldContainer[str]
    validate_only: bool
    kind: str
    def __init__(self, name: _Optional[str] = ..., partitions: _Optional[int] = ..., replication_factor: _Optional[int] = ..., configs: _Optional[_Mapping[str, str]] = ..., arrow_schema: _Optional[bytes] = ..., key_columns: _Optional[_Iterable[str]] = ..., validate_only: _Optional[bool] = ..., kind: _Optional[str] = ...) -> None: ...

class DeleteTopicRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class DeleteTopicResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class DescribeTopicRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class TopicDescription(_message.Message):
    __slots__ = ("name", "topic_id", "kind", "partitions", "configs", "schemas", "key_columns", "replication_factor")
    class ConfigsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    CONFIGS_FIELD_NUMBER: _ClassVar[int]
    SCHEMAS_FIELD_NUMBER: _ClassVar[int]
    KEY_COLUMNS_FIELD_NUMBER: _ClassVar[int]
    REPLICATION_FACTOR_FIELD_NUMBER: _ClassVar[int]
    name: str
    topic_id: str
    kind: str
    partitions: _containers.RepeatedCompositeFieldContainer[PartitionMeta]
    configs: _containers.ScalarMap[str, str]
    schemas: _containers.RepeatedCompositeFieldContainer[SchemaVersion]
    key_columns: _containers.RepeatedScalarFieldContainer[str]
    replication_factor: int
    def __init__(self, name: _Optional[str] = ..., topic_id: _Optional[str] = ..., kind: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[PartitionMeta, _Mapping]]] = ..., configs: _Optional[_Mapping[str, str]] = ..., schemas: _Optional[_Iterable[_Union[SchemaVersion, _Mapping]]] = ..., key_columns: _Optional[_Iterable[str]] = ..., replication_factor: _Optional[int] = ...) -> None: ...

class ListTopicsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListTopicsResponse(_message.Message):
    __slots__ = ("names",)
    NAMES_FIELD_NUMBER: _ClassVar[int]
    names: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, names: _Optional[_Iterable[str]] = ...) -> None: ...

class AlterConfigsRequest(_message.Message):
    __slots__ = ("topic", "set", "delete", "validate_only")
    class SetEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    SET_FIELD_NUMBER: _ClassVar[int]
    DELETE_FIELD_NUMBER: _ClassVar[int]
    VALIDATE_ONLY_FIELD_NUMBER: _ClassVar[int]
    topic: str
    set: _containers.ScalarMap[str, str]
    delete: _containers.RepeatedScalarFieldContainer[str]
    validate_only: bool
    def __init__(self, topic: _Optional[str] = ..., set: _Optional[_Mapping[str, str]] = ..., delete: _Optional[_Iterable[str]] = ..., validate_only: _Optional[bool] = ...) -> None: ...

class RegisterSchemaRequest(_message.Message):
    __slots__ = ("topic", "arrow_schema")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    ARROW_SCHEMA_FIELD_NUMBER: _ClassVar[int]
    topic: str
    arrow_schema: bytes
    def __init__(self, topic: _Optional[str] = ..., arrow_schema: _Optional[bytes] = ...) -> None: ...

class RegisterSchemaResponse(_message.Message):
    __slots__ = ("schema_id",)
    SCHEMA_ID_FIELD_NUMBER: _ClassVar[int]
    schema_id: int
    def __init__(self, schema_id: _Optional[int] = ...) -> None: ...

class AlterPartitionReassignmentsRequest(_message.Message):
    __slots__ = ("topic", "partition", "target_replicas")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    TARGET_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    target_replicas: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., target_replicas: _Optional[_Iterable[int]] = ...) -> None: ...

class PartitionReassignment(_message.Message):
    __slots__ = ("topic", "partition", "replicas", "adding_replicas", "removing_replicas")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    ADDING_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    REMOVING_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    replicas: _containers.RepeatedScalarFieldContainer[int]
    adding_replicas: _containers.RepeatedScalarFieldContainer[int]
    removing_replicas: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., replicas: _Optional[_Iterable[int]] = ..., adding_replicas: _Optional[_Iterable[int]] = ..., removing_replicas: _Optional[_Iterable[int]] = ...) -> None: ...

class AlterPartitionReassignmentsResponse(_message.Message):
    __slots__ = ("partition",)
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    partition: PartitionReassignment
    def __init__(self, partition: _Optional[_Union[PartitionReassignment, _Mapping]] = ...) -> None: ...

class ListPartitionReassignmentsRequest(_message.Message):
    __slots__ = ("topic",)
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    topic: str
    def __init__(self, topic: _Optional[str] = ...) -> None: ...

class ListPartitionReassignmentsResponse(_message.Message):
    __slots__ = ("reassignments",)
    REASSIGNMENTS_FIELD_NUMBER: _ClassVar[int]
    reassignments: _containers.RepeatedCompositeFieldContainer[PartitionReassignment]
    def __init__(self, reassignments: _Optional[_Iterable[_Union[PartitionReassignment, _Mapping]]] = ...) -> None: ...

class TopicPartitionRef(_message.Message):
    __slots__ = ("topic", "partition")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ...) -> None: ...

class ElectLeadersRequest(_message.Message):
    __slots__ = ("partitions",)
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    partitions: _containers.RepeatedCompositeFieldContainer[TopicPartitionRef]
    def __init__(self, partitions: _Optional[_Iterable[_Union[TopicPartitionRef, _Mapping]]] = ...) -> None: ...

class ElectionResult(_message.Message):
    __slots__ = ("topic", "partition", "preferred", "leader", "reason")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    PREFERRED_FIELD_NUMBER: _ClassVar[int]
    LEADER_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    preferred: int
    leader: int
    reason: str
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., preferred: _Optional[int] = ..., leader: _Optional[int] = ..., reason: _Optional[str] = ...) -> None: ...

class ElectLeadersResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[ElectionResult]
    def __init__(self, results: _Optional[_Iterable[_Union[ElectionResult, _Mapping]]] = ...) -> None: ...
