"""``Ready``: everything the core wants done, and the order it must be done in.

The contract itself (why the log is flushed rather than written by the shell, and what
each side asserts) is written at the top of ``core.py``.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .messages import Entry, HardState, Message, Snapshot

__all__ = ["Ready", "LeaderChange"]


@dataclass(frozen=True, slots=True)
class LeaderChange:
    leader_id: int | None
    epoch: int


@dataclass(frozen=True, slots=True)
class Ready:
    """One batch of work from ``RaftCore.ready()``.  The shell MUST, in this order:

    1. persist: write ``hard_state`` (when not None) durably, and when
       ``flush_to_offset`` is not None call ``log.flush()`` so that
       ``log.flushed_end_offset >= flush_to_offset`` (the entries are already in the
       log: appends write, only the flush is left to the shell);
    2. send ``messages``, only after step 1 (a vote, or a fetch that reports an offset,
       is a promise about durable state: Raft paper section 5.2 and figure 2 "persistent
       state ... updated on stable storage before responding to RPCs"), and assert step 1
       first with ``check_persisted``;
    3. apply: restore the state machine from ``snapshot`` (when not None), apply
       ``committed`` in order (skipping ``control`` entries), then report
       ``leader_change`` (when not None);
    4. call ``RaftCore.advance(ready)``.

    No other call into the core may happen between ``ready()`` and ``advance()``.
    """

    hard_state: HardState | None = None
    flush_to_offset: int | None = None  # exclusive end offset the log must be durable to; None: it is
    messages: tuple[Message, ...] = field(default=())
    snapshot: Snapshot | None = None
    committed: tuple[Entry, ...] = field(default=())
    leader_change: LeaderChange | None = None
    high_watermark: int = 0

    @property
    def must_persist(self) -> bool:
        """Step 1 has disk work to do (etcd's ``MustSync``)."""
        return self.hard_state is not None or self.flush_to_offset is not None

    def check_persisted(self, flushed_end_offset: int, persisted: HardState) -> None:
        """Raise ``AssertionError`` unless step 1 is done: call it before sending.

        ``flushed_end_offset`` is the log's, ``persisted`` the hard state on disk, both
        as the shell observes them after its writes."""
        if self.flush_to_offset is not None and flushed_end_offset < self.flush_to_offset:
            raise AssertionError(
                f"Ready ordering violated: log flushed to {flushed_end_offset}, "
                f"messages need {self.flush_to_offset} durable first"
            )
        if self.hard_state is not None and persisted != self.hard_state:
            raise AssertionError(
                f"Ready ordering violated: hard state {self.hard_state} not persisted (have {persisted})"
            )
