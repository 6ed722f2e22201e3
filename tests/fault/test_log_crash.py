"""Crash and corruption tests for the segmented log.

1. A writer subprocess appends deterministic frames (frame ``i`` carries ``base_sequence
   = i`` and leader epoch ``1 + i // 50``) and prints each append that returned on its
   stdout pipe.  The test kills it with SIGKILL at a random point, in a loop, reopens the
   log and checks that it is a clean prefix of the writer's sequence holding every
   acknowledged append, without any fsync: a process crash keeps the page cache.  (Power
   loss, where only fsynced data survives, is ``test_log_power_loss.py``: a SIGKILL
   cannot tell ``flush.messages=1`` from no fsync at all.)
2. Seeded random damage (bit flips in data and index files, cut data files, deleted
   index files): reopening succeeds (recovery truncates at the damage and rebuilds
   indexes) and every record before the damage is still there, byte for byte.

Every check compares the whole stored frame: base offset and leader epoch (outside the
CRC, which covers the rest) as well as the body.

Run the writer by hand with ``python -m tests.fault.test_log_crash DIR FLUSH_MESSAGES``.
"""
from __future__ import annotations

import functools
import random
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pyarrow as pa
import pytest

from brokers.log import PartitionLog
from spark_log.config import TopicConfig
from spark_log.errors import CorruptRecordError
from spark_log.frame import encode_batch, iter_frames, parse_header
from tests.support.wait import wait_until

pytestmark = pytest.mark.fault

REPO = Path(__file__).resolve().parents[2]
TS = 1_700_000_000_000


def config(flush_messages: int) -> TopicConfig:
    return TopicConfig(segment_bytes=256 * 1024, index_interval_bytes=4096, retention_ms=-1, flush_messages=flush_messages)


@functools.lru_cache(maxsize=4096)
def frame_for(i: int) -> bytes:
    """The ``i``-th frame of the writer's sequence (deterministic bytes)."""
    records = 1 + i % 7
    size = 20 + (i * 7919) % (30_000 if i % 5 == 0 else 400)
    values = [bytes([(i + r) % 251]) * size for r in range(records)]
    batch = pa.record_batch({"value": pa.array(values, pa.binary())})
    return encode_batch(batch, compression=None, timestamp_ms=TS + i, base_sequence=i, producer_id=1, producer_epoch=0)


def writer(directory: str, flush_messages: int) -> None:
    """Append the sequence forever, printing ``<seq> <first> <last>`` after each append returns."""
    log = PartitionLog(Path(directory), config(flush_messages))
    end = log.log_end_offset
    following = parse_header(bytes(log.read(end - 1, max_bytes=1).data)).base_sequence + 1 if end else 0
    out = sys.stdout
    out.write(f"start {following} {end}\n")
    out.flush()
    i = following
    while True:
        info = log.append_as_leader(frame_for(i), leader_epoch=1 + i // 50)
        out.write(f"{i} {info.first_offset} {info.last_offset}\n")
        out.flush()
        i += 1


def stored_sequences(directory: Path, flush_messages: int) -> tuple[list[int], PartitionLog]:
    """Open the log, check every frame is the writer's frame for its sequence, return them."""
    log = PartitionLog(directory, config(flush_messages))
    sequences = []
    offset, expected_offset = 0, 0
    while offset < log.log_end_offset:
        result = log.read(offset, max_bytes=1 << 20, verify=True)
        data = bytes(result.data)
        for position, header in iter_frames(data):
            i = len(sequences)
            assert header.base_sequence == i, f"frame {i} holds sequence {header.base_sequence}: not a clean prefix"
            assert header.base_offset == expected_offset, "offsets are not dense"
            assert header.partition_leader_epoch == 1 + i // 50, f"frame {i} has epoch {header.partition_leader_epoch}"
            assert data[position + 64: position + header.frame_length] == frame_for(i)[64:], f"frame {i} differs"
            sequences.append(i)
            expected_offset = header.next_offset
        offset = result.next_offset
    assert log.log_end_offset == expected_offset
    return sequences, log


@pytest.mark.slow  # a few seconds on an idle machine; each writer start imports pyarrow and spark_log
def test_sigkill_mid_append_keeps_a_clean_prefix_with_every_acknowledged_append(tmp_path: Path) -> None:
    flush_messages, iterations = 0, 6
    rng = random.Random(f"log-crash:{flush_messages}")
    directory = tmp_path / "p"
    acknowledged = -1
    for iteration in range(iterations):
        lines: list[str] = []
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.fault.test_log_crash", str(directory), str(flush_messages)],
            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        reader = threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True)  # type: ignore[arg-type]
        reader.start()
        try:
            target = rng.randint(2, 20)
            wait_until(lambda: len(lines) > target or proc.poll() is not None, timeout=60,
                       message=lambda: f"writer acknowledged {len(lines)} appends")
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else "writer died"
            proc.send_signal(signal.SIGKILL)
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=30)
            reader.join(timeout=30)
            if proc.stderr:
                proc.stderr.close()
        start = lines[0].split()
        assert start[0] == "start" and int(start[1]) >= acknowledged + 1, f"iteration {iteration}: lost acknowledged appends"
        for line in lines[1:]:
            if line.endswith("\n"):  # a line cut by the kill was not acknowledged
                acknowledged = max(acknowledged, int(line.split()[0]))
        sequences, log = stored_sequences(directory, flush_messages)
        try:
            assert len(sequences) >= acknowledged + 1, (
                f"iteration {iteration}: {len(sequences)} frames stored, {acknowledged + 1} acknowledged"
            )
        finally:
            log.close()
    assert acknowledged >= iterations * 2


# --- corruption ----------------------------------------------------------------------


def build(directory: Path, frames: int) -> list[int]:
    """A flushed log of the writer's first ``frames`` frames; returns each frame's base offset."""
    bases = []
    with PartitionLog(directory, config(0)) as log:
        for i in range(frames):
            bases.append(log.append_as_leader(frame_for(i), leader_epoch=1).first_offset)
    return bases


def frames_before_damage(log: PartitionLog, bases: list[int]) -> list[int]:
    """Sequences readable from the start until the first typed read error (each frame
    checked whole: sequence, base offset, epoch and body)."""
    sequences: list[int] = []
    offset = 0
    try:
        while offset < log.log_end_offset:
            result = log.read(offset, max_bytes=1 << 20, verify=True)
            data = bytes(result.data)
            for position, header in iter_frames(data):
                i = len(sequences)
                if (header.base_sequence != i or header.base_offset != bases[i] or header.partition_leader_epoch != 1
                        or data[position + 64: position + header.frame_length] != frame_for(i)[64:]):
                    raise AssertionError(f"frame {i} was served with the wrong content (silent corruption)")
                sequences.append(i)
            offset = result.next_offset
    except CorruptRecordError:
        pass
    return sequences


DAMAGE = [
    (".log", "flip"), (".log", "flip"), (".log", "flip"), (".log", "cut"), (".log", "cut"),
    (".index", "flip"), (".index", "cut"), (".index", "delete"),
    (".timeindex", "flip"), (".timeindex", "cut"), (".timeindex", "delete"),
]


@pytest.mark.parametrize("seed", range(2))
@pytest.mark.parametrize("suffix, action", DAMAGE)
def test_random_damage_never_loses_records_before_it(tmp_path: Path, suffix: str, action: str, seed: int) -> None:
    rng = random.Random(f"log-damage:{suffix}:{action}:{seed}")
    directory = tmp_path / "p"
    count = 120
    bases = build(directory, count)
    candidates = sorted(p for p in directory.iterdir() if p.suffix == suffix and p.stat().st_size > 0)
    target = rng.choice(candidates)
    raw = bytearray(target.read_bytes())
    position = rng.randrange(len(raw))
    if action == "flip":
        raw[position] ^= 1 << rng.randrange(8)
        target.write_bytes(bytes(raw))
    elif action == "cut":
        target.write_bytes(bytes(raw[:position]))
    else:
        target.unlink()
    damaged_from = count  # first sequence that may legitimately be gone
    if target.suffix == ".log":
        damaged_from = _sequence_at_byte(int(target.stem), position)
    log = PartitionLog(directory, config(0))   # recovery truncates at the damage: it never refuses to open
    try:
        sequences = frames_before_damage(log, bases)
        assert sequences == list(range(len(sequences)))
        assert len(sequences) >= damaged_from, (
            f"{action} at byte {position} of {target.name} lost frames {len(sequences)}..{damaged_from - 1} "
            "that lie before the damage"
        )
    finally:
        log.close()


def _sequence_at_byte(segment_base: int, position: int) -> int:
    """The writer's sequence number of the frame holding byte ``position`` of the segment
    whose base offset is ``segment_base`` (frames are deterministic, so recompute)."""
    offset, i = 0, 0
    while offset < segment_base:
        offset += 1 + i % 7
        i += 1
    at = 0
    while True:
        length = len(frame_for(i))
        if at + length > position:
            return i
        at += length
        i += 1


if __name__ == "__main__":
    writer(sys.argv[1], int(sys.argv[2]))
