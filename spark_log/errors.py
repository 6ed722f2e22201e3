"""Every error spark-log raises, one tree, indexed by a wire code.

Each class has a stable ``ErrorCode`` (the integer that crosses the wire), a
``retriable`` flag (the same request may succeed later without changing it) and a
``refresh_metadata`` flag (the client should refresh its cluster metadata before
retrying).  ``for_code(code)`` maps a wire code back to its class.

    SparkLogError
    ├── InvalidRequestError            (not retriable: the request itself is wrong)
    │   ├── InvalidConfigError
    │   ├── InvalidTopicError
    │   ├── TopicAlreadyExistsError
    │   ├── InvalidPartitionsError
    │   ├── InvalidReplicationFactorError
    │   ├── RecordTooLargeError
    │   ├── SchemaMismatchError
    │   │   └── NoSchemaError          (a typed topic created without a schema, none registered yet)
    │   ├── CorruptRecordError         (bad magic, bad CRC, truncated frame)
    │   ├── OffsetOutOfRangeError
    │   ├── UnauthorizedError          (authorization: the principal may not do this)
    │   │   ├── TopicAuthorizationError / GroupAuthorizationError
    │   │   └── ClusterAuthorizationError / TransactionalIdAuthorizationError
    │   ├── SecurityDisabledError      (ACL calls on a broker without an authorizer)
    │   ├── ResourceNotFoundError      (e.g. deleting a user that does not exist)
    │   ├── DuplicateSequenceError / OutOfOrderSequenceError
    │   ├── InvalidGroupIdError, GroupIdNotFoundError, NonEmptyGroupError (consumer groups)
    │   ├── GroupSubscribedToTopicError, UnsupportedAssignorError, InvalidRegularExpressionError
    │   ├── OffsetMetadataTooLargeError, InvalidSessionTimeoutError
    │   ├── MissingKeyError            (a record without a key on a compacted topic)
    │   ├── TopicNotCompactedError     (a compaction request for a topic whose policy lacks compact)
    │   ├── InvalidOffsetMapError      (a Spark job's key -> offset map does not match the log)
    │   ├── TieringNotEnabledError     (a tiering request for a topic without remote.storage.enable)
    │   └── TierOffsetInvalidError     (a tiered offset past what may be tiered, or going back)
    ├── AuthenticationError            (not retriable: no, or wrong, credentials)
    │   └── SessionExpiredError        (retriable: authenticate again, then retry)
    ├── UnknownTopicOrPartitionError   (retriable, refresh: it may be being created)
    ├── NotLeaderError                 (retriable, refresh; carries leader_address)
    ├── NotControllerError             (retriable, refresh; carries leader_address)
    ├── NotEnoughReplicasError         (retriable; refused before the append: nothing written)
    ├── NotEnoughReplicasAfterAppendError (retriable, refresh; appended, not replicated in time: may be written)
    ├── OffsetNotAvailableError        (retriable; a new leader's high watermark has not caught up yet)
    ├── FencedLeaderEpochError         (retriable, refresh: a client request's leader epoch is older than the broker's)
    ├── UnknownLeaderEpochError        (retriable, refresh: ... newer than the broker's; its metadata is behind)
    ├── InconsistentTopicIdError       (retriable, refresh: a follower fetch names another topic id than the leader's replica)
    ├── FencedEpochError               (not retriable for the fenced party)
    │   ├── FencedMemberEpochError     (a group member's epoch is stale: it must rejoin)
    │   │   └── UnknownMemberIdError   (the group no longer knows the member: session expired, left)
    │   └── ProducerFencedError        (a newer producer with the same transactional id took over)
    │       └── TransactionTimedOutError (the coordinator aborted the open transaction after its timeout)
    ├── InvalidTxnStateError           (not retriable: e.g. commit without a transaction; a write outside one)
    ├── ConcurrentTransactionsError    (retriable: the previous transaction's markers are still being written)
    ├── InvalidTransactionTimeoutError, TransactionalIdNotFoundError (invalid requests)
    ├── ThrottledError                 (retriable)
    ├── TierUnavailableError           (retriable: the Delta tier cannot be read, or lags the brokers)
    │   └── TierStorageError           (the tier's storage (an object store, a path) failed: wrong endpoint, no bucket)
    ├── CompactionConflictError        (retriable: another clean moved the cleaned point, or one is pending)
    ├── BrokerNotAvailableError        (retriable, refresh: connection-level failure)
    ├── RequestTimeoutError            (retriable)
    ├── CoordinatorNotAvailableError   (retriable, refresh: find the group coordinator again)
    ├── NotCoordinatorError            (retriable, refresh: the coordinator moved)
    ├── CoordinatorLoadInProgressError (retriable: the new coordinator is replaying its partition)
    └── StorageError                   (not retriable: the disk said no)

``refused_before_write`` says whether a produce that failed with the error was refused
before anything was appended (a *definite* failure: the records are in no log); False
means the write may have happened (timeouts, connection loss, ``NotEnoughReplicasAfterAppend``).
The producer records per send whether any attempt may have written (``maybe_written``).

``to_status`` / ``from_rpc_error`` are the one place errors cross gRPC: the code and
message travel in trailing metadata so that clients re-raise the same typed error.
"""
from __future__ import annotations

import enum
import logging
from typing import Any, Callable, ClassVar, TypeVar

T = TypeVar("T")

__all__ = [
    "ErrorCode",
    "SparkLogError",
    "for_code",
]


class ErrorCode(enum.IntEnum):
    NONE = 0
    UNKNOWN = 1
    INVALID_REQUEST = 2
    INVALID_CONFIG = 3
    INVALID_TOPIC = 4
    TOPIC_ALREADY_EXISTS = 5
    INVALID_PARTITIONS = 6
    INVALID_REPLICATION_FACTOR = 7
    UNKNOWN_TOPIC_OR_PARTITION = 8
    NOT_LEADER = 9
    NOT_CONTROLLER = 10
    OFFSET_OUT_OF_RANGE = 11
    RECORD_TOO_LARGE = 12
    CORRUPT_RECORD = 13
    SCHEMA_MISMATCH = 14
    NOT_ENOUGH_REPLICAS = 15
    FENCED_EPOCH = 16
    UNAUTHORIZED = 17
    THROTTLED = 18
    BROKER_NOT_AVAILABLE = 19
    REQUEST_TIMEOUT = 20
    STORAGE_ERROR = 21
    DUPLICATE_SEQUENCE = 22
    OUT_OF_ORDER_SEQUENCE = 23
    INVALID_SCHEMA = 24
    NO_SCHEMA = 25
    # compaction: 30-39
    MISSING_KEY = 30
    COMPACTION_CONFLICT = 31
    INVALID_OFFSET_MAP = 32
    TOPIC_NOT_COMPACTED = 33
    # consumer groups: 40-59
    COORDINATOR_NOT_AVAILABLE = 40
    NOT_COORDINATOR = 41
    COORDINATOR_LOAD_IN_PROGRESS = 42
    FENCED_MEMBER_EPOCH = 43
    UNKNOWN_MEMBER_ID = 44
    INVALID_GROUP_ID = 45
    GROUP_ID_NOT_FOUND = 46
    NON_EMPTY_GROUP = 47
    GROUP_SUBSCRIBED_TO_TOPIC = 48
    UNSUPPORTED_ASSIGNOR = 49
    INVALID_REGULAR_EXPRESSION = 50
    OFFSET_METADATA_TOO_LARGE = 51
    INVALID_SESSION_TIMEOUT = 52
    UNSTABLE_OFFSET_COMMIT = 53
    # transactions: 60-69
    PRODUCER_FENCED = 60
    INVALID_TXN_STATE = 61
    TRANSACTION_TIMED_OUT = 62
    CONCURRENT_TRANSACTIONS = 63
    INVALID_TRANSACTION_TIMEOUT = 64
    TRANSACTIONAL_ID_NOT_FOUND = 65
    # reliability: 90-99
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = 90
    OFFSET_NOT_AVAILABLE = 91
    # security (issue 17): 100-119
    AUTHENTICATION_FAILED = 100
    TOPIC_AUTHORIZATION_FAILED = 101
    GROUP_AUTHORIZATION_FAILED = 102
    CLUSTER_AUTHORIZATION_FAILED = 103
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 104
    SECURITY_DISABLED = 105
    RESOURCE_NOT_FOUND = 106
    SESSION_EXPIRED = 107
    # tiering to Delta (issue 15): 120-129
    TIERING_NOT_ENABLED = 120
    TIER_OFFSET_INVALID = 121
    TIER_UNAVAILABLE = 122
    TIER_STORAGE = 140
    # client leader epochs (KIP-320): 145-149
    FENCED_LEADER_EPOCH = 145
    UNKNOWN_LEADER_EPOCH = 146
    # topic ids (KIP-516): 150-154 (Kafka's INCONSISTENT_TOPIC_ID is 103, our CLUSTER_AUTHORIZATION_FAILED)
    INCONSISTENT_TOPIC_ID = 150


_REGISTRY: dict[ErrorCode, type["SparkLogError"]] = {}


class SparkLogError(Exception):
    """Base of every spark-log error: a message plus a wire ``code``."""

    code: ClassVar[ErrorCode] = ErrorCode.UNKNOWN
    retriable: ClassVar[bool] = False
    refresh_metadata: ClassVar[bool] = False
    refused_before_write: ClassVar[bool] = False  # a produce failing with it appended nothing

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "code" in cls.__dict__:
            if cls.code in _REGISTRY:
                raise TypeError(f"error code {cls.code!r} registered twice")
            _REGISTRY[cls.code] = cls

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details: dict[str, Any] = dict(details)

    def __str__(self) -> str:
        return f"{self.code.name}: {self.message}"

    @property
    def maybe_written(self) -> bool:
        """For a failed send: whether the records may have been written anyway.  The
        producer sets it from every attempt of the send (``details["maybe_written"]``);
        otherwise it is what the error's class says (``refused_before_write``)."""
        value = self.details.get("maybe_written")
        if value is None:
            return not self.refused_before_write
        return value is True or value == "True"

    def __reduce__(self) -> tuple[Any, ...]:  # picklable across Spark tasks
        return (_rebuild, (type(self), self.message, self.details))


def _rebuild(cls: type[SparkLogError], message: str, details: dict[str, Any]) -> SparkLogError:
    return cls(message, **details)


_REGISTRY[ErrorCode.UNKNOWN] = SparkLogError


class InvalidRequestError(SparkLogError):
    code = ErrorCode.INVALID_REQUEST
    refused_before_write = True


class InvalidConfigError(InvalidRequestError):
    code = ErrorCode.INVALID_CONFIG


class InvalidTopicError(InvalidRequestError):
    code = ErrorCode.INVALID_TOPIC


class TopicAlreadyExistsError(InvalidRequestError):
    code = ErrorCode.TOPIC_ALREADY_EXISTS


class InvalidPartitionsError(InvalidRequestError):
    code = ErrorCode.INVALID_PARTITIONS


class InvalidReplicationFactorError(InvalidRequestError):
    code = ErrorCode.INVALID_REPLICATION_FACTOR


class RecordTooLargeError(InvalidRequestError):
    code = ErrorCode.RECORD_TOO_LARGE


class SchemaMismatchError(InvalidRequestError):
    code = ErrorCode.SCHEMA_MISMATCH


class InvalidSchemaError(InvalidRequestError):
    code = ErrorCode.INVALID_SCHEMA


class NoSchemaError(SchemaMismatchError):
    """A typed topic has no schema yet (created with ``kind="typed"`` and no schema, and
    nothing registered since): there is nothing to write rows against or to read.  Register
    one (``Admin.register_schema``) or write with the Spark sink, which registers the
    DataFrame's."""

    code = ErrorCode.NO_SCHEMA


class CorruptRecordError(InvalidRequestError):
    code = ErrorCode.CORRUPT_RECORD


class OffsetOutOfRangeError(InvalidRequestError):
    code = ErrorCode.OFFSET_OUT_OF_RANGE


class UnauthorizedError(InvalidRequestError):
    """The authenticated principal is not allowed to do this (an ACL denies it, or none
    allows it).  The subclasses name the kind of resource, as Kafka's errors do."""

    code = ErrorCode.UNAUTHORIZED


class TopicAuthorizationError(UnauthorizedError):
    code = ErrorCode.TOPIC_AUTHORIZATION_FAILED


class GroupAuthorizationError(UnauthorizedError):
    code = ErrorCode.GROUP_AUTHORIZATION_FAILED


class ClusterAuthorizationError(UnauthorizedError):
    code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED


class TransactionalIdAuthorizationError(UnauthorizedError):
    code = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


class SecurityDisabledError(InvalidRequestError):
    """An ACL request reached a broker whose authorizer is off (ACLs would do nothing)."""

    code = ErrorCode.SECURITY_DISABLED


class ResourceNotFoundError(InvalidRequestError):
    """The named resource (a SCRAM user, say) does not exist."""

    code = ErrorCode.RESOURCE_NOT_FOUND


class AuthenticationError(SparkLogError):
    """The client did not authenticate, or its credentials are wrong (unknown user, wrong
    password, a certificate the listener needs and did not get).  Messages never hold a
    secret."""

    code = ErrorCode.AUTHENTICATION_FAILED


class SessionExpiredError(AuthenticationError):
    """The SCRAM session token is unknown to this broker (it restarted) or expired: the
    client authenticates again and retries."""

    code = ErrorCode.SESSION_EXPIRED
    retriable = True


class DuplicateSequenceError(InvalidRequestError):
    code = ErrorCode.DUPLICATE_SEQUENCE


class OutOfOrderSequenceError(InvalidRequestError):
    code = ErrorCode.OUT_OF_ORDER_SEQUENCE


class MissingKeyError(InvalidRequestError):
    """A record without a key sent to a topic whose ``cleanup.policy`` names ``compact``
    (compaction keeps the latest record *per key*; Kafka refuses these too)."""

    code = ErrorCode.MISSING_KEY


class TopicNotCompactedError(InvalidRequestError):
    """A compaction request (``topics compact``, the Spark job) for a topic whose
    ``cleanup.policy`` does not name ``compact``."""

    code = ErrorCode.TOPIC_NOT_COMPACTED


class InvalidOffsetMapError(InvalidRequestError):
    """A key -> latest offset map offered by a Spark compaction job does not match the log
    it is meant for (a key missing, an offset that is not its key's latest): the broker
    refuses it and cleans with a map of its own; nothing is removed on its say."""

    code = ErrorCode.INVALID_OFFSET_MAP


class UnknownTopicOrPartitionError(SparkLogError):
    code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    retriable = True
    refresh_metadata = True
    refused_before_write = True


class NotLeaderError(SparkLogError):
    """The broker does not lead the partition; ``leader_address`` names who does (or None)."""

    code = ErrorCode.NOT_LEADER
    retriable = True
    refresh_metadata = True
    refused_before_write = True  # unless the answer carries the offsets of an append (see Producer)

    @property
    def leader_address(self) -> str | None:
        value = self.details.get("leader_address")
        return str(value) if value else None


class NotControllerError(SparkLogError):
    """The node is not the active controller; ``leader_address`` names who is (or None)."""

    code = ErrorCode.NOT_CONTROLLER
    retriable = True
    refresh_metadata = True

    @property
    def leader_address(self) -> str | None:
        value = self.details.get("leader_address")
        return str(value) if value else None


class NotEnoughReplicasError(SparkLogError):
    """acks=all refused *before* the append: the ISR is smaller than
    ``min.insync.replicas``.  Nothing was written."""

    code = ErrorCode.NOT_ENOUGH_REPLICAS
    retriable = True
    refused_before_write = True


class NotEnoughReplicasAfterAppendError(SparkLogError):
    """acks=all: the records *were appended* by the leader but the high watermark did
    not pass them within the request timeout (Kafka's NOT_ENOUGH_REPLICAS_AFTER_APPEND).
    The write may yet become visible; a retry by an idempotent producer is acknowledged
    with the original offsets if it did."""

    code = ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
    retriable = True
    refresh_metadata = True  # the leader could not replicate: it may be cut off and deposed


class OffsetNotAvailableError(SparkLogError):
    """A leader elected a moment ago cannot answer an offset query yet: its high
    watermark has not reached the start of its leader epoch, so it may be below what the
    previous leader already acknowledged (Kafka's OFFSET_NOT_AVAILABLE, KIP-207).  Ask
    again shortly."""

    code = ErrorCode.OFFSET_NOT_AVAILABLE
    retriable = True


class FencedEpochError(SparkLogError):
    code = ErrorCode.FENCED_EPOCH
    refused_before_write = True


class FencedLeaderEpochError(SparkLogError):
    """A client's request (ListOffsets, a consumer Fetch) named a leader epoch older than
    the broker's: the client's metadata is stale (Kafka's FENCED_LEADER_EPOCH, KIP-320).
    Retriable after a metadata refresh.  Not a ``FencedEpochError``: nobody is fenced for
    good, the client only has to learn the new leader epoch."""

    code = ErrorCode.FENCED_LEADER_EPOCH
    retriable = True
    refresh_metadata = True
    refused_before_write = True


class UnknownLeaderEpochError(SparkLogError):
    """A client's request named a leader epoch newer than the broker's: the broker's
    metadata is behind, or it is a deposed leader cut off from the controller (Kafka's
    UNKNOWN_LEADER_EPOCH).  Retriable; the client refreshes, preferring another broker."""

    code = ErrorCode.UNKNOWN_LEADER_EPOCH
    retriable = True
    refresh_metadata = True
    refused_before_write = True


class InconsistentTopicIdError(SparkLogError):
    """A follower fetch named a topic id other than that of the leader's replica of the
    partition: the topic was deleted and created again under the same name, and one of the two
    brokers has not applied that yet (Kafka's INCONSISTENT_TOPIC_ID, KIP-516).  Nothing is
    answered for the partition; the follower retries after its backoff, by when new metadata
    has settled which topic it is."""

    code = ErrorCode.INCONSISTENT_TOPIC_ID
    retriable = True
    refresh_metadata = True
    refused_before_write = True


class ThrottledError(SparkLogError):
    code = ErrorCode.THROTTLED
    retriable = True
    refused_before_write = True


class BrokerNotAvailableError(SparkLogError):
    code = ErrorCode.BROKER_NOT_AVAILABLE
    retriable = True
    refresh_metadata = True


class CompactionConflictError(SparkLogError):
    """A compaction request found the partition in another state than it was computed
    for: its cleaned offset moved (another clean finished) or a plan is still being
    applied.  Retriable: describe the partition again and recompute."""

    code = ErrorCode.COMPACTION_CONFLICT
    retriable = True


class RequestTimeoutError(SparkLogError):
    code = ErrorCode.REQUEST_TIMEOUT
    retriable = True


class StorageError(SparkLogError):
    code = ErrorCode.STORAGE_ERROR
    refused_before_write = True  # the log appends nothing on a failed write


# --- consumer groups (codes 40-59) ----------------------------------------------------


class CoordinatorNotAvailableError(SparkLogError):
    """No broker coordinates the group right now (the internal offsets topic is being
    created, or its partition has no leader): find the coordinator again and retry."""

    code = ErrorCode.COORDINATOR_NOT_AVAILABLE
    retriable = True
    refresh_metadata = True


class NotCoordinatorError(SparkLogError):
    """This broker does not coordinate the group (leadership of its offsets partition
    moved): find the coordinator again and retry."""

    code = ErrorCode.NOT_COORDINATOR
    retriable = True
    refresh_metadata = True


class CoordinatorLoadInProgressError(SparkLogError):
    """The coordinator is rebuilding its groups from the offsets partition it just became
    leader of: retry shortly."""

    code = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    retriable = True


class FencedMemberEpochError(FencedEpochError):
    """A group member spoke with an epoch the coordinator no longer accepts (a zombie whose
    partitions moved on): its commit is refused; it must drop its partitions and rejoin."""

    code = ErrorCode.FENCED_MEMBER_EPOCH


class UnstableOffsetCommitError(SparkLogError):
    """An open transaction holds offsets it will commit for these partitions of the group
    (``send_offsets_to_transaction``, KIP-447): a ``read_committed`` consumer waits for it to
    end instead of starting below them; retry shortly."""

    code = ErrorCode.UNSTABLE_OFFSET_COMMIT
    retriable = True


class UnknownMemberIdError(FencedMemberEpochError):
    """The group does not know the member (its session expired, it left, or the group was
    deleted): as fenced, it must rejoin."""

    code = ErrorCode.UNKNOWN_MEMBER_ID


class InvalidGroupIdError(InvalidRequestError):
    code = ErrorCode.INVALID_GROUP_ID


class GroupIdNotFoundError(InvalidRequestError):
    code = ErrorCode.GROUP_ID_NOT_FOUND


class NonEmptyGroupError(InvalidRequestError):
    """The operation needs a group without live members (delete, offset resets and
    alterations, commits without a member epoch)."""

    code = ErrorCode.NON_EMPTY_GROUP


class GroupSubscribedToTopicError(InvalidRequestError):
    """Offsets of a topic that live members subscribe to cannot be deleted."""

    code = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC


class UnsupportedAssignorError(InvalidRequestError):
    code = ErrorCode.UNSUPPORTED_ASSIGNOR


class InvalidRegularExpressionError(InvalidRequestError):
    code = ErrorCode.INVALID_REGULAR_EXPRESSION


class OffsetMetadataTooLargeError(InvalidRequestError):
    code = ErrorCode.OFFSET_METADATA_TOO_LARGE


class InvalidSessionTimeoutError(InvalidRequestError):
    code = ErrorCode.INVALID_SESSION_TIMEOUT


class ProducerFencedError(FencedEpochError):
    """Another producer initialised the same transactional id with a newer epoch: this one
    is a zombie and must stop (close it; a new one may take over)."""

    code = ErrorCode.PRODUCER_FENCED


class TransactionTimedOutError(ProducerFencedError):
    """The coordinator aborted the transaction because it stayed open past its
    ``transaction.timeout.ms``; the producer's epoch moved on: initialise again."""

    code = ErrorCode.TRANSACTION_TIMED_OUT


class InvalidTxnStateError(SparkLogError):
    """The request does not fit the transaction's state (commit without a transaction, a
    transactional write to a partition not added to it, ...)."""

    code = ErrorCode.INVALID_TXN_STATE
    refused_before_write = True


class ConcurrentTransactionsError(SparkLogError):
    """The transactional id's previous transaction is still being completed (its markers
    are being written): retry shortly."""

    code = ErrorCode.CONCURRENT_TRANSACTIONS
    retriable = True
    refused_before_write = True


class InvalidTransactionTimeoutError(InvalidRequestError):
    code = ErrorCode.INVALID_TRANSACTION_TIMEOUT


class TransactionalIdNotFoundError(InvalidRequestError):
    code = ErrorCode.TRANSACTIONAL_ID_NOT_FOUND


class TieringNotEnabledError(InvalidRequestError):
    """A tiering request (``topics tier``, the tiering job, a tiered offset) for a topic whose
    ``remote.storage.enable`` is false."""

    code = ErrorCode.TIERING_NOT_ENABLED


class TierOffsetInvalidError(InvalidRequestError):
    """A tiered offset the partition cannot take: past its last stable offset (records not
    committed yet), a tier start past the tiered end, or a tiered end going back."""

    code = ErrorCode.TIER_OFFSET_INVALID


class TierUnavailableError(SparkLogError):
    """A union read needs records from the Delta tier and cannot read them (the table is
    missing, unreadable, or older than what the brokers say it holds)."""

    code = ErrorCode.TIER_UNAVAILABLE
    retriable = True


class TierStorageError(TierUnavailableError):
    """The tier's storage itself failed (bounded by the storage timeouts and retries): an
    object store's endpoint that does not answer, a bucket that does not exist, refused
    credentials, an unwritable path.  The message names the location and the cause, never
    the credentials.  Retriable (an outage may end); a wrong setting fails every retry."""

    code = ErrorCode.TIER_STORAGE


def for_code(code: int) -> type[SparkLogError]:
    """The error class for a wire code; unknown codes map to ``SparkLogError``."""
    try:
        return _REGISTRY[ErrorCode(code)]
    except ValueError:
        return SparkLogError
    except KeyError:
        return SparkLogError


def from_code(code: int, message: str, **details: Any) -> SparkLogError:
    """Build the typed error for a wire code and message."""
    return for_code(code)(message, **details)


# --- the one crossing point with gRPC -------------------------------------------------

_CODE_KEY = "spark-log-error-code"
_DETAIL_PREFIX = "spark-log-"


def trailing_metadata(error: SparkLogError) -> tuple[tuple[str, str], ...]:
    """Trailing metadata that carries ``error`` to a client (see ``from_rpc_error``)."""
    items = [(_CODE_KEY, str(int(error.code)))]
    for key, value in sorted(error.details.items()):
        if value is not None:
            items.append((_DETAIL_PREFIX + key.replace("_", "-"), str(value)))
    return tuple(items)


def grpc_status_code(error: SparkLogError) -> Any:
    """The gRPC status code that best describes ``error`` (for logs and plain gRPC tools)."""
    import grpc

    if isinstance(error, AuthenticationError):
        return grpc.StatusCode.UNAUTHENTICATED
    if isinstance(error, UnauthorizedError):
        return grpc.StatusCode.PERMISSION_DENIED
    if isinstance(error, InvalidRequestError):
        return grpc.StatusCode.INVALID_ARGUMENT
    if isinstance(error, UnknownTopicOrPartitionError):
        return grpc.StatusCode.NOT_FOUND
    if isinstance(error, (NotLeaderError, NotControllerError, FencedEpochError, NotCoordinatorError,
                          FencedLeaderEpochError, UnknownLeaderEpochError)):
        return grpc.StatusCode.FAILED_PRECONDITION
    if isinstance(error, (BrokerNotAvailableError, NotEnoughReplicasError, NotEnoughReplicasAfterAppendError,
                          OffsetNotAvailableError, ThrottledError, CoordinatorNotAvailableError,
                          CoordinatorLoadInProgressError)):
        return grpc.StatusCode.UNAVAILABLE
    if isinstance(error, RequestTimeoutError):
        return grpc.StatusCode.DEADLINE_EXCEEDED
    return grpc.StatusCode.INTERNAL


def abort(context: Any, error: SparkLogError) -> None:
    """Abort a gRPC server call with ``error`` (raises, as ``context.abort`` does)."""
    context.set_trailing_metadata(trailing_metadata(error))
    context.abort(grpc_status_code(error), error.message)


def guard(context: Any, name: str, call: Callable[[], T],
          unexpected: Callable[[str, Exception], SparkLogError] | None = None) -> T:
    """Run one server call's ``call``: a ``SparkLogError`` aborts the call with its own code;
    any other exception is logged with its traceback and aborts it with ``unexpected(name,
    exc)`` (by default ``StorageError("<name> failed on the broker: <exc>")``), so a client
    always gets a typed error, never a traceback as UNKNOWN.  ``abort`` raises."""
    try:
        return call()
    except SparkLogError as exc:
        abort(context, exc)
        raise  # abort raises; for type checkers
    except Exception as exc:  # noqa: BLE001 - mapped to a typed error
        logging.getLogger("spark_log.rpc").exception("%s failed", name)
        abort(context, (unexpected or _failed_on_the_broker)(name, exc))
        raise


def _failed_on_the_broker(name: str, exc: Exception) -> SparkLogError:
    return StorageError(f"{name} failed on the broker: {exc}")


def from_rpc_error(exc: Any, *, address: str = "") -> SparkLogError:
    """Turn a ``grpc.RpcError`` back into the typed error the server raised; a call's error
    that is typed already (the data listener's, ``spark_log/_data_transport.py``) is
    returned as it is.

    Errors without spark-log metadata are connection-level: UNAVAILABLE and similar become
    ``BrokerNotAvailableError``, DEADLINE_EXCEEDED becomes ``RequestTimeoutError``.
    """
    if isinstance(exc, SparkLogError):
        return exc
    import grpc

    metadata = dict(exc.trailing_metadata() or ()) if hasattr(exc, "trailing_metadata") else {}
    message = exc.details() if hasattr(exc, "details") else str(exc)
    if _CODE_KEY in metadata:
        details = {
            key[len(_DETAIL_PREFIX):].replace("-", "_"): value
            for key, value in metadata.items()
            if key.startswith(_DETAIL_PREFIX) and key != _CODE_KEY
        }
        return from_code(int(metadata[_CODE_KEY]), message or "", **details)
    status = exc.code() if hasattr(exc, "code") else None
    where = f" ({address})" if address else ""
    if status == grpc.StatusCode.DEADLINE_EXCEEDED:
        return RequestTimeoutError(f"request timed out{where}")
    if status == grpc.StatusCode.UNAUTHENTICATED:
        return AuthenticationError(f"authentication failed{where}: {message}")
    if status in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED, None):
        return BrokerNotAvailableError(f"broker not available{where}: {message}")
    return SparkLogError(f"{status.name if status else 'error'}{where}: {message}")
