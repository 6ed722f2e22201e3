"""The JVM connector's LZ4 frame decoder (``Lz4Codecs.decodeFrames``) against pyarrow's frames.

A read task decodes every compressed Arrow buffer of a frame with it: pyarrow writes LZ4
frames of linked 64 KiB blocks (matches reach into earlier blocks), stored blocks where the
bytes do not compress and compressed ones where they do, often both in one buffer.  Each
buffer here is compressed by pyarrow (``pa.compress``, the codec Arrow IPC uses) and decoded
by the JVM from off-heap memory as a task does; the bytes must come back exactly.  Damaged
frames must be refused with an exception, whatever the damage.
"""
from __future__ import annotations

import random
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from py4j.protocol import Py4JJavaError

from tests.support.jvm import require_jvm


def _buffers() -> dict[str, bytes]:
    rng = np.random.default_rng(7)
    n = 200_000
    offsets = (np.arange(n + 1, dtype=np.int32) * 100).tobytes()   # a binary column's offsets: tiny matches
    timestamps = (1_700_000_000_000 + np.cumsum(rng.integers(0, 3, n))).astype(np.int64).tobytes()
    noise = rng.bytes(300_000)                                        # stored blocks only
    mixed = b"".join(rng.bytes(20_000) + bytes(20_000) for _ in range(10))  # stored and compressed blocks, linked
    words = b" ".join(random.Random(3).choice([b"spark", b"log", b"arrow", b"kafka"]) for _ in range(150_000))
    return {"empty": b"", "one byte": b"x", "zeros": bytes(1 << 20), "offsets": offsets, "timestamps": timestamps,
            "noise": noise, "mixed": mixed, "words": words, "short": b"abcabcabcabcabcabcabc" * 3,
            "big offsets": (np.arange(2_000_001, dtype=np.int32) * 7).tobytes()}


BUFFERS = _buffers()


@pytest.fixture(scope="module")
def codecs(spark: Any) -> Any:
    require_jvm()
    return spark.sparkContext._jvm.io.sparklog.spark.Lz4Codecs


@pytest.mark.parametrize("name", sorted(BUFFERS))
def test_every_pyarrow_frame_decodes_to_its_bytes(codecs: Any, name: str) -> None:
    data = BUFFERS[name]
    frame = pa.compress(data, codec="lz4", asbytes=True)
    assert bytes(codecs.decoded(bytearray(frame), len(data))) == data


def test_a_frame_declared_longer_or_shorter_than_it_holds_is_refused(codecs: Any) -> None:
    data = BUFFERS["offsets"]
    frame = bytearray(pa.compress(data, codec="lz4", asbytes=True))
    for length in (len(data) - 1, len(data) + 1):
        with pytest.raises(Py4JJavaError):
            codecs.decoded(frame, length)


def test_damaged_frames_are_refused_or_decode_without_harm(codecs: Any) -> None:
    """Flipped bytes and cuts anywhere: an exception, or (a flip inside a literal run) bytes of
    the declared length; the JVM must never read or write outside its buffers."""
    rng = random.Random(11)
    refused = 0
    for name in ("offsets", "mixed", "words", "timestamps"):
        data = BUFFERS[name]
        frame = pa.compress(data, codec="lz4", asbytes=True)
        for _ in range(15):
            damaged = bytearray(frame)
            if rng.random() < 0.3:
                del damaged[rng.randrange(len(damaged)):]
            else:
                for _ in range(rng.randint(1, 4)):
                    damaged[rng.randrange(len(damaged))] ^= rng.randint(1, 255)
            try:
                out = bytes(codecs.decoded(damaged, len(data)))
            except Py4JJavaError:
                refused += 1
                continue
            assert len(out) == len(data)
    assert refused > 15, f"only {refused} of 60 damaged frames were refused"
