from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class TopicPartition(_message.Message):
    __slots__ = ("topic", "partition")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ...) -> None: ...

class FindTxnCoordinatorRequest(_message.Message):
    __slots__ = ("transactional_id",)
    TRANSACTIONAL_ID_FIELD_NUMBER: _ClassVar[int]
    transactional_id: str
    def __init__(self, transactional_id: _Optional[str] = ...) -> None: ...

class FindTxnCoordinatorResponse(_message.Message):
    __slots__ = ("broker_id", "address", "partition")
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    address: str
    partition: int
    def __init__(self, broker_id: _Optional[int] = ..., address: _Optional[str] = ..., partition: _Optional[int] = ...) -> None: ...

class InitProducerIdRequest(_message.Message):
    __slots__ = ("transactional_id", "transaction_timeout_ms")
    TRANSACTIONAL_ID_FIELD_NUMBER: _ClassVar[int]
    TRANSACTION_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    transactional_id: str
    transaction_timeout_ms: int
    def __init__(self, transactional_id: _Optional[str] = ..., transaction_timeout_ms: _Optional[int] = ...) -> None: ...

class InitProducerIdResponse(_message.Message):
    __slots__ = ("producer_id", "producer_epoch", "committed_label")
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_LABEL_FIELD_NUMBER: _ClassVar[int]
    producer_id: int
    producer_epoch: int
    committed_label: int
    def __init__(self, producer_id: _Optional[int] = ..., producer_epoch: _Optional[int] = ..., committed_label: _Optional[int] = ...) -> None: ...

class AddPartitionsRequest(_message.Message):
    __slots__ = ("transactional_id", "producer_id", "producer_epoch", "partitions", "verify_only")
    TRANSACTIONAL_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    VERIFY_ONLY_FIELD_NUMBER: _ClassVar[int]
    transactional_id: str
    producer_id: int
    producer_epoch: int
    partitions: _containers.RepeatedCompositeFieldContainer[TopicPartition]
    verify_only: bool
    def __init__(self, transactional_id: _Optional[str] = ..., producer_id: _Optional[int] = ..., producer_epoch: _Optional[int] = ..., partitions: _Optional[_Iterable[_Union[TopicPartition, _Mapping]]] = ..., verify_only: _Optional[bool] = ...) -> None: ...

class AddPartitionsResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class JoinTxnRequest(_message.Message):
    __slots__ = ("transactional_id", "label", "run", "transaction_timeout_ms")
    TRANSACTIONAL_ID_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    RUN_FIELD_NUMBER: _ClassVar[int]
    TRANSACTION_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    transactional_id: str
    label: int
    run: str
    transaction_timeout_ms: int
    def __init__(self, transactional_id: _Optional[str] = ..., label: _Optional[int] = ..., run: _Optional[str] = ..., transaction_timeout_ms: _Optional[int] = ...) -> None: ...

class JoinTxnResponse(_message.Message):
    __slots__ = ("producer_id", "producer_epoch", "already_committed")
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    ALREADY_COMMITTED_FIELD_NUMBER: _ClassVar[int]
    producer_id: int
    producer_epoch: int
    already_committed: bool
    def __init__(self, producer_id: _Optional[int] = ..., producer_epoch: _Optional[int] = ..., already_committed: _Optional[bool] = ...) -> None: ...

class GroupOffset(_message.Message):
    __slots__ = ("topic", "partition", "offset", "metadata")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    offset: int
    metadata: str
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., offset: _Optional[int] = ..., metadata: _Optional[str] = ...) -> None: ...

class AddOffsetsRequest(_message.Message):
    __slots__ = ("transactional_id", "producer_id", "producer_epoch", "group_id", "offsets", "member_id", "member_epoch")
    TRANSACTIONAL_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    OFFSETS_FIELD_NUMBER: _ClassVar[int]
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    transactional_id: str
    producer_id: int
    producer_epoch: int
    group_id: str
    offsets: _containers.RepeatedCompositeFieldContainer[GroupOffset]
    member_id: str
    member_epoch: int
    def __init__(self, transactional_id: _Optional[str] = ..., producer_id: _Optional[int] = ..., producer_epoch: _Optional[int] = ..., group_id: _Optional[str] = ..., offsets: _Optional[_Iterable[_Union[GroupOffset, _Mapping]]] = ..., member_id: _Optional[str] = ..., member_epoch: _Optional[int] = ...) -> None: ...

class AddOffsetsResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class EndTxnRequest(_message.Message):
    __slots__ = ("transactional_id", "producer_id", "producer_epoch", "commit", "label", "participants", "run")
    TRANSACTIONAL_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    COMMIT_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    PARTICIPANTS_FIELD_NUMBER: _ClassVar[int]
    RUN_FIELD_NUMBER: _ClassVar[int]
    transactional_id: str
    producer_id: int
    producer_epoch: int
    commit: bool
    label: int
    participants: _containers.RepeatedScalarFieldContainer[int]
    run: str
    def __init__(self, transactional_id: _Optional[str] = ..., producer_id: _Optional[int] = ..., producer_epoch: _Optional[int] = ..., commit: _Optional[bool] = ..., label: _Optional[int] = ..., participants: _Optional[_Iterable[int]] = ..., run: _Optional[str] = ...) -> None: ...

class EndTxnResponse(_message.Message):
    __slots__ = ("producer_epoch", "producer_id")
    PRODUCER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    producer_epoch: int
    producer_id: int
    def __init__(self, producer_epoch: _Optional[int] = ..., producer_id: _Optional[int] = ...) -> None: ...

class DescribeTxnRequest(_message.Message):
    __slots__ = ("transactional_id",)
    TRANSACTIONAL_ID_FIELD_NUMBER: _ClassVar[int]
    transactional_id: str
    def __init__(self, transactional_id: _Optional[str] = ...) -> None: ...

class Participant(_message.Message):
    __slots__ = ("producer_id", "producer_epoch", "partitions")
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    producer_id: int
    producer_epoch: int
    partitions: _containers.RepeatedCompositeFieldContainer[TopicPartition]
    def __init__(self, producer_id: _Optional[int] = ..., producer_epoch: _Optional[int] = ..., partitions: _Optional[_Iterable[_Union[TopicPartition, _Mapping]]] = ...) -> None: ...

class DescribeTxnResponse(_message.Message):
    __slots__ = ("transactional_id", "producer_id", "producer_epoch", "state", "label", "committed_label", "timeout_ms", "participants", "coordinator_id")
    TRANSACTIONAL_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_LABEL_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    PARTICIPANTS_FIELD_NUMBER: _ClassVar[int]
    COORDINATOR_ID_FIELD_NUMBER: _ClassVar[int]
    transactional_id: str
    producer_id: int
    producer_epoch: int
    state: str
    label: int
    committed_label: int
    timeout_ms: int
    participants: _containers.RepeatedCompositeFieldContainer[Participant]
    coordinator_id: int
    def __init__(self, transactional_id: _Optional[str] = ..., producer_id: _Optional[int] = ..., producer_epoch: _Optional[int] = ..., state: _Optional[str] = ..., label: _Optional[int] = ..., committed_label: _Optional[int] = ..., timeout_ms: _Optional[int] = ..., participants: _Optional[_Iterable[_Union[Participant, _Mapping]]] = ..., coordinator_id: _Optional[int] = ...) -> None: ...

class WriteTxnMarkersRequest(_message.Message):
    __slots__ = ("producer_id", "producer_epoch", "commit", "coordinator_epoch", "partitions", "timeout_ms")
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    COMMIT_FIELD_NUMBER: _ClassVar[int]
    COORDINATOR_EPOCH_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int
    partitions: _containers.RepeatedCompositeFieldContainer[TopicPartition]
    timeout_ms: int
    def __init__(self, producer_id: _Optional[int] = ..., producer_epoch: _Optional[int] = ..., commit: _Optional[bool] = ..., coordinator_epoch: _Optional[int] = ..., partitions: _Optional[_Iterable[_Union[TopicPartition, _Mapping]]] = ..., timeout_ms: _Optional[int] = ...) -> None: ...

class MarkerResult(_message.Message):
    __slots__ = ("topic", "partition", "error_code", "error_message")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    error_code: int
    error_message: str
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., error_code: _Optional[int] = ..., error_message: _Optional[str] = ...) -> None: ...

class WriteTxnMarkersResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[MarkerResult]
    def __init__(self, results: _Optional[_Iterable[_Union[MarkerResult, _Mapping]]] = ...) -> None: ...
