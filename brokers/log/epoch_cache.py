"""The leader-epoch cache of one partition log: file ``leader-epoch-checkpoint``.

An ordered list of ``(epoch, start_offset)``: the first offset each leader epoch wrote.
Epochs and start offsets both strictly increase.  Kafka's ``LeaderEpochFileCache``:
followers use it (through ``end_offset_for_epoch``) to find where their log diverged
from the leader's, and Raft uses it for the same question.

File layout (checkpoint.py, written atomically and durably by ``persist``; ``assign``, the
append path's change, only marks the file behind, and ``sync`` writes it before the log's
recovery point moves and at close.  Kafka writes and fsyncs the file in ``assign``; here
the same guarantee comes from that order: the file lacks no entry of a frame below the
recovery point, and recovery scans every segment from the one holding the recovery point
on, feeding its frames back through ``assign``.  Writing the file on every new epoch cost a
first write to 1,000 new partitions a file creation, a rename and two fsyncs per replica
before its acks):

    0\\n<count>\\n<epoch> <start_offset>\\n ...

Recovery: entries at or past the recovered log end are dropped (``truncate_from_end``);
frames recovered after the recovery point are fed back through ``assign``.  A missing
or unreadable file makes the log rebuild the cache from the frame headers.

Thread-safety: none; caller holds the partition lock.
"""
from __future__ import annotations

from bisect import bisect_left, bisect_right
from pathlib import Path

from . import checkpoint, epoch_lookup

__all__ = ["EpochCache", "UNDEFINED_EPOCH", "UNDEFINED_OFFSET", "FILE_NAME"]

FILE_NAME = "leader-epoch-checkpoint"
UNDEFINED_EPOCH = epoch_lookup.UNDEFINED_EPOCH
UNDEFINED_OFFSET = epoch_lookup.UNDEFINED_OFFSET


class EpochCache:
    """``(epoch, start_offset)`` entries, persisted to ``path`` on every change."""

    def __init__(self, path: Path, entries: list[tuple[int, int]] | None = None) -> None:
        self.path = path
        self._epochs: list[int] = [e for e, _ in entries or ()]
        self._starts: list[int] = [s for _, s in entries or ()]
        self.unsynced = False  # the file is behind the entries (``assign``); ``sync`` writes it

    @classmethod
    def load(cls, path: Path) -> "EpochCache | None":
        """The cache in ``path``; None when the file is missing or does not parse."""
        try:
            lines = checkpoint.read_lines(path)
        except ValueError:
            return None
        if lines is None:
            return None
        entries: list[tuple[int, int]] = []
        for line in lines:
            parts = line.split(" ")
            if len(parts) != 2 or not all(p.lstrip("-").isdigit() for p in parts):
                return None
            epoch, start = int(parts[0]), int(parts[1])
            if entries and (epoch <= entries[-1][0] or start < entries[-1][1]) or epoch < 0 or start < 0:
                return None
            entries.append((epoch, start))
        return cls(path, entries)

    def entries(self) -> list[tuple[int, int]]:
        return list(zip(self._epochs, self._starts))

    @property
    def latest_epoch(self) -> int | None:
        return self._epochs[-1] if self._epochs else None

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that ``epoch`` starts at ``start_offset`` if it is newer than the latest.

        Entries starting at or after ``start_offset`` are replaced (they cannot exist in a
        consistent log).  The file is written later (``sync``, module docstring).  Returns
        True when the cache changed."""
        if epoch < 0 or (self._epochs and epoch <= self._epochs[-1]):
            return False
        i = bisect_left(self._starts, start_offset)
        del self._epochs[i:]
        del self._starts[i:]
        self._epochs.append(epoch)
        self._starts.append(start_offset)
        self.unsynced = True
        return True

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """Kafka's OffsetsForLeaderEpoch answer (``epoch_lookup.end_offset_for_epoch``)."""
        return epoch_lookup.end_offset_for_epoch(self.entries(), epoch, log_end_offset)

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch that wrote ``offset`` as far as the cache knows (None before the first)."""
        return epoch_lookup.epoch_for_offset(self.entries(), offset)

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop entries starting at or after ``end_offset`` (the log was cut there)."""
        i = bisect_left(self._starts, end_offset)
        if i < len(self._starts):
            del self._epochs[i:]
            del self._starts[i:]
            self.persist()

    def truncate_from_start(self, start_offset: int) -> None:
        """The log now starts at ``start_offset``: drop entries wholly before it and move the
        start of the entry that covers it up to ``start_offset`` (Kafka's behaviour)."""
        i = bisect_right(self._starts, start_offset)
        if i == 0:
            return
        keep_epoch = self._epochs[i - 1]
        if i == 1 and self._starts[0] == start_offset:
            return
        del self._epochs[: i - 1]
        del self._starts[: i - 1]
        self._epochs[0], self._starts[0] = keep_epoch, start_offset
        self.persist()

    def clear(self) -> None:
        self._epochs.clear()
        self._starts.clear()
        self.persist()

    def persist(self) -> None:
        """Write the file durably (``checkpoint.write_lines``)."""
        checkpoint.write_lines(self.path, [f"{e} {s}" for e, s in zip(self._epochs, self._starts)])
        self.unsynced = False

    def sync(self) -> None:
        """Write the file if ``assign`` changed the entries since it was last written (before
        the log's recovery point passes them, and at close)."""
        if self.unsynced:
            self.persist()
