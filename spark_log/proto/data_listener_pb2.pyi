from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class DescribeDataListenerRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class DataListenerInfo(_message.Message):
    __slots__ = ("broker_id", "host", "port", "reason")
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    host: str
    port: int
    reason: str
    def __init__(self, broker_id: _Optional[int] = ..., host: _Optional[str] = ..., port: _Optional[int] = ..., reason: _Optional[str] = ...) -> None: ...
