"""Same-run ceilings for the data-path benches (``client_bench``, ``replication_bench``).

On a shared 2-core machine absolute records/s move with the load, so every figure is also
printed against what the same data reaches, in the same run, without spark-log's code:

- ``ipc_ceiling``: Arrow IPC encode (``spark_log.frame.ipc_message``, no compression) and
  decode (``pyarrow.ipc.read_record_batch``) of the bench's own records, cut into frames
  of about 1 MiB as ``send_batch`` cuts them: the cost any Arrow-IPC wire format pays.
- ``page_cache_ceiling``: appending to a new file in 1 MiB ``pwritev`` calls, as a segment
  grows: what storing each copy costs before any log code runs.  On this kind of virtual
  machine it is not a constant: the first write into memory the guest has not touched for a
  while costs ten times a write into pages it recycles (the host backs a page on first
  touch, and takes back memory the guest leaves free), so it is measured both ways: a new
  file, then another into the pages the first freed.  A log's appends take new pages: on a
  machine with free memory they pay the first price, on a broker host in steady state (page
  cache full, or a memory limit: ``bench.memory_limit``) the second.
- ``disk_write_ceiling``: writing a new file of a few GiB in 1 MiB ``pwritev`` calls and
  ``fdatasync`` at the end: the rate the disk itself sustains once the page cache stops
  absorbing the writes (Linux starts writing dirty pages back at
  ``vm.dirty_background_ratio`` of memory, then throttles the writers at
  ``vm.dirty_ratio``).  A log that writes for longer than the page cache absorbs cannot
  store copies faster than this, whatever its CPU.
- ``cold_code``: what one record's Arrow work costs in a loop (warm) and after a pause as
  long as the gap between records at the latency benches' rate (cold): on this kind of
  virtual machine code that runs after a pause (its CPU idle, other guests' work in the
  caches) costs several times its cost in a loop, and a record at a moderate rate crosses
  every stage of the path cold.
- ``grpc_ceiling``: raw bytes through Python gRPC on loopback, 1 MiB messages, 8 calls in
  flight, to an echo-free sink in another process (``python -m bench.ceilings --serve``):
  what moving the frames' bytes through grpcio costs, in records/s of a given size.

Bench-only code: not part of the product.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from concurrent import futures
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc

from spark_log.frame import Codec, ipc_message

__all__ = ["Ceiling", "ColdCost", "cold_code", "ipc_ceiling", "grpc_ceiling", "page_cache_ceiling",
           "disk_write_ceiling", "random_values", "cpu_s"]

_METHOD = "/bench.Sink/Put"


@dataclass
class Ceiling:
    name: str
    records_per_s: float
    cpu_us_per_record: float


def cpu_s(pid: int) -> float:
    """CPU seconds (user + system) used so far by process ``pid`` (Linux /proc)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def random_values(rows: int, size: int) -> pa.Array:
    """``rows`` values of ``size`` bytes from ``os.urandom`` (incompressible, all distinct)."""
    offsets = pa.py_buffer(np.arange(0, (rows + 1) * size, size, dtype=np.int32))
    return pa.Array.from_buffers(pa.binary(), rows, [None, offsets, pa.py_buffer(os.urandom(rows * size))])


def ipc_ceiling(batch: pa.RecordBatch, seconds: float = 1.0) -> tuple[Ceiling, Ceiling, int]:
    """(encode, decode, wire bytes per record) for ``batch`` cut into ~1 MiB frames."""
    rows_per_frame = max(1, int((1 << 20) * batch.num_rows / max(1, batch.nbytes)))
    slices = [batch.slice(i, rows_per_frame) for i in range(0, batch.num_rows, rows_per_frame)]
    messages = [ipc_message(s, Codec.NONE) for s in slices]
    per_record = sum(m.size for m in messages) // batch.num_rows
    out = []
    for name, work in (("Arrow IPC encode", lambda: [ipc_message(s, Codec.NONE) for s in slices]),
                       ("Arrow IPC decode", lambda: [ipc.read_record_batch(m, batch.schema) for m in messages])):
        records, cpu0, start = 0, time.process_time(), time.perf_counter()
        while time.perf_counter() - start < seconds:
            work()
            records += batch.num_rows
        elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu0
        out.append(Ceiling(name, records / elapsed, cpu / records * 1e6))
    return out[0], out[1], per_record


def _write_new_file(directory: str, name: str, mib: int, *, sync: bool) -> tuple[float, float]:
    """Write ``mib`` MiB of random bytes to a new file in ``directory`` in 1 MiB ``pwritev``
    calls (``sync``: then ``fdatasync``), then delete it: (wall seconds, CPU seconds)."""
    chunk = os.urandom(1 << 20)
    path = os.path.join(directory, name)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        cpu0, start = time.process_time(), time.perf_counter()
        for i in range(mib):
            os.pwritev(fd, [chunk], i << 20)
        if sync:
            os.fdatasync(fd)
        return time.perf_counter() - start, time.process_time() - cpu0
    finally:
        os.close(fd)
        os.unlink(path)


def page_cache_ceiling(record_bytes: int, directory: str, mib: int = 256) -> tuple[Ceiling, Ceiling]:
    """Append ``mib`` MiB of random bytes to a new file in ``directory`` in 1 MiB ``pwritev``
    calls (no fsync) and delete it, twice: records/s and CPU per record of ``record_bytes``
    for the first file (pages as the machine has them free: on this kind of virtual machine
    the host backs each one the guest has not touched for a while on first touch) and for
    the second, written into the pages the first just freed (recycled, as a broker host
    whose page cache is full, or under a memory limit, recycles its oldest pages)."""
    out = []
    for name in ("page cache append, first write", "page cache append, recycled pages"):
        elapsed, cpu = _write_new_file(directory, "page-cache-ceiling.bin", mib, sync=False)
        records = mib * (1 << 20) / record_bytes
        out.append(Ceiling(name, records / elapsed, cpu / records * 1e6))
    return out[0], out[1]


def disk_write_ceiling(record_bytes: int, directory: str, mib: int = 2048) -> Ceiling | None:
    """Write ``mib`` MiB of random bytes to a new file in ``directory`` in 1 MiB ``pwritev``
    calls and ``fdatasync`` it, then delete it: records/s of ``record_bytes`` the disk
    sustains (bytes written / time to durable).  None when the disk has less than twice
    ``mib`` free (the bench then prints no disk bound rather than fill a small disk)."""
    import shutil

    if shutil.disk_usage(directory).free < 2 * mib * (1 << 20):
        return None
    elapsed, cpu = _write_new_file(directory, "disk-write-ceiling.bin", mib, sync=True)
    records = mib * (1 << 20) / record_bytes
    return Ceiling("disk write, sustained", records / elapsed, cpu / records * 1e6)


def _serve(port_file: str) -> None:
    import grpc

    def put(request: bytes, context: object) -> bytes:
        return b""

    handler = grpc.method_handlers_generic_handler("bench.Sink", {"Put": grpc.unary_unary_rpc_method_handler(put)})
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8),
                         options=[("grpc.max_receive_message_length", 64 << 20)])
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    with open(port_file + ".tmp", "w") as f:
        f.write(str(port))
    os.rename(port_file + ".tmp", port_file)
    sys.stdin.read()  # until the parent closes our stdin
    server.stop(0)


class _Sink:
    """The loopback gRPC sink (``_serve``) in a child process, for the ceilings below."""

    def __enter__(self) -> Any:
        import tempfile

        import grpc

        self._tmp = tempfile.TemporaryDirectory()
        port_file = os.path.join(self._tmp.name, "port")
        self.server = subprocess.Popen([sys.executable, "-m", "bench.ceilings", "--serve", port_file],
                                       stdin=subprocess.PIPE)
        deadline = time.monotonic() + 30
        while not os.path.exists(port_file):
            if time.monotonic() > deadline or self.server.poll() is not None:
                raise RuntimeError("the gRPC sink did not start")
            time.sleep(0.02)  # polling a file another process writes
        with open(port_file) as f:
            port = int(f.read())
        self.channel = grpc.insecure_channel(f"127.0.0.1:{port}",
                                             options=[("grpc.max_send_message_length", 64 << 20)])
        return self.channel.unary_unary(_METHOD)

    def __exit__(self, *exc: object) -> None:
        self.channel.close()
        self.server.stdin.close()  # type: ignore[union-attr]
        self.server.wait(timeout=10)
        self._tmp.cleanup()


def grpc_round_trips(rate: int, seconds: float = 2.0, payload_bytes: int = 100) -> list[float]:
    """Milliseconds of bare loopback gRPC unary round trips (``future`` + done callback, as the
    producer issues its calls) of ``payload_bytes``, paced at ``rate`` calls/s: the floor
    under a produce-to-consume latency measured at that rate on the same machine."""
    times: list[float] = []
    with _Sink() as put:
        payload = os.urandom(payload_bytes)
        for _ in range(200):  # connected, and the sink's handler threads started
            put(payload, timeout=30)
        start, i = time.perf_counter(), 0
        calls = []
        while time.perf_counter() - start < seconds:
            due = start + i / rate
            now = time.perf_counter()
            if due > now:
                time.sleep(due - now)  # pacing the load generator
            sent = time.perf_counter()
            call = put.future(payload, timeout=30)
            call.add_done_callback(lambda c, sent=sent: c.exception() is None and times.append(
                (time.perf_counter() - sent) * 1000))
            calls.append(call)
            i += 1
        for call in calls:
            call.exception()  # waits; a failed call (a loaded machine's GOAWAY) is left out of the times
    return times


@dataclass
class ColdCost:
    name: str
    warm_us: float  # median, in a loop
    cold_us: float  # median, each call after a pause


def cold_code(pause_s: float = 0.0005, samples: int = 300) -> list[ColdCost]:
    """Median microseconds of one record's Arrow work warm and after ``pause_s`` of sleep
    (module docstring): the producer's encode through pyarrow and through
    ``bytes_message`` (what the producer uses), and the consumer's decode of the frame."""
    from spark_log import bytes_message
    from spark_log._records import add_reserved_columns, bytes_batch
    from spark_log.arrays import int64_array
    from spark_log.frame import decode_batch, encode_message, parse_header, record_offsets
    from spark_log.schemas import BYTES_SCHEMA

    stamps = [int(time.time() * 1000)]

    def frame(message: Any) -> bytes:
        return encode_message(message, codec=Codec.LZ4, record_count=1, first_timestamp=stamps[0],
                              max_timestamp=stamps[0])

    stored = frame(bytes_message.encode(None, [b"0123456789"], stamps, Codec.LZ4))

    def decode() -> None:
        buffer = pa.py_buffer(stored)
        batch = decode_batch(buffer, BYTES_SCHEMA, verify=True)
        offsets = int64_array(record_offsets(memoryview(buffer), parse_header(memoryview(buffer))))
        add_reserved_columns(batch, topic="t", partition=0, offsets=offsets, timestamps=None)

    stages = [("producer encode, pyarrow (bytes_batch + ipc_message)",
               lambda: frame(ipc_message(bytes_batch(None, [b"0123456789"], None, stamps), Codec.LZ4))),
              ("producer encode, direct (bytes_message, the producer's)",
               lambda: frame(bytes_message.encode(None, [b"0123456789"], stamps, Codec.LZ4))),
              ("consumer decode (decode_batch + reserved columns)", decode)]
    out = []
    for name, run in stages:
        medians = []
        for pause in (0.0, pause_s):
            times = []
            for _ in range(samples):
                if pause:
                    time.sleep(pause)
                start = time.perf_counter()
                run()
                times.append((time.perf_counter() - start) * 1e6)
            medians.append(float(np.median(times)))
        out.append(ColdCost(name, *medians))
    return out


def send_loop_ceiling(values: list[bytes], seconds: float = 1.0) -> Ceiling:
    """Records/s of a bare Python loop handing each value to a function with ``send``'s
    signature that appends it to a list: the most a per-record Python API can do here."""
    out: list[Any] = []

    def send(topic: str, value: bytes, key: Any = None, headers: Any = None, partition: Any = None,
             timestamp: Any = None) -> None:
        out.append(value)

    records, cpu0, start = 0, time.process_time(), time.perf_counter()
    while time.perf_counter() - start < seconds:
        for value in values:
            send("t", value, partition=0)
        records += len(values)
        out.clear()
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu0
    return Ceiling("bare Python send loop", records / elapsed, cpu / records * 1e6)


def grpc_ceiling(record_bytes: int, seconds: float = 1.0, message_bytes: int = 1 << 20) -> Ceiling:
    """Records/s of ``record_bytes`` each through loopback gRPC (client + server CPU per record)."""
    import tempfile

    import grpc

    with tempfile.TemporaryDirectory() as tmp:
        port_file = os.path.join(tmp, "port")
        server = subprocess.Popen([sys.executable, "-m", "bench.ceilings", "--serve", port_file],
                                  stdin=subprocess.PIPE)
        try:
            deadline = time.monotonic() + 30
            while not os.path.exists(port_file):
                if time.monotonic() > deadline or server.poll() is not None:
                    raise RuntimeError("the gRPC sink did not start")
                time.sleep(0.02)  # polling a file another process writes
            with open(port_file) as f:
                port = int(f.read())
            channel = grpc.insecure_channel(f"127.0.0.1:{port}", options=[("grpc.max_send_message_length", 64 << 20)])
            put = channel.unary_unary(_METHOD)
            payload = os.urandom(message_bytes)
            put(payload, timeout=30)
            sent, calls = 0, []
            cpu0, server0, start = time.process_time(), cpu_s(server.pid), time.perf_counter()
            while time.perf_counter() - start < seconds:
                calls.append(put.future(payload, timeout=30))
                sent += message_bytes
                if len(calls) >= 8:
                    calls.pop(0).result()
            for call in calls:
                call.result()
            elapsed = time.perf_counter() - start
            cpu = time.process_time() - cpu0 + cpu_s(server.pid) - server0
            channel.close()
        finally:
            server.stdin.close()  # type: ignore[union-attr]
            server.wait(timeout=10)
    records = sent / record_bytes
    return Ceiling("loopback gRPC raw bytes", records / elapsed, cpu / records * 1e6)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--serve":
        _serve(sys.argv[2])
    else:
        values = random_values(200_000, 100)
        batch = pa.record_batch({"value": values})
        enc, dec, per = ipc_ceiling(batch)
        for c in (enc, dec, grpc_ceiling(per)):
            print(f"{c.name:28s} {c.records_per_s:14,.0f} rec/s  {c.cpu_us_per_record:.3f} us CPU/record")
