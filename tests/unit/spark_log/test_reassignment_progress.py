"""``Admin.wait_for_reassignments``' progress never goes back, also when a look misses a
replica's log end (a new leader, e.g. the target's first replica taking over, knows no
follower's position at first) or sees a lower high watermark (the new leader's)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import pytest

from spark_log import _admin, _reassignment
from spark_log._admin import Admin
from spark_log._reassignment import PartitionReassignment


@dataclass
class _Partition:
    high_watermark: int | None
    log_end_offsets: dict[int, int]
    isr: list[int]


@dataclass
class _Topic:
    partitions: dict[int, _Partition] = field(default_factory=dict)


def _progress(looks: list[_Partition | None], monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """The progress calls for these looks at partition ("t", 0), which adds replicas 4 and 5;
    one more look after them finds the reassignment done."""
    pending = {("t", 0): PartitionReassignment("t", 0, (4, 5, 1), (4, 5), (1,))}
    admin = object.__new__(Admin)
    current: list[_Partition | None] = [None]
    monkeypatch.setattr(Admin, "describe_topic",
                        lambda self, topic: _Topic({} if current[0] is None else {0: current[0]}))

    def wait_done(call: Any, partitions: Any, timeout_s: float, *,
                  observe: Callable[[dict[Any, PartitionReassignment]], None] | None = None) -> None:
        assert observe is not None
        for look in looks:
            current[0] = look
            observe(pending)
        observe({})

    monkeypatch.setattr(_reassignment, "wait_done", wait_done)
    assert _admin._reassignment is _reassignment
    calls: list[tuple[int, int]] = []
    admin.wait_for_reassignments([("t", 0)], timeout_s=1, on_progress=lambda d, t: calls.append((d, t)))
    return calls


def test_a_look_without_a_replicas_log_end_keeps_what_it_reached(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _progress([
        _Partition(200, {1: 200, 4: 0, 5: 0}, [1]),
        _Partition(200, {1: 200, 4: 200, 5: 200}, [1, 4]),
        _Partition(200, {4: 200}, [4, 5]),  # replica 4 leads now: it knows no follower's end yet
        None,  # its leader did not answer
        _Partition(199, {4: 200, 5: 200}, [4, 5]),  # the new leader's HW lags one offset
    ], monkeypatch)
    done = [d for d, _ in calls]
    assert done == sorted(done), calls
    assert all(0 <= d <= t for d, t in calls), calls
    assert calls[1] == (401, 402) and calls[-1] == (402, 402), calls
