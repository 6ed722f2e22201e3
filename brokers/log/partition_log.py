"""One partition replica's segmented log: ``PartitionLog``.

Directory layout (one directory per partition replica):

    00000000000000000000.log / .index / .timeindex    segments, named by base offset
    recovery-point-offset-checkpoint                  everything below it was fsynced
    log-start-offset-checkpoint                       first offset still readable
    leader-epoch-checkpoint                           EpochCache (written before the recovery point moves)
    cleaner-offset-checkpoint                         compaction: the last plan applied (cleaner/checkpoint.py)
    <base>.log.cleaned / <base>.log.swap              compaction: a clean's swap in progress (swap.py)
    .lock                                             flock: one PartitionLog per directory

Frames tile the offsets: frame ``i`` of the log starts where frame ``i - 1``'s offset range
ended (records inside a compacted, version-2 frame may have gaps; see spark_log.frame).  The log
appends whole frames (Arrow IPC record batches behind spark_log.frame's 64-byte header)
and serves them back as file bytes; it never decodes a record.  Per request the work is
per frame: stamp offset and epoch into a 64-byte header copy, one ``pwritev`` of headers
plus the untouched bodies; the CRC-32C is verified once, by whoever made the
``CheckedFrames`` (the produce path; ``check_frames`` here for raw bytes and followers).

Durability: ``flush_messages`` (fsync once that many records are unflushed) and
``flush_ms`` (fsync on the first append or ``maybe_roll`` call once that long passed since
the last fsync); 0 leaves it to the OS.  The recovery point (the offset below which all
data is fsynced and indexes are written) is checkpointed at most every
``CHECKPOINT_INTERVAL_MS``, on close, and after truncation or recovery; it only bounds how
much is re-validated on open.  Crash recovery rules: see ``recovery.py``.

Thread-safety: none; the caller holds one lock per partition around every call.
"""
from __future__ import annotations

import fcntl
import os
import shutil
from pathlib import Path
from typing import Sequence

from spark_log.clock import Clock, SystemClock
from spark_log.config import TopicConfig
from spark_log.errors import CorruptRecordError, FencedEpochError, InvalidRequestError, OffsetOutOfRangeError, StorageError

from . import append as _append
from .append import Buffer, CheckedFrames, FrameInfo
from . import checkpoint, retention
from .snapshot import CleanedGroup, LogSnapshot, SegmentFile
from .swap import cleaned_path, commit_swaps
from . import files
from .durable import fsync_dir
from .recovery import LOG_START_FILE, RECOVERY_POINT_FILE, load
from .offset_index import ENTRY_BYTES as OFFSET_ENTRY_BYTES
from .results import AppendInfo, ReadResult
from .segment import MAX_SEGMENT_BYTES, Segment
from .time_index import ENTRY_BYTES as TIME_ENTRY_BYTES

__all__ = ["PartitionLog", "AppendInfo", "ReadResult"]


LOCK_FILE = ".lock"
CHECKPOINT_INTERVAL_MS = 60_000
_MAX_RELATIVE = 2**32 - 1


class PartitionLog:
    """One partition replica's segmented log in ``directory`` (module docstring: layout,
    durability).  Opening recovers it.  Thread-safety: none; caller locks."""

    def __init__(self, directory: Path | str, config: TopicConfig, *, clock: Clock = SystemClock()) -> None:
        self.directory = Path(directory)
        self._config = config
        self._clock = clock
        self._closed = False
        self._retired: list[Segment] = []  # out of the log, files deleted, still open (take_retired)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._lock_fd = files.open_fd(self.directory / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            files.close(self._lock_fd)
            raise StorageError(f"{self.directory} is already open in another PartitionLog") from None
        try:
            self._open()
        except BaseException:
            for segment in getattr(self, "_segments", ()):
                segment.close()
            self._release()
            raise

    def _open(self) -> None:
        now = self._clock.monotonic_ms()
        loaded = load(self.directory, index_interval_bytes=self._config.index_interval_bytes, now_ms=now)
        self._segments, self._epochs, self.recovery = loaded.segments, loaded.epochs, loaded.report
        self.log_start_offset = loaded.log_start_offset
        for segment in self._segments.from_offset(loaded.recovery_point):
            if segment.next_offset > loaded.recovery_point or segment.new_file or not loaded.report.clean:
                segment.dirty = True  # recovered bytes may still be only in the page cache
        self._flushed_offset = min(loaded.recovery_point, self.log_end_offset)
        # A clean open (the checkpoint files already say what they would be rewritten with,
        # and every segment's bytes lie below the recovery point) writes and fsyncs nothing:
        # a broker that restarts with 1,000 partitions opens them in a fraction of a second
        # instead of 7 fsyncs (25 ms) each.  Anything else is written as before.
        self._checkpointed = self._flushed_offset if _stored_offset(self.directory / RECOVERY_POINT_FILE) == \
            self._flushed_offset else -1
        self._unflushed_records = 0
        self._generation = 0  # truncations so far (a cleaner's snapshot is void after one)
        self._last_flush_ms = now
        self._last_checkpoint_ms = now
        self.flush(checkpoint=True)
        if _stored_offset(self.directory / LOG_START_FILE) != self.log_start_offset:
            checkpoint.write_offset(self.directory / LOG_START_FILE, self.log_start_offset)

    def _new_segment(self, base_offset: int) -> Segment:
        return Segment.create(
            self.directory, base_offset,
            index_interval_bytes=self._config.index_interval_bytes, now_ms=self._clock.monotonic_ms(),
        )

    # --- state -----------------------------------------------------------------------

    @property
    def log_end_offset(self) -> int:
        """The next offset to be assigned (LEO)."""
        return self._segments.active.next_offset

    @property
    def latest_epoch(self) -> int | None:
        return self._epochs.latest_epoch

    @property
    def recovery_point(self) -> int:
        """Every record below this offset is fsynced."""
        return self._flushed_offset

    @property
    def size_bytes(self) -> int:
        return self._segments.total_bytes()

    @property
    def segment_base_offsets(self) -> list[int]:
        return [s.base_offset for s in self._segments]

    def epoch_entries(self) -> list[tuple[int, int]]:
        """The leader-epoch cache as ``[(epoch, start_offset), ...]``."""
        return self._epochs.entries()

    def _check_open(self, **ints: object) -> None:
        """Refuse calls on a closed log, and arguments that are not integers in range."""
        if self._closed:
            raise StorageError(f"{self.directory}: the log is closed")
        for name, value in ints.items():
            if value is None and name == "max_offset":
                continue
            if not isinstance(value, int) or isinstance(value, bool):
                raise InvalidRequestError(f"{name} must be an integer, got {value!r}")

    # --- appending -------------------------------------------------------------------

    def append_as_leader(self, frames: CheckedFrames | bytes | bytearray | memoryview, *,
                         leader_epoch: int) -> AppendInfo:
        """Append producer frames: offsets assigned from the LEO, ``leader_epoch`` stamped.

        ``CheckedFrames`` (``append.check_frames``, the produce path's validation) are
        trusted: nothing is verified again.  Raw bytes are checked here first (CRC,
        ``max_message_bytes``: ``CorruptRecordError``, ``RecordTooLargeError``,
        ``InvalidRequestError`` for an empty or non-bytes request).  Raises
        ``InvalidRequestError`` for a bad epoch and ``FencedEpochError`` when
        ``leader_epoch`` is below the latest epoch in the log, and then appends nothing.
        ``StorageError`` if the disk fails (nothing appended either)."""
        self._check_open()
        if not isinstance(leader_epoch, int) or isinstance(leader_epoch, bool) or not 0 <= leader_epoch < 2**31:
            raise InvalidRequestError(f"leader epoch must be an integer in [0, 2**31), got {leader_epoch!r}")
        latest = self._epochs.latest_epoch
        if latest is not None and leader_epoch < latest:
            raise FencedEpochError(f"leader epoch {leader_epoch} is below the log's latest epoch {latest}")
        checked = frames if isinstance(frames, CheckedFrames) else _append.check_frames(
            frames, max_message_bytes=self._config.max_message_bytes)
        now_wall = self._clock.wall_ms() if self._config.message_timestamp_type == "LogAppendTime" else None
        first = self.log_end_offset
        buffers, infos = _append.stamp_as_leader(checked, first_offset=first, epoch=leader_epoch, append_time_ms=now_wall)
        self._write(buffers, infos, len(checked.view))
        self._epochs.assign(leader_epoch, first)
        return self._after_append(infos)

    def append_as_follower(self, frames: bytes | bytearray | memoryview) -> AppendInfo:
        """Append frames copied from the leader as they are (offsets and epochs kept).

        Every frame is verified (CRC; no size limit: the leader applied it).  The first
        frame's base offset must be the LEO (else ``OffsetOutOfRangeError``), the frames
        tiling the offsets, and epochs must not go below the latest epoch (``InvalidRequestError``:
        truncate first).  All-or-nothing like ``append_as_leader``."""
        self._check_open()
        checked = _append.check_frames(frames, max_message_bytes=None, explicit_offsets=True)
        first = checked.frames[0].header.base_offset
        if first != self.log_end_offset:
            raise OffsetOutOfRangeError(
                f"follower append starts at offset {first}, but the log ends at {self.log_end_offset}",
                log_end_offset=self.log_end_offset,
            )
        infos = _append.check_follower(checked, expected_offset=first, latest_epoch=self._epochs.latest_epoch)
        self._write([checked.view], infos, len(checked.view))
        for item in checked.frames:  # the file is written before the recovery point passes them
            self._epochs.assign(item.header.partition_leader_epoch, item.header.base_offset)
        return self._after_append(infos)

    def _write(self, buffers: list[Buffer], infos: list[FrameInfo], total: int) -> None:
        active = self._segments.active
        now = self._clock.monotonic_ms()
        last_next = infos[-1][1]
        # segment.index.bytes bounds each index file, as Kafka's: a segment whose index could
        # not take an entry for every frame of this append rolls first
        index_bytes = self._config.segment_index_bytes
        limits = (index_bytes // OFFSET_ENTRY_BYTES, index_bytes // TIME_ENTRY_BYTES)
        if active.size and (
            active.size + total > min(self._config.segment_bytes, MAX_SEGMENT_BYTES)
            or last_next - active.base_offset > _MAX_RELATIVE
            or self._segment_expired(active, now)
            or len(active.offset_index) + len(infos) > limits[0]
            or len(active.time_index) + len(infos) > limits[1]
        ):
            active = self._roll()
        active.append(buffers, infos, now_ms=now, index_limits=limits)

    def _after_append(self, infos: list[FrameInfo]) -> AppendInfo:
        count = infos[-1][1] - infos[0][0]
        self._unflushed_records += count
        if self._config.flush_messages and self._unflushed_records >= self._config.flush_messages:
            self.flush()
        else:
            self.maybe_flush()
        return AppendInfo(
            first_offset=infos[0][0],
            last_offset=infos[-1][1] - 1,
            max_timestamp=max(info[3] for info in infos),
            record_count=count,
            frames=len(infos),
        )

    def _segment_expired(self, segment: Segment, now_ms: int) -> bool:
        """Roll by age: ``segment.ms``, and for compacted logs ``max.compaction.lag.ms``
        too (the active segment is never cleaned, so it must close in time; KIP-354)."""
        started = segment.first_append_ms
        limit = self._config.segment_ms
        if self._config.compact:
            limit = min(limit, self._config.max_compaction_lag_ms)
        return started is not None and now_ms - started >= limit

    def _roll(self) -> Segment:
        self._segments.active.write_indexes(fsync=False)
        segment = self._new_segment(self.log_end_offset)
        self._segments.add(segment)
        self._delete_segments_below_start()
        return segment

    def maybe_roll(self) -> None:
        """Roll the active segment if it is older than ``segment_ms``; apply ``flush_ms``.

        The owner calls this periodically (say every second)."""
        self._check_open()
        active = self._segments.active
        if active.size and self._segment_expired(active, self._clock.monotonic_ms()):
            self._roll()
        self.maybe_flush()

    def maybe_flush(self) -> None:
        """fsync if ``flush_ms`` is set and that long passed since the last fsync."""
        if self._config.flush_ms and self._clock.monotonic_ms() - self._last_flush_ms >= self._config.flush_ms:
            self.flush()

    def flush(self, *, checkpoint: bool = False) -> None:
        """fsync every segment with unflushed data: afterwards every appended record is durable.

        Writes the recovery-point checkpoint when ``checkpoint`` is true or the last one is
        older than ``CHECKPOINT_INTERVAL_MS``."""
        self._check_open()
        new_files = False
        for segment in self._segments.from_offset(self._flushed_offset):
            segment.flush()
            new_files |= segment.new_file
            segment.new_file = False
        if new_files:  # a rolled segment's directory entry must be durable with its data
            fsync_dir(self.directory)
        self._flushed_offset = self.log_end_offset
        self._unflushed_records = 0
        now = self._clock.monotonic_ms()
        self._last_flush_ms = now
        if checkpoint or now - self._last_checkpoint_ms >= CHECKPOINT_INTERVAL_MS:
            self._write_recovery_point(now)

    def _write_recovery_point(self, now_ms: int) -> None:
        self._epochs.sync()  # never a recovery point past an epoch entry a crash could lose
        if self._checkpointed == self._flushed_offset:
            return
        for segment in self._segments.from_offset(max(self._checkpointed, 0)):
            segment.write_indexes(fsync=True)
        checkpoint.write_offset(self.directory / RECOVERY_POINT_FILE, self._flushed_offset)
        self._checkpointed = self._flushed_offset
        self._last_checkpoint_ms = now_ms

    # --- reading ---------------------------------------------------------------------

    def read(self, offset: int, *, max_bytes: int, max_offset: int | None = None, verify: bool = False) -> ReadResult:
        """Whole frames starting with the frame that holds ``offset``, up to ``max_bytes``
        (at least one frame even if it is larger), from one segment, never a frame whose
        base offset is >= ``max_offset`` (default: the LEO).  ``offset == LEO`` gives an
        empty result.  Raises ``OffsetOutOfRangeError`` outside [log start, LEO].  Stored
        damage (headers are always checked, the CRC too with ``verify``) ends the result
        before the damaged frame; a read that starts at it raises ``CorruptRecordError``."""
        self._check_open(offset=offset, max_bytes=max_bytes, max_offset=max_offset)
        if offset < self.log_start_offset or offset > self.log_end_offset:
            raise OffsetOutOfRangeError(
                f"offset {offset} is outside the log [{self.log_start_offset}, {self.log_end_offset}]",
                log_start_offset=self.log_start_offset,
                log_end_offset=self.log_end_offset,
            )
        limit = self.log_end_offset if max_offset is None else min(max_offset, self.log_end_offset)
        segment = self._segments.floor(offset)
        while segment is not None and offset >= segment.next_offset:
            segment = self._segments.higher(segment)
        if offset >= limit or segment is None:
            return ReadResult(b"", offset, offset)
        first = segment.locate(offset)
        assert first is not None
        data, next_offset = segment.read_frames(first, max_bytes=max_bytes, limit=limit, verify=verify)
        return ReadResult(data, first.base_offset, next_offset)

    def offset_for_timestamp(self, timestamp_ms: int) -> int | None:
        """The base offset of the first frame whose max timestamp is >= ``timestamp_ms``
        (raised to the log start), or None when no frame is that recent."""
        self._check_open(timestamp_ms=timestamp_ms)
        for segment in self._segments:
            if segment.max_timestamp >= timestamp_ms:
                found = segment.find_timestamp(timestamp_ms)
                if found is not None:
                    return max(found, self.log_start_offset)
        return None

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """``(epoch, end offset)`` as Kafka's OffsetsForLeaderEpoch (see ``EpochCache.end_offset_for``)."""
        self._check_open(epoch=epoch)
        return self._epochs.end_offset_for(epoch, self.log_end_offset)

    # --- truncation and retention ----------------------------------------------------

    def truncate_to(self, offset: int) -> None:
        """Drop every record >= ``offset``.  Frames are atomic: a frame holding ``offset``
        goes whole, so the LEO can end below ``offset`` (Kafka does the same).  An
        ``offset`` at or below the log start empties the log to start at ``offset``.
        Durable on return (truncated data cannot reappear after a crash)."""
        self._check_open(offset=offset)
        if offset >= self.log_end_offset:
            return
        if offset <= self.log_start_offset:
            self.truncate_fully_and_start_at(offset)
            return
        for segment in reversed(self._segments.from_offset(offset)):
            if segment.base_offset >= offset and segment is not self._segments.first:
                self._segments.remove(segment)
                segment.delete()
            else:
                segment.truncate_to(offset)
                break
        if self.log_end_offset < self.log_start_offset:  # the frame holding `offset` began below the log start
            self._replace_all_segments(self.log_start_offset)
        self._after_truncation()

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment; the empty log starts (and ends) at ``offset``."""
        self._check_open(offset=offset)
        if offset < 0:
            raise InvalidRequestError(f"offset must be >= 0, got {offset}")
        self._replace_all_segments(offset)
        self._epochs.clear()
        checkpoint.write_offset(self.directory / LOG_START_FILE, offset)
        self._after_truncation()

    def _replace_all_segments(self, offset: int) -> None:
        for segment in reversed(list(self._segments)):
            self._segments.remove(segment)
            segment.delete()
        self._segments.add(self._new_segment(offset))
        self.log_start_offset = offset

    def _after_truncation(self) -> None:
        self._generation += 1
        self._epochs.truncate_from_end(self.log_end_offset)
        if self._flushed_offset > self.log_end_offset or self._checkpointed > self.log_end_offset:
            self._flushed_offset = min(self._flushed_offset, self.log_end_offset)
            self._checkpointed = -1
            self._write_recovery_point(self._clock.monotonic_ms())
        self._unflushed_records = 0

    def advance_log_start(self, offset: int) -> None:
        """Make ``offset`` the first readable offset (delete-records, Raft snapshots); deletes
        the segments wholly below it.  Raises ``OffsetOutOfRangeError`` past the LEO."""
        self._check_open(offset=offset)
        if offset > self.log_end_offset:
            raise OffsetOutOfRangeError(
                f"cannot start the log at {offset}: it ends at {self.log_end_offset}",
                log_end_offset=self.log_end_offset,
            )
        if offset <= self.log_start_offset:
            return
        self.log_start_offset = offset
        checkpoint.write_offset(self.directory / LOG_START_FILE, offset)
        self._epochs.truncate_from_start(offset)
        self._delete_segments_below_start()

    def _delete_segments_below_start(self) -> None:
        while len(self._segments) > 1:
            second = self._segments.higher(self._segments.first)
            if second is None or second.base_offset > self.log_start_offset:
                break
            self._delete_oldest()

    def apply_retention(self, *, high_watermark: int) -> int:
        """Delete whole segments past ``retention_ms`` (by their largest timestamp) or
        beyond ``retention_bytes`` (oldest first); never the active segment, nor a segment
        holding an offset at or above ``high_watermark`` (the replica's: records the ISR may
        not hold yet stay, and the log start never passes it; Kafka's ``deletableSegments``).
        Only when ``cleanup.policy`` names ``delete`` (a ``compact``-only log keeps every
        key's latest record forever).  Returns how many segments were deleted."""
        self._check_open(high_watermark=high_watermark)
        if not self._config.delete:
            return 0
        wanted = retention.segments_to_delete(
            [(segment.size, segment.max_timestamp) for segment in self._segments],
            retention_ms=self._config.retention_ms,
            retention_bytes=self._config.retention_bytes,
            now_ms=self._clock.wall_ms(),
        )
        eligible = retention.segments_below([segment.base_offset for segment in self._segments], high_watermark)
        return self._delete_oldest_segments(min(wanted, eligible))

    def apply_tiered_retention(self, *, below: int, retention_ms: int, retention_bytes: int) -> int:
        """A tiered log's local retention (``local.retention.*``, whatever ``cleanup.policy``
        says): delete the oldest whole segments past ``retention_ms`` / beyond
        ``retention_bytes``, but only segments entirely below ``below`` (the offset the Delta
        tier durably holds up to); never the active segment.  Returns how many went."""
        self._check_open(below=below)
        deleted = retention.tiered_segments_to_delete(
            [(segment.base_offset, segment.size, segment.max_timestamp) for segment in self._segments],
            below=below, retention_ms=retention_ms, retention_bytes=retention_bytes, now_ms=self._clock.wall_ms())
        return self._delete_oldest_segments(deleted)

    @property
    def active_base_offset(self) -> int:
        """The base offset of the active (open) segment: every segment below it is closed."""
        return self._segments.active.base_offset

    def _delete_oldest_segments(self, deleted: int) -> int:
        """Retention: the oldest ``deleted`` segments go, retired (``take_retired``)."""
        for _ in range(deleted):
            self._delete_oldest(retire=True)
        if deleted:
            self.log_start_offset = max(self.log_start_offset, self._segments.first.base_offset)
            checkpoint.write_offset(self.directory / LOG_START_FILE, self.log_start_offset)
            self._epochs.truncate_from_start(self.log_start_offset)
        return deleted

    def _delete_oldest(self, *, retire: bool = False) -> None:
        oldest = self._segments.first
        self._segments.remove(oldest)
        if retire:
            oldest.delete_files()
            self._retired.append(oldest)
        else:
            oldest.delete()

    # --- compaction (brokers/log/cleaner) ----------------------------------------------

    def roll_below(self, offset: int) -> None:
        """Close the active segment if it holds records below ``offset`` (a replica applying
        a plan that ends inside its active segment: the cleaner only rewrites closed ones)."""
        self._check_open(offset=offset)
        active = self._segments.active
        if active.size and active.base_offset < offset:
            self._roll()

    def cleaner_snapshot(self, below: int) -> LogSnapshot:
        """The closed segments holding offsets below ``below``, each with a read-only file
        descriptor of its own (``cleaner.LogSnapshot``; the caller closes it)."""
        self._check_open(below=below)
        active = self._segments.active
        segment_files: list[SegmentFile] = []
        try:
            for segment in self._segments:
                if segment is active or segment.base_offset >= below:
                    break
                fd = files.open_fd(segment.log_path, os.O_RDONLY)
                segment_files.append(SegmentFile(segment.base_offset, segment.next_offset, segment.size, fd, segment))
        except OSError as exc:
            LogSnapshot(self.directory, self.log_start_offset, segment_files, self._config.segment_bytes).close()
            raise StorageError(f"{self.directory}: cannot open a segment for cleaning: {exc.strerror}") from exc
        return LogSnapshot(self.directory, self.log_start_offset, segment_files, self._config.segment_bytes, self._generation)

    def replace_segments(self, groups: Sequence[CleanedGroup]) -> bool:
        """Swap every prepared cleaned group of a clean in, at once (``swap.py``: crash-safe
        renames; a crash leaves all old segments or all new ones); the replaced segments are
        retired (``take_retired``).  False, and the cleaned files deleted, when any group's
        segments are no longer this log's closed segments as they were (retention, a reopen)
        or the log was truncated since the snapshot.  ``StorageError`` if the disk fails
        mid-swap (reopening completes or drops it)."""
        self._check_open()
        active = self._segments.active
        olds: list[list[Segment]] = []
        for group in groups:
            old = [s for s in self._segments if any(s is token for token in group.tokens)]
            if (len(old) != len(group.tokens) or any(s is active for s in old) or group.generation != self._generation
                    or sum(s.size for s in old) != group.bytes_before):
                for stale in groups:
                    files.unlink(cleaned_path(self.directory, stale.base_offset), missing_ok=True)
                return False
            olds.append(old)
        try:
            commit_swaps(self.directory, [(g.base_offset, g.old_bases) for g in groups])
            replacements = [Segment.open_trusted(self.directory, g.base_offset,
                                                 index_interval_bytes=self._config.index_interval_bytes,
                                                 now_ms=self._clock.monotonic_ms()) for g in groups]
        except (OSError, CorruptRecordError) as exc:
            raise StorageError(f"{self.directory}: swapping in cleaned segments failed: {exc}; reopening the log "
                               "completes or drops the clean") from exc
        for old, replacement in zip(olds, replacements):
            self._segments.replace(old, replacement)
            self._retired += old  # their files are gone (commit_swaps)
            replacement.write_indexes(fsync=False)
        return True

    def take_retired(self) -> list[Segment]:
        """The segments a clean replaced or retention deleted since the last call: out of the
        log, their files deleted, still open.  The caller closes them once it has let go of
        its lock: the last close of a deleted file frees its pages (31 ms for 127 MiB here),
        which under the partition's lock stalls its appends and reads.  ``close`` and
        ``delete`` close any not taken."""
        retired, self._retired = self._retired, []
        return retired

    def offset_bytes(self, start: int, end: int) -> int:
        """Stored bytes of the frames holding offsets in ``[start, end)`` (``Segments.offset_bytes``)."""
        self._check_open(start=start, end=end)
        return self._segments.offset_bytes(start, end)

    def first_frame_newer_than(self, start: int, end: int, timestamp_ms: int) -> int | None:
        """The first frame in ``[start, end)`` whose max timestamp is above ``timestamp_ms``
        (``min.compaction.lag.ms``; ``Segments.first_frame_newer_than``)."""
        self._check_open(start=start, end=end, timestamp_ms=timestamp_ms)
        return self._segments.first_frame_newer_than(start, end, timestamp_ms)

    def first_timestamp_at(self, offset: int) -> int | None:
        """The max timestamp of the frame holding ``offset`` (None: past the end)."""
        self._check_open(offset=offset)
        return self._segments.max_timestamp_at(offset)

    # --- lifecycle -------------------------------------------------------------------

    def close(self) -> None:
        """Flush, checkpoint and release the directory.  Idempotent."""
        if self._closed:
            return
        try:
            self.flush(checkpoint=True)
        finally:
            for segment in [*self._segments, *self.take_retired()]:
                segment.close()
            self._closed = True
            self._release()

    def delete(self) -> None:
        """Close without flushing and remove the directory with everything in it."""
        if not self._closed:
            for segment in [*self._segments, *self.take_retired()]:
                segment.close()
            self._closed = True
            self._release()
        shutil.rmtree(self.directory, ignore_errors=True)

    def _release(self) -> None:
        if self._lock_fd >= 0:
            files.close(self._lock_fd)
            self._lock_fd = -1

    def __enter__(self) -> "PartitionLog":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"PartitionLog({self.directory}, [{self.log_start_offset}, {self.log_end_offset}), {len(self._segments)} segments)"


def _stored_offset(path: Path) -> int | None:
    """The offset a checkpoint file holds; None when it is missing or does not parse."""
    try:
        return checkpoint.read_offset(path)
    except ValueError:
        return None
