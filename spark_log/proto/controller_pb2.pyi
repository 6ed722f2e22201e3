from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class RegisterBrokerRequest(_message.Message):
    __slots__ = ("broker_id", "incarnation", "address", "rack")
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    INCARNATION_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    RACK_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    incarnation: str
    address: str
    rack: str
    def __init__(self, broker_id: _Optional[int] = ..., incarnation: _Optional[str] = ..., address: _Optional[str] = ..., rack: _Optional[str] = ...) -> None: ...

class RegisterBrokerResponse(_message.Message):
    __slots__ = ("broker_epoch",)
    BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    broker_epoch: int
    def __init__(self, broker_epoch: _Optional[int] = ...) -> None: ...

class BrokerHeartbeatRequest(_message.Message):
    __slots__ = ("broker_id", "broker_epoch")
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    broker_epoch: int
    def __init__(self, broker_id: _Optional[int] = ..., broker_epoch: _Optional[int] = ...) -> None: ...

class BrokerHeartbeatResponse(_message.Message):
    __slots__ = ("fenced", "broker_epoch", "metadata_offset")
    FENCED_FIELD_NUMBER: _ClassVar[int]
    BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    METADATA_OFFSET_FIELD_NUMBER: _ClassVar[int]
    fenced: bool
    broker_epoch: int
    metadata_offset: int
    def __init__(self, fenced: _Optional[bool] = ..., broker_epoch: _Optional[int] = ..., metadata_offset: _Optional[int] = ...) -> None: ...

class PartitionState(_message.Message):
    __slots__ = ("partition", "replicas", "isr", "leader", "leader_epoch", "partition_epoch", "adding_replicas", "removing_replicas")
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    ISR_FIELD_NUMBER: _ClassVar[int]
    LEADER_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    PARTITION_EPOCH_FIELD_NUMBER: _ClassVar[int]
    ADDING_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    REMOVING_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    partition: int
    replicas: _containers.RepeatedScalarFieldContainer[int]
    isr: _containers.RepeatedScalarFieldContainer[int]
    leader: int
    leader_epoch: int
    partition_epoch: int
    adding_replicas: _containers.RepeatedScalarFieldContainer[int]
    removing_replicas: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, partition: _Optional[int] = ..., replicas: _Optional[_Iterable[int]] = ..., isr: _Optional[_Iterable[int]] = ..., leader: _Optional[int] = ..., leader_epoch: _Optional[int] = ..., partition_epoch: _Optional[int] = ..., adding_replicas: _Optional[_Iterable[int]] = ..., removing_replicas: _Optional[_Iterable[int]] = ...) -> None: ...

class TopicDescription(_message.Message):
    __slots__ = ("name", "topic_id", "kind", "key_columns", "configs", "partitions", "schema_id", "schema")
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
    KEY_COLUMNS_FIELD_NUMBER: _ClassVar[int]
    CONFIGS_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_ID_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_FIELD_NUMBER: _ClassVar[int]
    name: str
    topic_id: str
    kind: str
    key_columns: _containers.RepeatedScalarFieldContainer[str]
    configs: _containers.ScalarMap[str, str]
    partitions: _containers.RepeatedCompositeFieldContainer[PartitionState]
    schema_id: int
    schema: bytes
    def __init__(self, name: _Optional[str] = ..., topic_id: _Optional[str] = ..., kind: _Optional[str] = ..., key_columns: _Optional[_Iterable[str]] = ..., configs: _Optional[_Mapping[str, str]] = ..., partitions: _Optional[_Iterable[_Union[PartitionState, _Mapping]]] = ..., schema_id: _Optional[int] = ..., schema: _Optional[bytes] = ...) -> None: ...

class CreateTopicRequest(_message.Message):
    __slots__ = ("name", "partitions", "replication_factor", "configs", "schema", "key_columns", "kind")
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
    SCHEMA_FIELD_NUMBER: _ClassVar[int]
    KEY_COLUMNS_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    name: str
    partitions: int
    replication_factor: int
    configs: _containers.ScalarMap[str, str]
    schema: bytes
    key_columns: _containers.RepeatedScalarFieldContainer[str]
    kind: str
    def __init__(self, name: _Optional[str] = ..., partitions: _Optional[int] = ..., replication_factor: _Optional[int] = ..., configs: _Optional[_Mapping[str, str]] = ..., schema: _Optional[bytes] = ..., key_columns: _Optional[_Iterable[str]] = ..., kind: _Optional[str] = ...) -> None: ...

class CreateTopicResponse(_message.Message):
    __slots__ = ("topic",)
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    topic: TopicDescription
    def __init__(self, topic: _Optional[_Union[TopicDescription, _Mapping]] = ...) -> None: ...

class DeleteTopicRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class DeleteTopicResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class BrokerDescription(_message.Message):
    __slots__ = ("broker_id", "address", "rack", "fenced", "broker_epoch", "incarnation")
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    RACK_FIELD_NUMBER: _ClassVar[int]
    FENCED_FIELD_NUMBER: _ClassVar[int]
    BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    INCARNATION_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    address: str
    rack: str
    fenced: bool
    broker_epoch: int
    incarnation: str
    def __init__(self, broker_id: _Optional[int] = ..., address: _Optional[str] = ..., rack: _Optional[str] = ..., fenced: _Optional[bool] = ..., broker_epoch: _Optional[int] = ..., incarnation: _Optional[str] = ...) -> None: ...

class DescribeClusterRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class DescribeClusterResponse(_message.Message):
    __slots__ = ("node_id", "is_active", "controller_id", "controller_address", "controller_epoch", "metadata_offset", "brokers")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    IS_ACTIVE_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_ID_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    METADATA_OFFSET_FIELD_NUMBER: _ClassVar[int]
    BROKERS_FIELD_NUMBER: _ClassVar[int]
    node_id: int
    is_active: bool
    controller_id: int
    controller_address: str
    controller_epoch: int
    metadata_offset: int
    brokers: _containers.RepeatedCompositeFieldContainer[BrokerDescription]
    def __init__(self, node_id: _Optional[int] = ..., is_active: _Optional[bool] = ..., controller_id: _Optional[int] = ..., controller_address: _Optional[str] = ..., controller_epoch: _Optional[int] = ..., metadata_offset: _Optional[int] = ..., brokers: _Optional[_Iterable[_Union[BrokerDescription, _Mapping]]] = ...) -> None: ...

class DescribeImageRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class DescribeImageResponse(_message.Message):
    __slots__ = ("node_id", "offset", "snapshot")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_FIELD_NUMBER: _ClassVar[int]
    node_id: int
    offset: int
    snapshot: bytes
    def __init__(self, node_id: _Optional[int] = ..., offset: _Optional[int] = ..., snapshot: _Optional[bytes] = ...) -> None: ...

class AlterPartitionRequest(_message.Message):
    __slots__ = ("broker_id", "broker_epoch", "topic", "partition", "leader_epoch", "partition_epoch", "new_isr")
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    PARTITION_EPOCH_FIELD_NUMBER: _ClassVar[int]
    NEW_ISR_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    broker_epoch: int
    topic: str
    partition: int
    leader_epoch: int
    partition_epoch: int
    new_isr: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, broker_id: _Optional[int] = ..., broker_epoch: _Optional[int] = ..., topic: _Optional[str] = ..., partition: _Optional[int] = ..., leader_epoch: _Optional[int] = ..., partition_epoch: _Optional[int] = ..., new_isr: _Optional[_Iterable[int]] = ...) -> None: ...

class AlterPartitionResponse(_message.Message):
    __slots__ = ("partition",)
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    partition: PartitionState
    def __init__(self, partition: _Optional[_Union[PartitionState, _Mapping]] = ...) -> None: ...

class AlterConfigsRequest(_message.Message):
    __slots__ = ("topic", "set", "delete")
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
    topic: str
    set: _containers.ScalarMap[str, str]
    delete: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, topic: _Optional[str] = ..., set: _Optional[_Mapping[str, str]] = ..., delete: _Optional[_Iterable[str]] = ...) -> None: ...

class AlterConfigsResponse(_message.Message):
    __slots__ = ("configs",)
    class ConfigsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    CONFIGS_FIELD_NUMBER: _ClassVar[int]
    configs: _containers.ScalarMap[str, str]
    def __init__(self, configs: _Optional[_Mapping[str, str]] = ...) -> None: ...

class RegisterSchemaRequest(_message.Message):
    __slots__ = ("topic", "schema")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_FIELD_NUMBER: _ClassVar[int]
    topic: str
    schema: bytes
    def __init__(self, topic: _Optional[str] = ..., schema: _Optional[bytes] = ...) -> None: ...

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

class AlterPartitionReassignmentsResponse(_message.Message):
    __slots__ = ("partition",)
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    partition: PartitionState
    def __init__(self, partition: _Optional[_Union[PartitionState, _Mapping]] = ...) -> None: ...

class PartitionRef(_message.Message):
    __slots__ = ("topic", "partition")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ...) -> None: ...

class ElectLeadersRequest(_message.Message):
    __slots__ = ("partitions",)
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    partitions: _containers.RepeatedCompositeFieldContainer[PartitionRef]
    def __init__(self, partitions: _Optional[_Iterable[_Union[PartitionRef, _Mapping]]] = ...) -> None: ...

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
