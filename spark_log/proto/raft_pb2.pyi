from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class SnapshotId(_message.Message):
    __slots__ = ("end_offset", "epoch")
    END_OFFSET_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    end_offset: int
    epoch: int
    def __init__(self, end_offset: _Optional[int] = ..., epoch: _Optional[int] = ...) -> None: ...

class VoteRequest(_message.Message):
    __slots__ = ("epoch", "last_epoch", "end_offset", "pre_vote")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    LAST_EPOCH_FIELD_NUMBER: _ClassVar[int]
    END_OFFSET_FIELD_NUMBER: _ClassVar[int]
    PRE_VOTE_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    last_epoch: int
    end_offset: int
    pre_vote: bool
    def __init__(self, epoch: _Optional[int] = ..., last_epoch: _Optional[int] = ..., end_offset: _Optional[int] = ..., pre_vote: _Optional[bool] = ...) -> None: ...

class VoteResponse(_message.Message):
    __slots__ = ("epoch", "granted", "pre_vote", "leader_id")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    GRANTED_FIELD_NUMBER: _ClassVar[int]
    PRE_VOTE_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    granted: bool
    pre_vote: bool
    leader_id: int
    def __init__(self, epoch: _Optional[int] = ..., granted: _Optional[bool] = ..., pre_vote: _Optional[bool] = ..., leader_id: _Optional[int] = ...) -> None: ...

class BeginQuorumEpoch(_message.Message):
    __slots__ = ("epoch", "leader_id")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    leader_id: int
    def __init__(self, epoch: _Optional[int] = ..., leader_id: _Optional[int] = ...) -> None: ...

class BeginQuorumEpochResponse(_message.Message):
    __slots__ = ("epoch", "leader_id")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    leader_id: int
    def __init__(self, epoch: _Optional[int] = ..., leader_id: _Optional[int] = ...) -> None: ...

class FetchRequest(_message.Message):
    __slots__ = ("epoch", "fetch_offset", "last_fetched_epoch")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    FETCH_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LAST_FETCHED_EPOCH_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    fetch_offset: int
    last_fetched_epoch: int
    def __init__(self, epoch: _Optional[int] = ..., fetch_offset: _Optional[int] = ..., last_fetched_epoch: _Optional[int] = ...) -> None: ...

class FetchResponse(_message.Message):
    __slots__ = ("epoch", "leader_id", "fetch_offset", "last_fetched_epoch", "records", "high_watermark", "diverging", "snapshot_id", "not_leader")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    FETCH_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LAST_FETCHED_EPOCH_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    HIGH_WATERMARK_FIELD_NUMBER: _ClassVar[int]
    DIVERGING_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_ID_FIELD_NUMBER: _ClassVar[int]
    NOT_LEADER_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    leader_id: int
    fetch_offset: int
    last_fetched_epoch: int
    records: bytes
    high_watermark: int
    diverging: SnapshotId
    snapshot_id: SnapshotId
    not_leader: bool
    def __init__(self, epoch: _Optional[int] = ..., leader_id: _Optional[int] = ..., fetch_offset: _Optional[int] = ..., last_fetched_epoch: _Optional[int] = ..., records: _Optional[bytes] = ..., high_watermark: _Optional[int] = ..., diverging: _Optional[_Union[SnapshotId, _Mapping]] = ..., snapshot_id: _Optional[_Union[SnapshotId, _Mapping]] = ..., not_leader: _Optional[bool] = ...) -> None: ...

class FetchSnapshotRequest(_message.Message):
    __slots__ = ("epoch", "snapshot_id")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_ID_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    snapshot_id: SnapshotId
    def __init__(self, epoch: _Optional[int] = ..., snapshot_id: _Optional[_Union[SnapshotId, _Mapping]] = ...) -> None: ...

class FetchSnapshotResponse(_message.Message):
    __slots__ = ("epoch", "leader_id", "snapshot_id", "data")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_ID_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    leader_id: int
    snapshot_id: SnapshotId
    data: bytes
    def __init__(self, epoch: _Optional[int] = ..., leader_id: _Optional[int] = ..., snapshot_id: _Optional[_Union[SnapshotId, _Mapping]] = ..., data: _Optional[bytes] = ...) -> None: ...

class RaftMessage(_message.Message):
    __slots__ = ("src", "dst", "vote_request", "vote_response", "begin_quorum_epoch", "fetch_request", "fetch_response", "fetch_snapshot_request", "fetch_snapshot_response", "begin_quorum_epoch_response")
    SRC_FIELD_NUMBER: _ClassVar[int]
    DST_FIELD_NUMBER: _ClassVar[int]
    VOTE_REQUEST_FIELD_NUMBER: _ClassVar[int]
    VOTE_RESPONSE_FIELD_NUMBER: _ClassVar[int]
    BEGIN_QUORUM_EPOCH_FIELD_NUMBER: _ClassVar[int]
    FETCH_REQUEST_FIELD_NUMBER: _ClassVar[int]
    FETCH_RESPONSE_FIELD_NUMBER: _ClassVar[int]
    FETCH_SNAPSHOT_REQUEST_FIELD_NUMBER: _ClassVar[int]
    FETCH_SNAPSHOT_RESPONSE_FIELD_NUMBER: _ClassVar[int]
    BEGIN_QUORUM_EPOCH_RESPONSE_FIELD_NUMBER: _ClassVar[int]
    src: int
    dst: int
    vote_request: VoteRequest
    vote_response: VoteResponse
    begin_quorum_epoch: BeginQuorumEpoch
    fetch_request: FetchRequest
    fetch_response: FetchResponse
    fetch_snapshot_request: FetchSnapshotRequest
    fetch_snapshot_response: FetchSnapshotResponse
    begin_quorum_epoch_response: BeginQuorumEpochResponse
    def __init__(self, src: _Optional[int] = ..., dst: _Optional[int] = ..., vote_request: _Optional[_Union[VoteRequest, _Mapping]] = ..., vote_response: _Optional[_Union[VoteResponse, _Mapping]] = ..., begin_quorum_epoch: _Optional[_Union[BeginQuorumEpoch, _Mapping]] = ..., fetch_request: _Optional[_Union[FetchRequest, _Mapping]] = ..., fetch_response: _Optional[_Union[FetchResponse, _Mapping]] = ..., fetch_snapshot_request: _Optional[_Union[FetchSnapshotRequest, _Mapping]] = ..., fetch_snapshot_response: _Optional[_Union[FetchSnapshotResponse, _Mapping]] = ..., begin_quorum_epoch_response: _Optional[_Union[BeginQuorumEpochResponse, _Mapping]] = ...) -> None: ...

class RaftReply(_message.Message):
    __slots__ = ("messages",)
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[RaftMessage]
    def __init__(self, messages: _Optional[_Iterable[_Union[RaftMessage, _Mapping]]] = ...) -> None: ...
