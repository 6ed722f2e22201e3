"""The errors module: codes are unique, round-trip, and cross gRPC typed."""
from __future__ import annotations

import pickle

import grpc
import pytest

from spark_log import errors
from spark_log.errors import ErrorCode


def _all_error_classes() -> list[type[errors.SparkLogError]]:
    found = []
    stack = [errors.SparkLogError]
    while stack:
        cls = stack.pop()
        found.append(cls)
        stack.extend(cls.__subclasses__())
    return found


def test_every_code_except_none_has_exactly_one_class() -> None:
    classes = _all_error_classes()
    codes = [cls.code for cls in classes]
    assert len(codes) == len(set(codes))
    assert set(codes) == set(ErrorCode) - {ErrorCode.NONE}


@pytest.mark.parametrize("cls", _all_error_classes(), ids=lambda c: c.__name__)
def test_for_code_maps_back(cls: type[errors.SparkLogError]) -> None:
    assert errors.for_code(int(cls.code)) is cls


def test_unknown_codes_map_to_the_base_class() -> None:
    assert errors.for_code(9999) is errors.SparkLogError


def test_retriable_flags_follow_kafka() -> None:
    assert errors.NotLeaderError.retriable and errors.NotLeaderError.refresh_metadata
    assert errors.NotEnoughReplicasError.retriable
    assert not errors.RecordTooLargeError.retriable
    assert not errors.CorruptRecordError.retriable
    assert not errors.FencedEpochError.retriable


def test_errors_pickle_with_details() -> None:
    err = errors.NotLeaderError("not the leader", leader_address="127.0.0.1:9000")
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is errors.NotLeaderError
    assert back.leader_address == "127.0.0.1:9000"
    assert str(back) == "NOT_LEADER: not the leader"


class _FakeRpcError(grpc.RpcError):
    def __init__(self, status: grpc.StatusCode, details: str, metadata: tuple[tuple[str, str], ...] = ()) -> None:
        self._status, self._details, self._metadata = status, details, metadata

    def code(self) -> grpc.StatusCode:
        return self._status

    def details(self) -> str:
        return self._details

    def trailing_metadata(self) -> tuple[tuple[str, str], ...]:
        return self._metadata


def test_typed_errors_cross_grpc_metadata() -> None:
    err = errors.NotLeaderError("moved", leader_address="127.0.0.1:1234")
    rpc = _FakeRpcError(errors.grpc_status_code(err), err.message, errors.trailing_metadata(err))
    back = errors.from_rpc_error(rpc)
    assert isinstance(back, errors.NotLeaderError)
    assert back.leader_address == "127.0.0.1:1234"
    assert back.message == "moved"


def test_connection_failures_become_broker_not_available() -> None:
    back = errors.from_rpc_error(_FakeRpcError(grpc.StatusCode.UNAVAILABLE, "connection refused"), address="h:1")
    assert isinstance(back, errors.BrokerNotAvailableError) and back.retriable
    timeout = errors.from_rpc_error(_FakeRpcError(grpc.StatusCode.DEADLINE_EXCEEDED, "late"))
    assert isinstance(timeout, errors.RequestTimeoutError)


def test_abort_sets_metadata_then_aborts() -> None:
    calls: list[tuple[str, object]] = []

    class Context:
        def set_trailing_metadata(self, md: object) -> None:
            calls.append(("md", md))

        def abort(self, code: object, details: str) -> None:
            calls.append(("abort", code))
            raise RuntimeError(details)

    with pytest.raises(RuntimeError, match="too big"):
        errors.abort(Context(), errors.RecordTooLargeError("too big"))
    assert calls[0][0] == "md" and calls[1] == ("abort", grpc.StatusCode.INVALID_ARGUMENT)


class _AbortingContext:
    def __init__(self) -> None:
        self.aborted: list[tuple[object, str, dict[str, str]]] = []
        self._metadata: dict[str, str] = {}

    def set_trailing_metadata(self, md: object) -> None:
        self._metadata = dict(md)  # type: ignore[call-overload]

    def abort(self, code: object, details: str) -> None:
        self.aborted.append((code, details, self._metadata))
        raise RuntimeError(details)


def test_guard_answers_a_typed_error_with_its_code_and_anything_else_as_a_typed_error(
        caplog: pytest.LogCaptureFixture) -> None:
    context = _AbortingContext()
    assert errors.guard(context, "Fine", lambda: 7) == 7 and not context.aborted

    def refuse() -> int:
        raise errors.InvalidConfigError("no such setting")

    with pytest.raises(RuntimeError, match="no such setting"):
        errors.guard(context, "Refuse", refuse)
    code, _, metadata = context.aborted[-1]
    assert code == grpc.StatusCode.INVALID_ARGUMENT and str(int(errors.ErrorCode.INVALID_CONFIG)) in metadata.values()

    def crash() -> int:
        raise KeyError("boom")

    with caplog.at_level("ERROR"), pytest.raises(RuntimeError, match="Crash failed on the broker: 'boom'"):
        errors.guard(context, "Crash", crash)
    assert str(int(errors.ErrorCode.STORAGE_ERROR)) in context.aborted[-1][2].values()
    assert "Crash failed" in caplog.text and "KeyError" in caplog.text  # logged with its traceback
    with pytest.raises(RuntimeError, match="^Crash: KeyError$"):
        errors.guard(context, "Crash", crash, lambda what, exc: errors.SparkLogError(f"{what}: {type(exc).__name__}"))


def test_not_enough_replicas_says_whether_the_write_may_have_happened() -> None:
    """Kafka's split: NOT_ENOUGH_REPLICAS refuses before the append (nothing written),
    NOT_ENOUGH_REPLICAS_AFTER_APPEND after it (the write may yet become visible)."""
    before = errors.NotEnoughReplicasError("isr too small")
    after = errors.NotEnoughReplicasAfterAppendError("appended, not replicated in time")
    assert before.retriable and after.retriable
    assert not isinstance(after, errors.NotEnoughReplicasError)   # a handler of "refused" must not catch it
    assert (before.maybe_written, after.maybe_written) == (False, True)
    assert errors.RequestTimeoutError("t").maybe_written and errors.BrokerNotAvailableError("b").maybe_written
    assert not errors.OffsetNotAvailableError("new leader").refused_before_write
    # the producer's verdict over every attempt overrides the class's
    assert errors.NotEnoughReplicasError("refused last", maybe_written=True).maybe_written
    assert not errors.RequestTimeoutError("t", maybe_written=False).maybe_written
    assert int(errors.ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND) in range(90, 100)
