"""One history checker for logs, shared by simulated and real-process fault tests.

A history is a list of operations (``Send``, ``Poll``, ``FinalRead``) recorded by the
clients of a test, in the order the test observed their completions.  ``check(history)``
is a pure function returning the named anomalies, after Jepsen's Kafka workload:

- ``lost-write``: a send was acknowledged at (partition, offset) but the final read of
  that partition does not hold its value there.
- ``duplicate``: one value is stored at two or more offsets of a partition.
- ``inconsistent-offsets``: two observations (acks, polls, final reads) disagree on
  the value at one (partition, offset).
- ``nonmonotonic-poll``: one consumer's successive polls of a partition went backwards
  without a seek in between.
- ``poll-skip``: one consumer's successive polls of a partition jumped over offsets
  that the final read shows exist (without a seek in between).
- ``G1a``: a value from a send that definitely failed (``ok=False, definite=True``) was
  read: an aborted write became visible.
- ``unseen``: an acknowledged value that no poll and no final read ever observed.

Every anomaly carries the offending operations so a failure message can print them.
"""
from __future__ import annotations

import bisect
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Hashable, Iterable, Sequence

Partition = Hashable


@dataclass(frozen=True)
class Send:
    partition: Partition
    value: bytes
    ok: bool
    offset: int | None = None  # set when ok
    definite: bool = True  # for a failure: known not to have been written (vs. unknown/timeout)


@dataclass(frozen=True)
class Poll:
    consumer: Hashable
    partition: Partition
    records: tuple[tuple[int, bytes], ...]  # (offset, value) in the order returned
    after_seek: bool = False  # the consumer seeked (or was reassigned) before this poll


@dataclass(frozen=True)
class FinalRead:
    partition: Partition
    records: tuple[tuple[int, bytes], ...]  # the whole partition, from its start


Op = Send | Poll | FinalRead


@dataclass(frozen=True)
class Anomaly:
    kind: str
    detail: str
    ops: tuple[object, ...] = ()

    def __str__(self) -> str:
        shown = "; ".join(repr(op) for op in self.ops[:5])
        return f"{self.kind}: {self.detail}" + (f" [{shown}]" if shown else "")


@dataclass
class Anomalies:
    items: list[Anomaly] = field(default_factory=list)

    def of(self, kind: str) -> list[Anomaly]:
        return [a for a in self.items if a.kind == kind]

    def kinds(self) -> set[str]:
        return {a.kind for a in self.items}

    def __bool__(self) -> bool:
        return bool(self.items)

    def __str__(self) -> str:
        if not self.items:
            return "no anomalies"
        return f"{len(self.items)} anomalies:\n" + "\n".join(f"  {a}" for a in self.items[:50])


def check(history: Iterable[Op], *, ignore_unseen: bool = False) -> Anomalies:
    """Return every anomaly in ``history`` (empty ``Anomalies`` when it is valid)."""
    ops = list(history)
    out = Anomalies()
    sends = [op for op in ops if isinstance(op, Send)]
    polls = [op for op in ops if isinstance(op, Poll)]
    finals = {op.partition: op for op in ops if isinstance(op, FinalRead)}

    _check_inconsistent_offsets(ops, out)
    _check_duplicates(polls, finals, out)
    _check_lost_writes(sends, finals, out)
    _check_poll_order(polls, finals, out)
    _check_aborted_reads(sends, polls, finals, out)
    if not ignore_unseen:
        _check_unseen(sends, polls, finals, out)
    return out


def _observations(ops: Sequence[Op]) -> Iterable[tuple[Partition, int, bytes, Op]]:
    for op in ops:
        if isinstance(op, Send):
            if op.ok and op.offset is not None:
                yield op.partition, op.offset, op.value, op
        else:
            for offset, value in op.records:
                yield op.partition, offset, value, op


def _check_inconsistent_offsets(ops: Sequence[Op], out: Anomalies) -> None:
    seen: dict[tuple[Partition, int], tuple[bytes, Op]] = {}
    reported: set[tuple[Partition, int]] = set()
    for partition, offset, value, op in _observations(ops):
        key = (partition, offset)
        if key not in seen:
            seen[key] = (value, op)
        elif seen[key][0] != value and key not in reported:
            reported.add(key)
            out.items.append(Anomaly(
                "inconsistent-offsets",
                f"partition {partition!r} offset {offset}: {seen[key][0]!r} vs {value!r}",
                (seen[key][1], op),
            ))


def _check_duplicates(polls: Sequence[Poll], finals: dict[Partition, FinalRead], out: Anomalies) -> None:
    offsets_of: dict[tuple[Partition, bytes], set[int]] = defaultdict(set)
    where: dict[tuple[Partition, bytes], list[object]] = defaultdict(list)
    for op in [*polls, *finals.values()]:
        for offset, value in op.records:
            offsets_of[(op.partition, value)].add(offset)
            where[(op.partition, value)].append(op)
    for (partition, value), offsets in offsets_of.items():
        if len(offsets) > 1:
            out.items.append(Anomaly(
                "duplicate", f"partition {partition!r}: {value!r} at offsets {sorted(offsets)}",
                tuple(where[(partition, value)][:3]),
            ))


def _check_lost_writes(sends: Sequence[Send], finals: dict[Partition, FinalRead], out: Anomalies) -> None:
    stored = {p: dict(f.records) for p, f in finals.items()}
    for send in sends:
        if not send.ok or send.partition not in stored:
            continue
        if stored[send.partition].get(send.offset) != send.value:
            found = stored[send.partition].get(send.offset)  # type: ignore[arg-type]
            out.items.append(Anomaly(
                "lost-write",
                f"acked {send.value!r} at {send.partition!r}/{send.offset}, final read has {found!r}",
                (send,),
            ))


def _check_poll_order(polls: Sequence[Poll], finals: dict[Partition, FinalRead], out: Anomalies) -> None:
    existing = {p: sorted(o for o, _ in f.records) for p, f in finals.items()}
    last: dict[tuple[Hashable, Partition], tuple[int, Poll]] = {}
    for poll in polls:
        key = (poll.consumer, poll.partition)
        previous = None if poll.after_seek else last.get(key)
        for offset, _value in poll.records:
            if previous is not None:
                prev_offset, prev_op = previous
                if offset <= prev_offset:
                    out.items.append(Anomaly(
                        "nonmonotonic-poll",
                        f"consumer {poll.consumer!r} partition {poll.partition!r}: {prev_offset} then {offset}",
                        (prev_op, poll),
                    ))
                else:
                    stored = existing.get(poll.partition, [])
                    lo = bisect.bisect_right(stored, prev_offset)
                    hi = bisect.bisect_left(stored, offset)
                    skipped = stored[lo:min(hi, lo + 10)]
                    if skipped:
                        out.items.append(Anomaly(
                            "poll-skip",
                            f"consumer {poll.consumer!r} partition {poll.partition!r}: {prev_offset} then "
                            f"{offset}, skipping {skipped}",
                            (prev_op, poll),
                        ))
            previous = (offset, poll)
        if previous is not None:
            last[key] = previous


def _check_aborted_reads(sends: Sequence[Send], polls: Sequence[Poll], finals: dict[Partition, FinalRead], out: Anomalies) -> None:
    failed = {(s.partition, s.value): s for s in sends if not s.ok and s.definite}
    acked = {(s.partition, s.value) for s in sends if s.ok}
    for op in [*polls, *finals.values()]:
        for offset, value in op.records:
            key = (op.partition, value)
            if key in failed and key not in acked:
                out.items.append(Anomaly(
                    "G1a", f"failed write {value!r} visible at {op.partition!r}/{offset}", (failed[key], op)
                ))


def _check_unseen(sends: Sequence[Send], polls: Sequence[Poll], finals: dict[Partition, FinalRead], out: Anomalies) -> None:
    observed = {(op.partition, value) for op in [*polls, *finals.values()] for _o, value in op.records}
    for send in sends:
        if send.ok and (send.partition, send.value) not in observed:
            out.items.append(Anomaly("unseen", f"acked {send.value!r} on {send.partition!r} never read", (send,)))
