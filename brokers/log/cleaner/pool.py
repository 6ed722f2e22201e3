"""``CleanerPool``: a broker's cleaner threads (Kafka's LogCleaner and its CleanerThreads).

``threads`` threads share one ``Throttler`` (``io_max_bytes_per_second`` for reads and
writes together) and split the dedupe buffer (``dedupe_buffer_bytes / threads`` of offset
map each).  A thread repeatedly takes the most urgent log nobody else is cleaning (a
committed plan waiting to be applied first, then the dirtiest compacted log this broker
leads: ``Cleanable.compaction_priority``) and runs one job on it (``Cleanable.clean``);
with nothing to do it waits ``backoff_ms`` or until ``wake()`` (a plan arrived, a clean was
asked for).  A job that fails is logged and its log skipped for one backoff.

``Cleanable`` is what a hosted replica offers (``brokers.partition.Partition``); the pool
finds them through ``logs()`` and each topic's ``KeySpec`` through ``spec_for``.  Time
(backoff, throttling) comes from the injected clock; waits end early on ``stop``.

Thread-safety: every public method may be called from any thread.
"""
from __future__ import annotations

import logging
import threading
from typing import Callable, Protocol, Sequence

from spark_log.clock import Clock
from spark_log.errors import SparkLogError

from .cleaner import CleanAborted
from .records import KeySpec
from .throttle import Throttler

__all__ = ["Cleanable", "CleanerPool"]

log = logging.getLogger(__name__)


class Cleanable(Protocol):
    topic: str
    partition: int

    def compaction_priority(self) -> float | None: ...

    def clean(self, spec: KeySpec, *, throttle: Throttler, budget_bytes: int, stop: Callable[[], bool]) -> str | None: ...


class CleanerPool:
    """The cleaner threads of one broker (module docstring)."""

    def __init__(self, *, logs: Callable[[], Sequence[Cleanable]], spec_for: Callable[[str], KeySpec | None],
                 clock: Clock, threads: int = 1, io_max_bytes_per_second: int = 0,
                 dedupe_buffer_bytes: int = 128 << 20, backoff_ms: int = 15_000, name: str = "cleaner") -> None:
        self._logs = logs
        self._spec_for = spec_for
        self._clock = clock
        self._threads_wanted = threads
        self._budget = max(1, dedupe_buffer_bytes // threads)
        self._backoff_ms = backoff_ms
        self._name = name
        self._stop = threading.Event()
        self._cond = threading.Condition()
        self._wakeups = 0
        self._busy: set[tuple[str, int]] = set()
        self._skip_until: dict[tuple[str, int], int] = {}
        self._threads: list[threading.Thread] = []
        self.throttle = Throttler(io_max_bytes_per_second, clock=clock, wait=self._stop.wait)
        self.jobs_done = 0
        self.jobs_failed = 0  # jobs that raised (the log is skipped for one backoff)

    def start(self) -> None:
        for i in range(self._threads_wanted):
            thread = threading.Thread(target=self._run, name=f"{self._name}-{i}", daemon=True)
            self._threads.append(thread)
            thread.start()

    def stop(self, timeout_s: float = 30.0) -> None:
        self._stop.set()
        self.wake()
        for thread in self._threads:
            thread.join(timeout=timeout_s)
        self._threads = []

    def wake(self) -> None:
        """Look for work now (a plan arrived, a clean was asked for)."""
        with self._cond:
            self._wakeups += 1
            self._cond.notify_all()

    def run_once(self) -> str | None:
        """Run the most urgent job on the calling thread (tests, benchmarks); returns what it did."""
        return self._one_job()

    def _run(self) -> None:
        while not self._stop.is_set():
            with self._cond:
                seen = self._wakeups
            try:
                done = self._one_job()
            except Exception:  # noqa: BLE001 - a cleaner thread never dies; _one_job logged it
                done = None
            if done is not None:
                continue
            with self._cond:
                if self._wakeups == seen and not self._stop.is_set():
                    self._cond.wait(self._backoff_ms / 1000)

    def _pick(self) -> Cleanable | None:
        """The most urgent free log.  Takes no pool lock while asking a log (a log's lock is
        never taken under the pool's: ``wake`` may be called under a log's)."""
        now = self._clock.monotonic_ms()
        with self._cond:
            unavailable = set(self._busy) | {key for key, until in self._skip_until.items() if until > now}
        best: tuple[float, Cleanable] | None = None
        for candidate in self._logs():
            if (candidate.topic, candidate.partition) in unavailable:
                continue
            try:
                priority = candidate.compaction_priority()
            except SparkLogError:
                continue
            if priority is not None and (best is None or priority > best[0]):
                best = (priority, candidate)
        return None if best is None else best[1]

    def _one_job(self) -> str | None:
        chosen = self._pick()
        if chosen is None:
            return None
        key = (chosen.topic, chosen.partition)
        with self._cond:
            if key in self._busy:  # another thread took it meanwhile
                return None
            self._busy.add(key)
        try:
            spec = self._spec_for(chosen.topic)
            if spec is None:
                self._skip(key)
                return None
            done = chosen.clean(spec, throttle=self.throttle, budget_bytes=self._budget, stop=self._stop.is_set)
            if done is None:
                self._skip(key)
            else:
                log.info("%s-%d: %s", chosen.topic, chosen.partition, done)
                self.jobs_done += 1
            return done
        except CleanAborted:
            return None
        except (SparkLogError, OSError) as exc:
            log.warning("cleaning %s-%d failed: %s; trying again later", chosen.topic, chosen.partition, exc)
            self.jobs_failed += 1
            self._skip(key)
            return None
        except Exception:
            log.exception("cleaning %s-%d failed; trying again later", chosen.topic, chosen.partition)
            self.jobs_failed += 1
            self._skip(key)
            raise
        finally:
            with self._cond:
                self._busy.discard(key)

    def busy(self) -> int:
        """Logs being cleaned now."""
        with self._cond:
            return len(self._busy)

    def _skip(self, key: tuple[str, int]) -> None:
        with self._cond:
            self._skip_until[key] = self._clock.monotonic_ms() + self._backoff_ms
