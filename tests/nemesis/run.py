"""One nemesis run: a randomised fault schedule against a cluster in network namespaces.

``one_run(seed)``: 3 to 5 broker+controller processes (``NetnsCluster``: each in its own
network namespace; one of them keeps its data on a small tmpfs), a topic of 1 to 3
partitions (RF 3, ``min.insync.replicas`` 2), two acks=all writer processes in namespaces of
their own (``tests.support.ns_client``).  For ``fault_s`` seconds the nemesis strikes every
1-3 s with a seeded choice of:

- ``kill``: kill -9 a broker, restarted 1-3 s later;
- ``pause``: SIGSTOP a broker for 1-4 s;
- ``isolate`` / ``cut_pair`` / ``split`` / ``cut_client``: real partitions (nftables drops):
  one broker from everyone, two brokers from each other, a minority from a majority, a
  writer from a broker;
- ``full_disk``: fill the tmpfs broker's disk to the last 128 KiB for 2-5 s (ENOSPC);
- ``slow_disk``: slow a broker's fsyncs (100-800 ms each) and writes through the file
  layer (``SPARK_LOG_DISK_FAULTS``) for 2-5 s;
- ``heal``: end every partition.

Then everything heals (resumed, restarted, links and disks back), the cluster must be
healthy with full ISRs and the writers must go on (else ``liveness``), the writers stop,
every partition is read to its end, and the histories and the final reads go through the
checker (``tests/checkers/log_history.py``); every replica must hold the final read
(else ``replica-divergence``).  A run that breaks is an anomaly too (``harness``).  Runs
that found anomalies keep their directory (logs, data, histories) under ``keep``.
"""
from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from spark_log import Admin, Consumer
from tests.checkers.log_history import FinalRead, Op, check
from tests.support.netns import NetworkLab
from tests.support.netns_cluster import NetnsCluster
from tests.support.ns_client import read_history, read_times
from tests.support.replica_logs import read_replica, replica_dir
from tests.support.wait import wait_until

from .ledger import Row

__all__ = ["one_run", "KINDS"]

TOPIC = "nemesis"
KINDS = ("kill", "pause", "isolate", "cut_pair", "split", "cut_client", "full_disk", "slow_disk", "heal")
CONFIG = {"heartbeat_interval_ms": 200, "session_timeout_ms": 2000, "replica_lag_time_max_ms": 1500}
REPO = Path(__file__).resolve().parents[2]
TMPFS_BYTES = 96 << 20


@dataclass
class _Run:
    seed: int
    rng: random.Random
    lab: NetworkLab
    cluster: NetnsCluster
    tmpfs_broker: int
    tmpfs: Path
    disk_faults: Path
    faults: dict[str, int] = field(default_factory=dict)
    log: list[str] = field(default_factory=list)
    pending: list[tuple[float, str, Callable[[], None]]] = field(default_factory=list)
    slow: dict[str, dict[str, int]] = field(default_factory=dict)
    started: float = field(default_factory=time.monotonic)

    def note(self, kind: str, text: str) -> None:
        self.faults[kind] = self.faults.get(kind, 0) + 1
        self.log.append(f"{time.monotonic() - self.started:7.2f}s {text}")

    def later(self, delay_s: float, what: str, action: Callable[[], None]) -> None:
        self.pending.append((time.monotonic() + delay_s, what, action))

    def due(self) -> None:
        now = time.monotonic()
        for item in sorted([p for p in self.pending if p[0] <= now], key=lambda p: p[0]):
            self.pending.remove(item)
            self.log.append(f"{now - self.started:7.2f}s {item[1]}")
            item[2]()

    # -- the faults --------------------------------------------------------------------------------

    def strike(self) -> None:
        getattr(self, f"_{self.rng.choice(KINDS)}")()

    def _broker(self) -> int:
        return self.rng.choice(self.cluster.ids)

    def _kill(self) -> None:
        victim = self._broker()
        if not self.cluster.alive(victim):
            return
        self.cluster.kill(victim)
        delay = self.rng.uniform(1, 3)
        self.note("kill", f"kill -9 broker {victim}, restart in {delay:.1f}s")
        self.later(delay, f"restart broker {victim}", lambda: self.cluster.start(victim))

    def _pause(self) -> None:
        victim = self._broker()
        if not self.cluster.alive(victim) or victim in self.cluster.paused:
            return
        self.cluster.pause(victim)
        delay = self.rng.uniform(1, 4)
        self.note("pause", f"SIGSTOP broker {victim} for {delay:.1f}s")
        self.later(delay, f"SIGCONT broker {victim}", lambda: self.cluster.resume(victim))

    def _isolate(self) -> None:
        victim = self._broker()
        self.lab.isolate(f"n{victim}")
        self.note("isolate", f"isolate broker {victim}")

    def _cut_pair(self) -> None:
        a, b = self.rng.sample(self.cluster.ids, 2)
        self.lab.cut(f"n{a}", f"n{b}")
        self.note("cut_pair", f"cut brokers {a}<->{b}")

    def _split(self) -> None:
        ids = list(self.cluster.ids)
        self.rng.shuffle(ids)
        minority = ids[: (len(ids) - 1) // 2] or ids[:1]
        for a in minority:
            for b in ids:
                if b not in minority:
                    self.lab.cut(f"n{a}", f"n{b}")
        self.note("split", f"split {sorted(minority)} | {sorted(set(ids) - set(minority))}")

    def _cut_client(self) -> None:
        client = self.rng.choice(["c1", "c2"])
        victim = self._broker()
        self.lab.cut(client, f"n{victim}")
        self.note("cut_client", f"cut writer {client} from broker {victim}")

    def _heal(self) -> None:
        self.lab.heal()
        self.note("heal", "heal the network")

    def _full_disk(self) -> None:
        filler = self.tmpfs / "filler"
        if filler.exists():
            return
        stat = os.statvfs(self.tmpfs)
        free = stat.f_bavail * stat.f_frsize
        size = max(0, free - (128 << 10))
        with open(filler, "wb") as out:
            out.truncate(0)
            chunk = b"\0" * (1 << 20)
            written = 0
            try:
                while written + len(chunk) <= size:
                    out.write(chunk)
                    written += len(chunk)
                out.write(b"\0" * (size - written))
            except OSError:
                pass   # the broker filled some of it meanwhile: the disk is full either way
        delay = self.rng.uniform(2, 5)
        self.note("full_disk", f"disk of broker {self.tmpfs_broker} full ({size >> 20} MiB filler) for {delay:.1f}s")
        self.later(delay, f"free broker {self.tmpfs_broker}'s disk", lambda: filler.unlink(missing_ok=True))

    def _slow_disk(self) -> None:
        victim = str(self._broker())
        if victim in self.slow:
            return
        self.slow[victim] = {"fsync_ms": self.rng.randint(100, 800), "write_ms": self.rng.randint(0, 20)}
        self._write_disk_faults()
        delay = self.rng.uniform(2, 5)
        self.note("slow_disk", f"slow disk on broker {victim} {self.slow[victim]} for {delay:.1f}s")

        def restore() -> None:
            self.slow.pop(victim, None)
            self._write_disk_faults()
        self.later(delay, f"disk of broker {victim} back to speed", restore)

    def _write_disk_faults(self) -> None:
        tmp = self.disk_faults.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.slow))
        os.replace(tmp, self.disk_faults)

    def heal_all(self) -> None:
        for _, _, action in sorted(self.pending, key=lambda p: p[0]):
            action()
        self.pending.clear()
        self.lab.heal()
        for i in self.cluster.ids:
            if not self.cluster.alive(i):
                self.cluster.start(i)
            self.cluster.resume(i)
        (self.tmpfs / "filler").unlink(missing_ok=True)
        self.slow.clear()
        self._write_disk_faults()
        self.log.append(f"{time.monotonic() - self.started:7.2f}s heal all")


def _full_isr(admin: Admin) -> bool:
    return all(len(p.isr) == 3 and p.leader is not None
               for p in admin.describe_topic(TOPIC, live=False).partitions.values())


def _acked(path: Path) -> int:
    return sum(ok for _, ok in read_times(path)) if path.exists() else 0


def one_run(seed: int, *, fault_s: float = 20.0, brokers: int | None = None, keep: Path | None = None,
            work_root: Path | None = None) -> Row:
    """One run (module docstring); returns its ledger row (anomalies counted by kind)."""
    rng = random.Random(f"nemesis:{seed}")
    brokers = brokers or rng.choice([3, 4, 5])
    partitions = rng.choice([1, 2, 3])
    work = Path(tempfile.mkdtemp(prefix=f"nemesis-{seed}-", dir=work_root))
    tmpfs = work / "tmpfs"
    tmpfs.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={TMPFS_BYTES}", "tmpfs", str(tmpfs)], check=True,
                   capture_output=True, timeout=30)
    disk_faults = work / "disk-faults.json"
    disk_faults.write_text("{}")
    anomalies: dict[str, int] = {}
    details: list[str] = []
    acked = 0
    started = time.monotonic()
    lab = NetworkLab()
    tmpfs_broker = rng.randint(1, brokers)
    cluster = NetnsCluster(lab, work, brokers=brokers, config=CONFIG, disk_faults=disk_faults,
                           data_roots={tmpfs_broker: tmpfs})
    run = _Run(seed, rng, lab, cluster, tmpfs_broker, tmpfs, disk_faults)
    writers: list[subprocess.Popen[bytes]] = []
    outs = [work / "c1.jsonl", work / "c2.jsonl"]
    try:
        cluster.start_all()
        cluster.wait_healthy(timeout_s=120)
        with Admin(cluster.bootstrap) as admin:
            admin.create_topic(TOPIC, partitions=partitions, replication_factor=3, config={"min.insync.replicas": "2"})
            wait_until(lambda: _full_isr(admin), timeout=60, message="full ISRs")
        for name, out in zip(("c1", "c2"), outs):
            host = lab.add(name)
            writers.append(lab.popen(host, [sys.executable, "-m", "tests.support.ns_client", cluster.bootstrap, TOPIC,
                                            f"{name}-", str(out), "--batch", "5", "--pause", "0.1"], cwd=str(REPO),
                                     stdout=subprocess.DEVNULL, stderr=open(work / f"{name}.err", "wb")))
        wait_until(lambda: all(_acked(o) >= 5 for o in outs), timeout=60, message="first acknowledgements")
        end = time.monotonic() + fault_s
        while time.monotonic() < end:
            run.strike()
            pause_until = time.monotonic() + rng.uniform(1.0, 3.0)
            while time.monotonic() < min(pause_until, end):
                run.due()
                time.sleep(0.05)   # the nemesis's own pace between strikes
        run.heal_all()
        try:
            cluster.wait_healthy(timeout_s=90)
            with Admin(cluster.bootstrap) as admin:
                wait_until(lambda: _full_isr(admin), timeout=90, message="full ISRs after healing")
            before = [_acked(o) for o in outs]
            wait_until(lambda: all(_acked(o) > b for o, b in zip(outs, before)), timeout=60,
                       message="both writers go on after healing")
        except (AssertionError, TimeoutError, RuntimeError) as exc:
            anomalies["liveness"] = 1
            details.append(f"liveness: {exc}")
    except Exception as exc:  # noqa: BLE001 - a run that breaks is recorded, not lost
        anomalies["harness"] = 1
        details.append("harness: " + "".join(traceback.format_exception(exc))[-3000:])
    finally:
        for writer in writers:
            writer.terminate()
        for writer in writers:
            try:
                writer.wait(timeout=60)
            except subprocess.TimeoutExpired:
                writer.kill()
                writer.wait(timeout=30)
    try:
        if "harness" not in anomalies and "liveness" not in anomalies:
            history: list[Op] = [op for name, out in zip(("c1", "c2"), outs) for op in read_history(out, name)]
            acked = sum(1 for op in history if getattr(op, "ok", False))
            finals = _final_reads(cluster, partitions, details)
            found = check([*history, *finals])
            for anomaly in found.items:
                anomalies[anomaly.kind] = anomalies.get(anomaly.kind, 0) + 1
            if found:
                details.append(str(found))
            diverged = _replicas_diverge(cluster, finals)
            if diverged:
                anomalies["replica-divergence"] = 1
                details.append(diverged)
    except Exception as exc:  # noqa: BLE001 - a run that breaks is recorded, not lost
        anomalies["harness"] = 1
        details.append("harness: " + "".join(traceback.format_exception(exc))[-3000:])
    finally:
        cluster.down()
        lab.close()
        subprocess.run(["umount", "-l", str(tmpfs)], capture_output=True, timeout=30)
    kept = ""
    (work / "faults.log").write_text("\n".join(run.log) + "\n\n" + "\n".join(details) + "\n")
    if anomalies and keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        target = keep / work.name
        shutil.move(str(work), target)
        kept = str(target)
    else:
        shutil.rmtree(work, ignore_errors=True)
    return Row(seed=seed, brokers=brokers, partitions=partitions, seconds=time.monotonic() - started,
               faults=dict(run.faults), acked=acked, anomalies=anomalies, kept=kept)


def _final_reads(cluster: NetnsCluster, partitions: int, details: list[str]) -> list[FinalRead]:
    """Every partition read from offset 0 to the end "latest" names; ``details`` gets the
    ends and the leaders (epoch) they came from, for a run that finds anomalies."""
    with Admin(cluster.bootstrap) as admin:
        ends = admin.list_offsets(TOPIC, "latest")
        leaders = {p: (d.leader, d.leader_epoch) for p, d in admin.describe_topic(TOPIC, live=False).partitions.items()}
    details.append(f"final reads: ends {ends}, leaders (id, epoch) {leaders}")
    records: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(partitions)}
    with Consumer(cluster.bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([(TOPIC, p) for p in range(partitions)])

        def done() -> bool:
            for record in consumer.poll(0.5):
                records[record.partition].append((record.offset, record.value))
            return all(ends[p] == 0 or (records[p] and records[p][-1][0] >= ends[p] - 1) for p in records)

        wait_until(done, timeout=90, message=f"final reads up to {ends}")
    return [FinalRead(p, tuple(r)) for p, r in records.items()]


def _replicas_diverge(cluster: NetnsCluster, finals: list[FinalRead]) -> str:
    def same() -> bool:
        return all(read_replica(replica_dir(cluster.data_dir(i), TOPIC, int(str(f.partition)))) == list(f.records)
                   for f in finals for i in cluster.ids
                   if replica_dir(cluster.data_dir(i), TOPIC, int(str(f.partition))).exists())
    try:
        wait_until(same, timeout=60, message="every replica holds the final read")
        return ""
    except AssertionError as exc:
        return str(exc)
