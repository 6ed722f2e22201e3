"""KIP-360 for a producer with a random id: go on after a broker forgot the id.

A partition leader knows a producer by the frames of it that its log holds.  When
retention deletes all of them and the broker restarts (or the leader's state was built
without them), the id is unknown there, and its next frame, sequence ``n > 0``, waits for
sequences ``0 .. n-1`` that will never come, then is refused with
``OutOfOrderSequenceError``: without this the partition's sends would be stuck until the
delivery timeout and then fail.

A refusal means the broker lost the state (rather than: an earlier frame is still on its
way, calls in flight may arrive in any order) when every sequence below the refused
frame's was acknowledged.  Then that frame and every later sequence of the id on that
partition are re-stamped under a fresh id, from sequence 0, in the same order: sequence
``s`` of the old id becomes ``s - n`` of the fresh one.  A frame that some earlier attempt
may have written is re-stamped only when the answer's log start offset is past the id's
last acknowledged offset (retention removed its frames, as Kafka's producer checks), so a
broker that only lags cannot make a record appear twice.

The same re-stamping closes a hole: when a frame fails for good without being written (a
record too large for the topic), the id's later sequences on that partition would wait
for it and be refused; they move to a fresh id from the hole's end instead (as Kafka's
producer adjusts the sequences of the batches behind a failed one), sent once every
earlier frame of the id there is settled.

Pure bookkeeping; the producer's lock guards it.  Producers with an explicit id (the Spark
writer's idempotence key) and transactional ones never re-stamp.
"""
from __future__ import annotations

import random

__all__ = ["SequenceResets"]

Slot = tuple[str, int]


class SequenceResets:
    def __init__(self, rng: random.Random) -> None:
        self._rng = rng
        self._acked: dict[tuple[Slot, int], tuple[int, int]] = {}  # (slot, id) -> (last sequence, last offset)
        self._resets: dict[tuple[Slot, int], tuple[int, int]] = {}  # (slot, old id) -> (fresh id, first sequence)
        self._origin: dict[int, int] = {}  # fresh id -> the id the producer reserved its sequences under

    def __bool__(self) -> bool:
        """Whether any id was re-stamped (``mapped`` is the identity until then)."""
        return bool(self._resets)

    def acknowledged(self, slot: Slot, producer_id: int, first_seq: int, count: int, last_offset: int) -> None:
        """Sequences ``first_seq .. first_seq + count - 1`` of ``producer_id`` were appended
        (the broker appends an id's frames in sequence order: everything below them was too)."""
        last = first_seq + count - 1
        key = (slot, producer_id)
        known = self._acked.get(key)
        if known is None or last > known[0]:
            self._acked[key] = (last, max(last_offset, known[1] if known else -1))

    def refused(self, slot: Slot, producer_id: int, first_seq: int, *, maybe_written: bool,
                log_start: int) -> int | None:
        """A frame at ``first_seq`` was refused out of order: the fresh id that takes over
        the id's sequences from there, when the broker forgot the id (see the module
        docstring); None when it may only be early."""
        key = (slot, producer_id)
        if key in self._resets or first_seq <= 0:
            return None
        last_seq, last_offset = self._acked.get(key, (-1, -1))
        if first_seq != last_seq + 1:
            return None
        if maybe_written and not 0 <= last_offset < log_start:
            return None
        fresh = self._rng.getrandbits(63)
        self._resets[key] = (fresh, first_seq)
        self._origin[fresh] = self._origin.get(producer_id, producer_id)
        return fresh

    def skipped(self, slot: Slot, producer_id: int, first_seq: int, count: int) -> int | None:
        """Sequences ``first_seq .. first_seq + count - 1`` failed without being written (a
        record too large, a refusal before the append): the fresh id that takes over the
        id's later sequences on ``slot``, so the hole does not refuse them; None when the id
        was moved there already (the caller then gives up the id instead)."""
        producer_id, first_seq = self.mapped(slot, producer_id, first_seq)  # a hole in a fresh id's sequences
        key = (slot, producer_id)
        if key in self._resets:
            return None
        fresh = self._rng.getrandbits(63)
        self._resets[key] = (fresh, first_seq + count)
        self._origin[fresh] = self._origin.get(producer_id, producer_id)
        return fresh

    def origin(self, producer_id: int) -> int:
        """The id whose sequences ``producer_id`` took over (itself when it is no fresh id)."""
        return self._origin.get(producer_id, producer_id)

    def mapped(self, slot: Slot, producer_id: int, seq: int) -> tuple[int, int]:
        """The id and sequence that ``producer_id``'s ``seq`` on ``slot`` goes under now."""
        while (moved := self._resets.get((slot, producer_id))) is not None and seq >= moved[1]:
            producer_id, seq = moved[0], seq - moved[1]
        return producer_id, seq
