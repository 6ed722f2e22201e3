"""Security benchmark: produce and consume throughput with TLS on against off, in one run.

    python -m bench.security_bench [--dir DIR] [--mib 64] [--rounds 3]

Starts three one-node clusters side by side (RF=1; ``bench/`` never runs in the tests):

- ``plaintext``: no TLS (the peer every ratio is against);
- ``tls``: TLS on the listener (``dev up --tls``: principal ``User:ANONYMOUS``);
- ``tls+scram+acl``: SASL_SSL with a SCRAM session per broker and the authorizer on (the
  client's user has literal READ/WRITE ACLs on its topic): TLS plus what every RPC then
  pays for authentication and authorization.

and measures, rounds interleaved across the three (so load from other users of a shared
machine falls on all of them alike), the best of ``--rounds``:

- ``send_batch`` of 1 KiB incompressible values (``--mib`` MiB per round, compression
  off, acks=all): MiB/s until acknowledged;
- per-record ``send()`` of 100-byte values (linger 5 ms): records/s (many small RPCs:
  the per-call cost of the interceptor and of TLS records);
- ``poll_arrow`` of what ``send_batch`` wrote, from the beginning: MiB/s;

plus the client's and broker's CPU seconds per GiB moved.  Figures print as ratios to the
plaintext cluster's in the same run.  Bounded to a few minutes; asserts nothing.
"""
from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from bench.ceilings import random_values
from bench.client_bench import CpuMeter
from brokers.launcher.local import LocalCluster
from brokers.launcher.secure import DevSecurity
from spark_log import AclBinding, Admin, ClientSecurity, Consumer, Producer
from spark_log.acls import Operation, PatternType, Permission, ResourceType

MiB = 1024 * 1024
VALUE = 1024


@dataclass
class Setup:
    name: str
    security: DevSecurity | None
    cluster: LocalCluster | None = None
    client: ClientSecurity | None = None
    results: dict[str, list[float]] = field(default_factory=dict)
    cpu: dict[str, list[float]] = field(default_factory=dict)

    def best(self, key: str) -> float:
        return max(self.results.get(key, [0.0]))


def start(setup: Setup, root: Path) -> None:
    cluster = LocalCluster(root / setup.name, brokers=1, security=setup.security)
    cluster.up(timeout_s=120)
    setup.cluster = cluster
    admin_security = ClientSecurity.from_file(cluster.client_properties) if cluster.security.tls else None
    setup.client = admin_security
    with Admin(cluster.bootstrap, security=admin_security) as admin:
        for topic in ("batch", "small"):
            admin.create_topic(topic, config={"max.message.bytes": 64 << 20, "segment.bytes": 1 << 30})
        if cluster.security.sasl:
            admin.add_user("bench", "bench-password")
            admin.create_acls([AclBinding(ResourceType.TOPIC, t, PatternType.LITERAL, "User:bench", "*", op,
                                          Permission.ALLOW)
                               for t in ("batch", "small") for op in (Operation.READ, Operation.WRITE)])
            assert admin_security is not None and admin_security.ca_file is not None
            setup.client = ClientSecurity(protocol="SASL_SSL", ca_file=admin_security.ca_file, username="bench",
                                          password="bench-password")


def produce(setup: Setup, table: pa.Table, mib: int) -> tuple[float, int]:
    assert setup.cluster is not None
    rounds = max(1, mib * MiB // (table.num_rows * VALUE))
    with Producer(setup.cluster.bootstrap, security=setup.client, compression="none", batch_size=1 << 20,
                  max_in_flight=8) as producer:
        producer.send_batch("batch", table.slice(0, 100), partition=0)
        producer.flush()
        started = time.perf_counter()
        for _ in range(rounds):
            producer.send_batch("batch", table, partition=0)
        producer.flush()
        elapsed = time.perf_counter() - started
    sent = rounds * table.num_rows
    return sent * VALUE / MiB / elapsed, sent


def send_small(setup: Setup, seconds: float) -> float:
    assert setup.cluster is not None
    value = bytes(range(100))
    with Producer(setup.cluster.bootstrap, security=setup.client, compression="none", linger_ms=5,
                  batch_size=64 * 1024) as producer:
        sent = 0
        started = time.perf_counter()
        while time.perf_counter() - started < seconds:
            for _ in range(5_000):
                producer.send("small", value, partition=0)
            sent += 5_000
        producer.flush()
        return sent / (time.perf_counter() - started)


def consume(setup: Setup, start_offset: int, count: int) -> float:
    assert setup.cluster is not None
    with Consumer(setup.cluster.bootstrap, security=setup.client, fetch_max_bytes=64 << 20,
                  max_partition_fetch_bytes=32 << 20) as consumer:
        consumer.assign([("batch", 0)])
        consumer.seek("batch", 0, start_offset)
        rows = nbytes = 0
        started = time.perf_counter()
        while rows < count:
            if time.perf_counter() - started > 600:
                raise TimeoutError(f"{setup.name}: read {rows} of {count} records in 10 minutes")
            for batch in consumer.poll_arrow(1.0):
                rows += batch.num_rows
                nbytes += batch.column("value").nbytes
        return nbytes / MiB / (time.perf_counter() - started)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default=None)
    parser.add_argument("--mib", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--small-seconds", type=float, default=3.0)
    args = parser.parse_args(argv)
    root = Path(args.dir or tempfile.mkdtemp(prefix="security-bench-"))
    setups = [Setup("plaintext", None), Setup("tls", DevSecurity(tls=True)),
              Setup("tls+scram+acl", DevSecurity(tls=True, sasl=True, authorizer=True))]
    table = pa.table({"value": random_values(16_384, VALUE)})
    offsets = {s.name: 100 for s in setups}  # after produce()'s 100-record warm-up
    try:
        for setup in setups:
            start(setup, root)
        for _ in range(args.rounds):
            for setup in setups:
                assert setup.cluster is not None
                meter = CpuMeter(setup.cluster.nodes[0].pid)
                mib_s, sent = produce(setup, table, args.mib)
                client_s, broker_s = meter.used()
                setup.results.setdefault("produce", []).append(mib_s)
                setup.cpu.setdefault("produce", []).append((client_s + broker_s) / (sent * VALUE / (1 << 30)))
                meter = CpuMeter(setup.cluster.nodes[0].pid)
                setup.results.setdefault("consume", []).append(consume(setup, offsets[setup.name], sent))
                client_s, broker_s = meter.used()
                setup.cpu.setdefault("consume", []).append((client_s + broker_s) / (sent * VALUE / (1 << 30)))
                offsets[setup.name] += sent
                setup.results.setdefault("send", []).append(send_small(setup, args.small_seconds))
    finally:
        for setup in setups:
            if setup.cluster is not None:
                setup.cluster.down()
        if not args.dir:
            shutil.rmtree(root, ignore_errors=True)
    peer = setups[0]
    print(f"security bench: one node per setup, RF=1, best of {args.rounds} interleaved rounds, "
          f"{args.mib} MiB of 1 KiB incompressible values per produce round")
    print(f"{'setup':<16} {'produce MiB/s':>14} {'vs plain':>9} {'consume MiB/s':>14} {'vs plain':>9} "
          f"{'send() rec/s':>13} {'vs plain':>9} {'CPU s/GiB prod':>15} {'CPU s/GiB cons':>15}")
    for setup in setups:
        print(f"{setup.name:<16} {setup.best('produce'):>14,.1f} {setup.best('produce') / peer.best('produce'):>9.2f} "
              f"{setup.best('consume'):>14,.1f} {setup.best('consume') / peer.best('consume'):>9.2f} "
              f"{setup.best('send'):>13,.0f} {setup.best('send') / peer.best('send'):>9.2f} "
              f"{min(setup.cpu['produce']):>15.1f} {min(setup.cpu['consume']):>15.1f}")


if __name__ == "__main__":
    main()
