"""``Ready``: everything the core wants done, and the order it must be done in."""
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

    1. persist ``hard_state`` (when not None) durably (fsync + atomic rename), and
       flush the log so that ``log.flushed_end_offset >= flush_offset`` (``entries``
       lists what was appended since the last Ready);
    2. only then send ``messages`` (a vote, or a fetch that reports an offset, is a
       promise about durable state: Raft paper section 5.2 and figure 2 "persistent
       state ... updated on stable storage before responding to RPCs");
    3. then restore the state machine from ``snapshot`` (when not None) and apply
       ``committed`` in order (skipping ``control`` entries), then report
       ``leader_change`` (when not None);
    4. call ``RaftCore.advance(ready)``.

    No other call into the core may happen between ``ready()`` and ``advance()``.
    The shells assert step 1 before step 2 (``check_persisted``).
    """

    hard_state: HardState | None = None
    entries: tuple[Entry, ...] = field(default=())
    flush_offset: int = 0
    messages: tuple[Message, ...] = field(default=())
    snapshot: Snapshot | None = None
    committed: tuple[Entry, ...] = field(default=())
    leader_change: LeaderChange | None = None
    high_watermark: int = 0

    def check_persisted(self, flushed_end_offset: int, persisted: HardState) -> None:
        """Raise ``AssertionError`` unless step 1 is done: call before sending."""
        if flushed_end_offset < self.flush_offset:
            raise AssertionError(
                f"Ready ordering violated: log flushed to {flushed_end_offset}, "
                f"messages need {self.flush_offset} durable first"
            )
        if self.hard_state is not None and persisted != self.hard_state:
            raise AssertionError(
                f"Ready ordering violated: hard state {self.hard_state} not persisted (have {persisted})"
            )
