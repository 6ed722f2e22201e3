"""``AckedWriter``: one acks=all producer in a thread, writing numbered values and recording
every outcome as a ``log_history`` ``Send`` (acknowledged with its partition and offset, or
failed: definitely not written when the producer says no attempt may have written it,
``SparkLogError.maybe_written``), with the writer as ``producer`` and the send's number as
``index`` (the checker's send-order check), for fault tests that check the history afterwards.

Keyed (``key-{n % keys}``) unless ``partition`` is given; ``batch`` sends per round and a
pause of ``pause_s`` between rounds keep the history small enough for the checker.
"""
from __future__ import annotations

import itertools
import threading

from spark_log import Producer
from spark_log.errors import SparkLogError
from tests.checkers.log_history import Op, Send

__all__ = ["AckedWriter"]


class AckedWriter:
    def __init__(self, bootstrap: str, topic: str, *, prefix: str = "r", partition: int | None = None,
                 keys: int = 7, batch: int = 10, pause_s: float = 0.05, delivery_timeout_ms: int = 30_000) -> None:
        self.bootstrap, self.topic, self.prefix, self.partition = bootstrap, topic, prefix, partition
        self.keys, self.batch, self.pause_s, self.delivery_timeout_ms = keys, batch, pause_s, delivery_timeout_ms
        self.history: list[Op] = []
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def acked(self) -> int:
        with self.lock:
            return sum(1 for op in self.history if isinstance(op, Send) and op.ok)

    def _run(self) -> None:
        counter = itertools.count()
        unknown = self.partition  # a keyed send that failed: the partition is not known here
        with Producer(self.bootstrap, acks="all", linger_ms=2, delivery_timeout_ms=self.delivery_timeout_ms) as producer:
            while not self.stop.wait(self.pause_s):
                sent = []
                for _ in range(self.batch):
                    n = next(counter)
                    value = f"{self.prefix}{n}".encode()
                    key = None if self.partition is not None else f"key-{n % self.keys}".encode()
                    sent.append((value, producer.send(self.topic, value, key=key, partition=self.partition)))
                for value, future in sent:
                    index = int(value[len(self.prefix):])
                    try:
                        partition, offset = future.result(timeout=60)
                        op: Op = Send(partition, value, True, offset, producer=self.prefix, index=index)
                    except SparkLogError as exc:
                        op = Send(unknown, value, False, definite=not exc.maybe_written, producer=self.prefix,
                                  index=index)
                    except TimeoutError:
                        op = Send(unknown, value, False, definite=False, producer=self.prefix, index=index)
                    with self.lock:
                        self.history.append(op)
