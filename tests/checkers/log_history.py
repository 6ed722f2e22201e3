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
- ``G1a``: a value from a send that definitely failed (``ok=False, definite=True``: every
  attempt was refused before the append, ``SparkLogError.maybe_written`` False) was read:
  a write the client was told never happened became visible.  A failed send whose
  partition is unknown (``partition=None``) is looked for in every partition.
- ``unseen``: an acknowledged value that no poll and no final read ever observed.
- ``send-order``: one producer's acknowledged sends to one partition (``producer`` set,
  ``index`` its send order) are not at increasing offsets in send order, in their
  acknowledgements or in the final read.  An idempotent producer keeps its order per
  partition whatever the retries.  A send that *failed* carries no order promise: one that
  may have been written (a request the client gave up on can still be appended later)
  may appear anywhere after it.
- ``no-final-read``: a partition that a send was acknowledged on, or a poll read, has no
  ``FinalRead``: nothing could be checked there, which is an error, never a pass.
- ``truncated-read``: a poll returned a record at an offset the final read does not hold
  (the log was cut below it and nothing was written there again): a consumer saw a record
  that does not exist.  (A different value at that offset is ``inconsistent-offsets``.)

Transactions (``check_transactions``, after Jepsen's analyses of Kafka's transactions): a
``Txn`` is one transaction's writes (partition, value) and its outcome as the client knows
it (``committed``: commit returned; ``aborted``: abort returned, or it never reached its
commit and a newer producer of its id took over; ``unknown``: commit was called and did not
answer); ``commit_called`` is when commit was called (monotonic seconds, or None).  Reads
are ``Poll``s of ``read_committed`` consumers (``at``: when the poll returned) and a
``FinalRead`` of each partition under ``read_committed``:

- ``aborted-read``: a value of an aborted transaction was read;
- ``dirty-read``: a poll that returned before its transaction's commit was called held one
  of its values (a read of an open transaction);
- ``lost-committed-write``: a committed transaction's value is not in the final read;
- ``partial-transaction``: the final read holds some but not all of a transaction's values
  (committed or unknown: all or nothing);
- ``duplicate``: one value at two offsets (as above).

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
    partition: Partition | None  # None: a failed send whose partition the client never learned
    value: bytes
    ok: bool
    offset: int | None = None  # set when ok
    definite: bool = True  # for a failure: known not to have been written (vs. unknown/timeout)
    producer: Hashable | None = None  # with ``index``: the send-order check applies
    index: int | None = None  # the send's position in its producer's send order


@dataclass(frozen=True)
class Poll:
    consumer: Hashable
    partition: Partition
    records: tuple[tuple[int, bytes], ...]  # (offset, value) in the order returned
    after_seek: bool = False  # the consumer seeked (or was reassigned) before this poll
    at: float | None = None  # when the poll returned (monotonic seconds): transactions' dirty reads


@dataclass(frozen=True)
class FinalRead:
    partition: Partition
    records: tuple[tuple[int, bytes], ...]  # the whole partition, from its start


@dataclass(frozen=True)
class Txn:
    txn: Hashable
    writes: tuple[tuple[Partition, bytes], ...]
    outcome: str  # "committed" | "aborted" | "unknown"
    commit_called: float | None = None


Op = Send | Poll | FinalRead | Txn


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

    _check_final_reads(sends, polls, finals, out)
    _check_inconsistent_offsets(ops, out)
    _check_duplicates(polls, finals, out)
    _check_lost_writes(sends, finals, out)
    _check_poll_order(polls, finals, out)
    _check_truncated_reads(polls, finals, out)
    _check_aborted_reads(sends, polls, finals, out)
    _check_send_order(sends, finals, out)
    if not ignore_unseen:
        _check_unseen(sends, polls, finals, out)
    return out


def _check_final_reads(sends: Sequence[Send], polls: Sequence[Poll], finals: dict[Partition, FinalRead],
                       out: Anomalies) -> None:
    wanted: dict[Partition, object] = {}
    for send in sends:
        if send.ok and send.partition is not None:
            wanted.setdefault(send.partition, send)
    for poll in polls:
        if poll.records:
            wanted.setdefault(poll.partition, poll)
    for partition, op in wanted.items():
        if partition not in finals:
            out.items.append(Anomaly("no-final-read", f"partition {partition!r} was written or read but has no "
                                     "final read: nothing there was checked", (op,)))


def _check_truncated_reads(polls: Sequence[Poll], finals: dict[Partition, FinalRead], out: Anomalies) -> None:
    stored = {p: {o for o, _ in f.records} for p, f in finals.items()}
    for poll in polls:
        held = stored.get(poll.partition)
        if held is None:
            continue
        gone = [o for o, _ in poll.records if o not in held]
        if gone:
            out.items.append(Anomaly(
                "truncated-read", f"consumer {poll.consumer!r} read {poll.partition!r} offsets {gone[:10]} that the "
                "final read does not hold (truncated after it was read)", (poll,)))


def _check_send_order(sends: Sequence[Send], finals: dict[Partition, FinalRead], out: Anomalies) -> None:
    by_producer: dict[tuple[Hashable, Partition], list[Send]] = defaultdict(list)
    for send in sends:
        if send.producer is not None and send.index is not None:
            by_producer[(send.producer, send.partition)].append(send)
    placed: dict[Partition, dict[bytes, int]] = {p: {v: o for o, v in f.records} for p, f in finals.items()}
    for (producer, partition), group in by_producer.items():
        group.sort(key=lambda s: s.index)  # type: ignore[arg-type, return-value]
        last: Send | None = None
        for send in group:
            if not send.ok or send.offset is None:
                continue
            if last is not None and send.offset <= last.offset:  # type: ignore[operator]
                out.items.append(Anomaly(
                    "send-order", f"producer {producer!r} partition {partition!r}: send #{send.index} acknowledged at "
                    f"{send.offset}, after send #{last.index} at {last.offset}", (last, send)))
            last = send
        where = placed.get(partition, {})
        previous: tuple[Send, int] | None = None
        for send in group:
            if not send.ok:
                continue
            offset = where.get(send.value)
            if offset is None:
                continue
            if previous is not None and offset <= previous[1]:
                out.items.append(Anomaly(
                    "send-order", f"producer {producer!r} partition {partition!r}: the final read holds send "
                    f"#{send.index} at {offset}, before send #{previous[0].index} at {previous[1]}",
                    (previous[0], send)))
            previous = (send, offset)


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


def _reads(polls: Sequence[Poll], finals: dict[Partition, FinalRead]) -> list[Poll | FinalRead]:
    """Every read of the history: the polls, then the final reads."""
    return [*polls, *finals.values()]


def _check_duplicates(polls: Sequence[Poll], finals: dict[Partition, FinalRead], out: Anomalies) -> None:
    offsets_of: dict[tuple[Partition, bytes], set[int]] = defaultdict(set)
    where: dict[tuple[Partition, bytes], list[object]] = defaultdict(list)
    for op in _reads(polls, finals):
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
        found = stored[send.partition].get(send.offset) if send.offset is not None else None
        if found != send.value:
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
    anywhere = {s.value: s for s in sends if not s.ok and s.definite and s.partition is None}
    acked = {(s.partition, s.value) for s in sends if s.ok}
    for op in _reads(polls, finals):
        for offset, value in op.records:
            key = (op.partition, value)
            culprit = failed.get(key) or anywhere.get(value)
            if culprit is not None and key not in acked:
                out.items.append(Anomaly(
                    "G1a", f"failed write {value!r} visible at {op.partition!r}/{offset}", (culprit, op)
                ))


def _check_unseen(sends: Sequence[Send], polls: Sequence[Poll], finals: dict[Partition, FinalRead], out: Anomalies) -> None:
    observed = {(op.partition, value) for op in _reads(polls, finals) for _o, value in op.records}
    for send in sends:
        if send.ok and (send.partition, send.value) not in observed:
            out.items.append(Anomaly("unseen", f"acked {send.value!r} on {send.partition!r} never read", (send,)))


def check_transactions(history: Iterable[Op]) -> Anomalies:
    """The transactional anomalies of ``history`` (module docstring): its ``Txn``s against
    its ``read_committed`` polls and final reads."""
    ops = list(history)
    out = Anomalies()
    txns = [op for op in ops if isinstance(op, Txn)]
    polls = [op for op in ops if isinstance(op, Poll)]
    finals = {op.partition: op for op in ops if isinstance(op, FinalRead)}
    owner: dict[bytes, Txn] = {}
    for txn in txns:
        for _, value in txn.writes:
            owner[value] = txn
    _check_duplicates(polls, finals, out)
    for poll in polls:
        for offset, value in poll.records:
            txn = owner.get(value)
            if txn is None:
                continue
            if txn.outcome == "aborted":
                out.items.append(Anomaly("aborted-read", f"{value!r} of aborted transaction {txn.txn!r} was read at "
                                         f"offset {offset}", (txn, poll)))
            elif poll.at is not None and (txn.commit_called is None or poll.at < txn.commit_called):
                out.items.append(Anomaly("dirty-read", f"{value!r} of transaction {txn.txn!r} was read before its "
                                         "commit was called", (txn, poll)))
    final_values: dict[Partition, set[bytes]] = {p: {v for _, v in f.records} for p, f in finals.items()}
    for partition, final in finals.items():
        for offset, value in final.records:
            txn = owner.get(value)
            if txn is not None and txn.outcome == "aborted":
                out.items.append(Anomaly("aborted-read", f"{value!r} of aborted transaction {txn.txn!r} is in the "
                                         f"final read at offset {offset}", (txn,)))
    for txn in txns:
        present = [(p, v) for p, v in txn.writes if v in final_values.get(p, set())]
        missing = [(p, v) for p, v in txn.writes if p not in finals]
        if missing:
            out.items.append(Anomaly("no-final-read", f"transaction {txn.txn!r} wrote to partitions without a final "
                                     "read", (txn,)))
            continue
        if txn.outcome == "committed" and len(present) < len(txn.writes):
            out.items.append(Anomaly("lost-committed-write", f"committed transaction {txn.txn!r}: "
                                     f"{len(txn.writes) - len(present)} of {len(txn.writes)} values missing", (txn,)))
        elif txn.outcome == "unknown" and 0 < len(present) < len(txn.writes):
            out.items.append(Anomaly("partial-transaction", f"transaction {txn.txn!r}: {len(present)} of "
                                     f"{len(txn.writes)} values visible", (txn,)))
    return out
