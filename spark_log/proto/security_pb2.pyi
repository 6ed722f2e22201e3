from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ScramStartRequest(_message.Message):
    __slots__ = ("client_first",)
    CLIENT_FIRST_FIELD_NUMBER: _ClassVar[int]
    client_first: str
    def __init__(self, client_first: _Optional[str] = ...) -> None: ...

class ScramStartResponse(_message.Message):
    __slots__ = ("server_first", "exchange_id")
    SERVER_FIRST_FIELD_NUMBER: _ClassVar[int]
    EXCHANGE_ID_FIELD_NUMBER: _ClassVar[int]
    server_first: str
    exchange_id: str
    def __init__(self, server_first: _Optional[str] = ..., exchange_id: _Optional[str] = ...) -> None: ...

class ScramFinishRequest(_message.Message):
    __slots__ = ("exchange_id", "client_final")
    EXCHANGE_ID_FIELD_NUMBER: _ClassVar[int]
    CLIENT_FINAL_FIELD_NUMBER: _ClassVar[int]
    exchange_id: str
    client_final: str
    def __init__(self, exchange_id: _Optional[str] = ..., client_final: _Optional[str] = ...) -> None: ...

class ScramFinishResponse(_message.Message):
    __slots__ = ("server_final", "session_token", "lifetime_ms", "principal")
    SERVER_FINAL_FIELD_NUMBER: _ClassVar[int]
    SESSION_TOKEN_FIELD_NUMBER: _ClassVar[int]
    LIFETIME_MS_FIELD_NUMBER: _ClassVar[int]
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    server_final: str
    session_token: str
    lifetime_ms: int
    principal: str
    def __init__(self, server_final: _Optional[str] = ..., session_token: _Optional[str] = ..., lifetime_ms: _Optional[int] = ..., principal: _Optional[str] = ...) -> None: ...

class WhoAmIRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class WhoAmIResponse(_message.Message):
    __slots__ = ("principal", "host", "client_id")
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    principal: str
    host: str
    client_id: str
    def __init__(self, principal: _Optional[str] = ..., host: _Optional[str] = ..., client_id: _Optional[str] = ...) -> None: ...

class ScramCredentialUpsertion(_message.Message):
    __slots__ = ("name", "mechanism", "iterations", "salt", "stored_key", "server_key")
    NAME_FIELD_NUMBER: _ClassVar[int]
    MECHANISM_FIELD_NUMBER: _ClassVar[int]
    ITERATIONS_FIELD_NUMBER: _ClassVar[int]
    SALT_FIELD_NUMBER: _ClassVar[int]
    STORED_KEY_FIELD_NUMBER: _ClassVar[int]
    SERVER_KEY_FIELD_NUMBER: _ClassVar[int]
    name: str
    mechanism: str
    iterations: int
    salt: bytes
    stored_key: bytes
    server_key: bytes
    def __init__(self, name: _Optional[str] = ..., mechanism: _Optional[str] = ..., iterations: _Optional[int] = ..., salt: _Optional[bytes] = ..., stored_key: _Optional[bytes] = ..., server_key: _Optional[bytes] = ...) -> None: ...

class ScramCredentialDeletion(_message.Message):
    __slots__ = ("name", "mechanism")
    NAME_FIELD_NUMBER: _ClassVar[int]
    MECHANISM_FIELD_NUMBER: _ClassVar[int]
    name: str
    mechanism: str
    def __init__(self, name: _Optional[str] = ..., mechanism: _Optional[str] = ...) -> None: ...

class AlterUserScramCredentialsRequest(_message.Message):
    __slots__ = ("upsertions", "deletions")
    UPSERTIONS_FIELD_NUMBER: _ClassVar[int]
    DELETIONS_FIELD_NUMBER: _ClassVar[int]
    upsertions: _containers.RepeatedCompositeFieldContainer[ScramCredentialUpsertion]
    deletions: _containers.RepeatedCompositeFieldContainer[ScramCredentialDeletion]
    def __init__(self, upsertions: _Optional[_Iterable[_Union[ScramCredentialUpsertion, _Mapping]]] = ..., deletions: _Optional[_Iterable[_Union[ScramCredentialDeletion, _Mapping]]] = ...) -> None: ...

class AlterUserScramCredentialsResponse(_message.Message):
    __slots__ = ("metadata_offset",)
    METADATA_OFFSET_FIELD_NUMBER: _ClassVar[int]
    metadata_offset: int
    def __init__(self, metadata_offset: _Optional[int] = ...) -> None: ...

class DescribeUserScramCredentialsRequest(_message.Message):
    __slots__ = ("names",)
    NAMES_FIELD_NUMBER: _ClassVar[int]
    names: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, names: _Optional[_Iterable[str]] = ...) -> None: ...

class UserScramCredential(_message.Message):
    __slots__ = ("name", "mechanism", "iterations")
    NAME_FIELD_NUMBER: _ClassVar[int]
    MECHANISM_FIELD_NUMBER: _ClassVar[int]
    ITERATIONS_FIELD_NUMBER: _ClassVar[int]
    name: str
    mechanism: str
    iterations: int
    def __init__(self, name: _Optional[str] = ..., mechanism: _Optional[str] = ..., iterations: _Optional[int] = ...) -> None: ...

class DescribeUserScramCredentialsResponse(_message.Message):
    __slots__ = ("users",)
    USERS_FIELD_NUMBER: _ClassVar[int]
    users: _containers.RepeatedCompositeFieldContainer[UserScramCredential]
    def __init__(self, users: _Optional[_Iterable[_Union[UserScramCredential, _Mapping]]] = ...) -> None: ...

class AclBinding(_message.Message):
    __slots__ = ("resource_type", "resource_name", "pattern_type", "principal", "host", "operation", "permission")
    RESOURCE_TYPE_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_NAME_FIELD_NUMBER: _ClassVar[int]
    PATTERN_TYPE_FIELD_NUMBER: _ClassVar[int]
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    OPERATION_FIELD_NUMBER: _ClassVar[int]
    PERMISSION_FIELD_NUMBER: _ClassVar[int]
    resource_type: str
    resource_name: str
    pattern_type: str
    principal: str
    host: str
    operation: str
    permission: str
    def __init__(self, resource_type: _Optional[str] = ..., resource_name: _Optional[str] = ..., pattern_type: _Optional[str] = ..., principal: _Optional[str] = ..., host: _Optional[str] = ..., operation: _Optional[str] = ..., permission: _Optional[str] = ...) -> None: ...

class AclFilter(_message.Message):
    __slots__ = ("resource_type", "resource_name", "pattern_type", "principal", "host", "operation", "permission")
    RESOURCE_TYPE_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_NAME_FIELD_NUMBER: _ClassVar[int]
    PATTERN_TYPE_FIELD_NUMBER: _ClassVar[int]
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    OPERATION_FIELD_NUMBER: _ClassVar[int]
    PERMISSION_FIELD_NUMBER: _ClassVar[int]
    resource_type: str
    resource_name: str
    pattern_type: str
    principal: str
    host: str
    operation: str
    permission: str
    def __init__(self, resource_type: _Optional[str] = ..., resource_name: _Optional[str] = ..., pattern_type: _Optional[str] = ..., principal: _Optional[str] = ..., host: _Optional[str] = ..., operation: _Optional[str] = ..., permission: _Optional[str] = ...) -> None: ...

class CreateAclsRequest(_message.Message):
    __slots__ = ("bindings",)
    BINDINGS_FIELD_NUMBER: _ClassVar[int]
    bindings: _containers.RepeatedCompositeFieldContainer[AclBinding]
    def __init__(self, bindings: _Optional[_Iterable[_Union[AclBinding, _Mapping]]] = ...) -> None: ...

class CreateAclsResponse(_message.Message):
    __slots__ = ("metadata_offset",)
    METADATA_OFFSET_FIELD_NUMBER: _ClassVar[int]
    metadata_offset: int
    def __init__(self, metadata_offset: _Optional[int] = ...) -> None: ...

class DescribeAclsRequest(_message.Message):
    __slots__ = ("filter",)
    FILTER_FIELD_NUMBER: _ClassVar[int]
    filter: AclFilter
    def __init__(self, filter: _Optional[_Union[AclFilter, _Mapping]] = ...) -> None: ...

class DescribeAclsResponse(_message.Message):
    __slots__ = ("bindings",)
    BINDINGS_FIELD_NUMBER: _ClassVar[int]
    bindings: _containers.RepeatedCompositeFieldContainer[AclBinding]
    def __init__(self, bindings: _Optional[_Iterable[_Union[AclBinding, _Mapping]]] = ...) -> None: ...

class DeleteAclsRequest(_message.Message):
    __slots__ = ("filters",)
    FILTERS_FIELD_NUMBER: _ClassVar[int]
    filters: _containers.RepeatedCompositeFieldContainer[AclFilter]
    def __init__(self, filters: _Optional[_Iterable[_Union[AclFilter, _Mapping]]] = ...) -> None: ...

class DeleteAclsResult(_message.Message):
    __slots__ = ("deleted",)
    DELETED_FIELD_NUMBER: _ClassVar[int]
    deleted: _containers.RepeatedCompositeFieldContainer[AclBinding]
    def __init__(self, deleted: _Optional[_Iterable[_Union[AclBinding, _Mapping]]] = ...) -> None: ...

class DeleteAclsResponse(_message.Message):
    __slots__ = ("results", "metadata_offset")
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    METADATA_OFFSET_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[DeleteAclsResult]
    metadata_offset: int
    def __init__(self, results: _Optional[_Iterable[_Union[DeleteAclsResult, _Mapping]]] = ..., metadata_offset: _Optional[int] = ...) -> None: ...

class QuotaEntity(_message.Message):
    __slots__ = ("user", "client_id")
    USER_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    user: str
    client_id: str
    def __init__(self, user: _Optional[str] = ..., client_id: _Optional[str] = ...) -> None: ...

class QuotaOp(_message.Message):
    __slots__ = ("key", "value", "remove")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    REMOVE_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: float
    remove: bool
    def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ..., remove: _Optional[bool] = ...) -> None: ...

class AlterClientQuotasRequest(_message.Message):
    __slots__ = ("entity", "ops")
    ENTITY_FIELD_NUMBER: _ClassVar[int]
    OPS_FIELD_NUMBER: _ClassVar[int]
    entity: QuotaEntity
    ops: _containers.RepeatedCompositeFieldContainer[QuotaOp]
    def __init__(self, entity: _Optional[_Union[QuotaEntity, _Mapping]] = ..., ops: _Optional[_Iterable[_Union[QuotaOp, _Mapping]]] = ...) -> None: ...

class AlterClientQuotasResponse(_message.Message):
    __slots__ = ("metadata_offset",)
    METADATA_OFFSET_FIELD_NUMBER: _ClassVar[int]
    metadata_offset: int
    def __init__(self, metadata_offset: _Optional[int] = ...) -> None: ...

class DescribeClientQuotasRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ClientQuota(_message.Message):
    __slots__ = ("entity", "values")
    class ValuesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    ENTITY_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    entity: QuotaEntity
    values: _containers.ScalarMap[str, float]
    def __init__(self, entity: _Optional[_Union[QuotaEntity, _Mapping]] = ..., values: _Optional[_Mapping[str, float]] = ...) -> None: ...

class DescribeClientQuotasResponse(_message.Message):
    __slots__ = ("quotas",)
    QUOTAS_FIELD_NUMBER: _ClassVar[int]
    quotas: _containers.RepeatedCompositeFieldContainer[ClientQuota]
    def __init__(self, quotas: _Optional[_Iterable[_Union[ClientQuota, _Mapping]]] = ...) -> None: ...
