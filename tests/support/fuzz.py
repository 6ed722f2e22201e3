"""What the fuzz tests of the brokers' two APIs share (``tests/fault/test_broker_fuzz.py``:
gRPC; ``test_data_listener_fuzz.py``: the data listener): real frames and damaged ones, the
examples' settings, and the sentinel records written before the fuzzing and checked after it."""
from __future__ import annotations

import os
import struct
from pathlib import Path

import pyarrow as pa
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from spark_log import Admin, Consumer, Producer
from spark_log.frame import HEADER_SIZE, crc32c, encode_batch
from tests.support.replica_logs import read_replica, replica_dir

__all__ = ["ABSURD", "FIELDS", "SENTINELS", "assert_sentinels_kept", "damaged_frames", "frame", "fuzz_settings",
           "write_sentinels"]

_EXAMPLES_VARIABLE = "SPARK_LOG_FUZZ_EXAMPLES"


def fuzz_settings(examples: int) -> settings:
    """``examples`` fixed examples per test (the suite: the same ones every run), or, with
    ``SPARK_LOG_FUZZ_EXAMPLES`` set (``make fuzz``), that many random ones."""
    wanted = os.environ.get(_EXAMPLES_VARIABLE)
    return settings(max_examples=int(wanted) if wanted else examples, deadline=None, derandomize=not wanted,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


def frame(values: list[bytes]) -> bytes:
    batch = pa.record_batch({"key": pa.array([None] * len(values), pa.binary()), "value": pa.array(values, pa.binary()),
                             "headers": pa.array([[]] * len(values), pa.list_(pa.struct([("key", pa.string()),
                                                                                          ("value", pa.binary())]))),
                             "timestamp": pa.array([1_700_000_000_000] * len(values), pa.timestamp("ms"))})
    return encode_batch(batch, compression="lz4")


FIELDS = {  # header field -> (offset, struct format)
    "base_offset": (0, "<q"), "length": (8, "<i"), "epoch": (12, "<i"), "attributes": (24, "<H"),
    "producer_epoch": (26, "<h"), "record_count": (28, "<i"), "first_timestamp": (32, "<q"),
    "max_timestamp": (40, "<q"), "producer_id": (48, "<q"), "base_sequence": (56, "<i"), "schema_id": (60, "<i"),
}
ABSURD = st.sampled_from([0, -1, 1, 2**31 - 1, -(2**31), 2**15 - 1, -(2**15), 2**62, -(2**63), 7, 65535])


@st.composite
def damaged_frames(draw: st.DrawFn) -> bytes:
    damaged = bytearray(frame(draw(st.lists(st.binary(max_size=64), min_size=1, max_size=5))))
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["flip", "cut", "grow", "field", "field", "field"]))
        if kind == "flip" and damaged:
            at = draw(st.integers(0, len(damaged) - 1))
            damaged[at] ^= draw(st.integers(1, 255))
        elif kind == "cut":
            del damaged[draw(st.integers(0, len(damaged))):]
        elif kind == "grow":
            damaged += draw(st.binary(min_size=1, max_size=128))
        elif len(damaged) >= HEADER_SIZE:
            name = draw(st.sampled_from(sorted(FIELDS)))
            at, fmt = FIELDS[name]
            value = draw(ABSURD)
            size = struct.calcsize(fmt)
            if fmt.islower():   # signed
                low, high = -(2 ** (8 * size - 1)), 2 ** (8 * size - 1) - 1
            else:
                low, high = 0, 2 ** (8 * size) - 1
            struct.pack_into(fmt, damaged, at, max(low, min(high, value)))
    if len(damaged) >= HEADER_SIZE and draw(st.integers(0, 3)):
        struct.pack_into("<I", damaged, 20, crc32c(memoryview(damaged)[24:]))   # mostly: get past the CRC check
    return bytes(damaged)


SENTINELS = [f"sentinel-{i}".encode() for i in range(40)]


def write_sentinels(bootstrap: str, topic: str) -> list[tuple[int, bytes]]:
    """``topic`` created with 2 partitions, ``SENTINELS`` written to partition 0 with acks=all:
    ``(offset, value)`` of each."""
    with Admin(bootstrap) as admin:
        admin.create_topic(topic, partitions=2, replication_factor=1)
    with Producer(bootstrap, acks="all", linger_ms=1) as producer:
        return [(producer.send(topic, v, partition=0).result(timeout=30)[1], v) for v in SENTINELS]


def assert_sentinels_kept(bootstrap: str, node_dir: Path, topic: str, stored: list[tuple[int, bytes]]) -> None:
    """After the fuzzing: every sentinel is read back at its offset, byte for byte; both
    partitions' logs read back as valid frames (CRCs) with dense offsets, the sentinels first."""
    seen: dict[int, bytes] = {}
    with Consumer(bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([(topic, 0)])
        for _ in range(300):
            for record in consumer.poll(0.2):
                seen[record.offset] = record.value
            if len(seen) >= len(stored) and max(seen) >= stored[-1][0] and not consumer.poll(0.2):
                break
    missing = [(o, v) for o, v in stored if seen.get(o) != v]
    assert not missing, f"the fuzzing lost stored records: {missing[:5]}"
    for partition in (0, 1):
        records = read_replica(replica_dir(node_dir, topic, partition))
        assert [o for o, _ in records] == list(range(len(records))), f"partition {partition}: offsets not dense"
    assert read_replica(replica_dir(node_dir, topic, 0))[:len(stored)] == stored
