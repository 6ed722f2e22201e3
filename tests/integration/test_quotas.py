"""Client byte-rate quotas end to end (the shared plaintext cluster: quotas need no TLS; the
entity is the client id).  A producer under a ``producer_byte_rate`` quota is held near the
limit while a producer beside it, with another client id, is never throttled; a consumer
under a ``consumer_byte_rate`` quota likewise.  The producer's rate is measured from its
first throttled answer on (the bucket's initial burst is spent and the broker has the
quota in its image by then, however late a loaded machine starts the senders), the
consumer's after its first throttled answer.

Bounds a busy 2-core machine keeps.  Above: a broker cannot let more through than the
bucket allows: the rate times the stretch plus one full bucket plus the requests that left
it in debt (a sender starved on a loaded machine finds the bucket refilled).  Below: not a
rate (a client starved of CPU sends less than its quota however right the broker is: CI
once measured 121 KiB/s under 256 with two suites running) but the broker's own account,
which starving cannot inflate: the delay its answers asked for over the stretch is no more
than the bytes acknowledged need at the quota, plus the debt of the requests in flight
when the throttling began.  A broker that over-throttles (a delay for bytes already paid
for, a rate in the wrong unit) asks for more.  Adds about 12 s.
"""
from __future__ import annotations

import os
import threading
import time
import uuid

from brokers.launcher.local import LocalCluster
from spark_log import Admin, Consumer, Producer
from tests.support.metrics import total
from tests.support.wait import wait_until

RATE = 256 * 1024  # bytes per second
VALUE = 8 * 1024
MEASURE_S = 2.5  # the producer's measured stretch, after its first throttled answer
BURST_S = 1.0  # the brokers' quota_burst_ms (the default): what the bucket holds when full
IN_FLIGHT = 8 * VALUE  # a Sender's requests in flight: the last one may leave the bucket in debt
FETCH_BYTES = 64 * 1024  # the quota'd consumer's fetch size


class Sender(threading.Thread):
    """Sends VALUE-byte random records as fast as acknowledgements allow; records (ack
    time, acknowledged payload bytes, whether an answer had reported a throttle by then,
    the throttle time answers had reported by then in ms)."""

    def __init__(self, bootstrap: str, topic: str, client_id: str, stop: threading.Event) -> None:
        super().__init__(daemon=True)
        self.producer = Producer(bootstrap, client_id=client_id, acks=1, linger_ms=2, batch_size=4 * VALUE)
        self.topic, self.stop = topic, stop
        self.acks: list[tuple[float, int, bool, int]] = []
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            total = 0
            while not self.stop.is_set():
                futures = [self.producer.send(self.topic, os.urandom(VALUE)) for _ in range(8)]
                for future in futures:
                    future.result(timeout=60)
                    total += VALUE
                    self.acks.append((time.monotonic(), total, self.producer.throttled > 0,
                                      self.producer.throttle_time_ms))
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc
        finally:
            self.producer.close(timeout=30)

    def after_throttle(self) -> tuple[float, float, float]:
        """(bytes/s, seconds, seconds of delay the answers asked for) from the first ack
        after a throttled answer to the last."""
        inside = [(t, b, ms) for t, b, throttled, ms in self.acks if throttled]
        if len(inside) < 2:
            return 0.0, 0.0, 0.0
        seconds = inside[-1][0] - inside[0][0]
        return (inside[-1][1] - inside[0][1]) / seconds, seconds, (inside[-1][2] - inside[0][2]) / 1000


def _delay_allowed(nbytes: float, in_debt: int) -> float:
    """The most delay a correct bucket asks for while ``nbytes`` go through at the quota:
    their time at RATE plus the debt ``in_debt`` bytes of requests in flight when the
    throttling began can leave (each such answer is delayed for the whole debt so far),
    10% and a millisecond per answer of rounding (``ceil``) besides."""
    answers = nbytes / VALUE
    return 1.1 * (nbytes + in_debt) / RATE + answers / 1000


def test_a_produce_quota_holds_the_rate_and_leaves_other_clients_alone(cluster: LocalCluster) -> None:
    topic = f"quota-{uuid.uuid4().hex[:8]}"
    slow_id, fast_id = f"slow-{topic}", f"fast-{topic}"
    with Admin(cluster.bootstrap) as admin:
        admin.create_topic(topic, partitions=1, replication_factor=1)
        admin.alter_client_quotas({"client-id": slow_id}, set={"producer_byte_rate": RATE})
        assert any(e.entity == {"client-id": slow_id} and e.values == {"producer_byte_rate": RATE}
                   for e in admin.describe_client_quotas())
    try:
        stop = threading.Event()
        slow = Sender(cluster.bootstrap, topic, slow_id, stop)
        fast = Sender(cluster.bootstrap, topic, fast_id, stop)
        slow.start()
        fast.start()
        try:
            wait_until(lambda: slow.producer.throttled > 0 or slow.error is not None, timeout=60,
                       message="the quota'd producer is throttled")
            stop.wait(MEASURE_S)  # the measured stretch: both senders work this long (a duration, not a synchronisation)
        finally:
            stop.set()
            slow.join(timeout=60)
            fast.join(timeout=60)
        assert slow.error is None and fast.error is None, (slow.error, fast.error)
        measured, seconds, delayed = slow.after_throttle()
        assert seconds >= 0.5 * MEASURE_S, f"only {seconds:.2f} s of throttled acknowledgements"
        assert measured > 0
        acknowledged = measured * seconds
        assert delayed <= _delay_allowed(acknowledged, 2 * IN_FLIGHT), (
            f"answers delayed {delayed:.2f} s for {acknowledged / 1024:.0f} KiB under a {RATE // 1024} KiB/s quota")
        # The bucket's guarantee: over any stretch, at most the rate times its length plus one
        # full bucket (refilled while a starved sender did not send, as on a loaded machine)
        # plus the request that left it in debt; 1.3 x RATE alone is broken by a correct broker.
        allowed = RATE * seconds + RATE * BURST_S + IN_FLIGHT
        assert measured * seconds <= 1.05 * allowed, (
            f"{measured * seconds / 1024:.0f} KiB in {seconds:.2f} s under a {RATE // 1024} KiB/s quota "
            f"(the bucket allows {allowed / 1024:.0f} KiB)")
        assert slow.producer.throttled > 0 and slow.producer.throttle_time_ms > 0
        assert fast.producer.throttled == 0  # another client id: never throttled
        # the brokers' metrics count the delayed answers and their delay (issue 18)
        urls = [u for u in (cluster.metrics_url(n.node_id) for n in cluster.nodes) if u is not None]
        assert total(urls, "spark_log_quota_throttled_total") > 0
        assert total(urls, "spark_log_quota_throttle_time_ms_total") > 0
        assert fast.acks[-1][1] > slow.acks[-1][1]
    finally:
        with Admin(cluster.bootstrap) as admin:
            admin.alter_client_quotas({"client-id": slow_id}, remove=["producer_byte_rate"])


def test_a_fetch_quota_holds_the_consumer_to_its_rate(cluster: LocalCluster) -> None:
    topic = f"fquota-{uuid.uuid4().hex[:8]}"
    client_id = f"reader-{topic}"
    backlog = 4 * RATE  # 1 s of burst, then ~3 s at the quota (less if the quota reaches the broker late)
    with Admin(cluster.bootstrap) as admin:
        admin.create_topic(topic, partitions=1, replication_factor=1)
        admin.alter_client_quotas({"client-id": client_id}, set={"consumer_byte_rate": RATE})
    try:
        with Producer(cluster.bootstrap, acks=1) as producer:
            for _ in range(backlog // VALUE):
                producer.send(topic, os.urandom(VALUE))
            producer.flush()
        with Consumer(cluster.bootstrap, client_id=client_id, auto_offset_reset="earliest",
                      max_partition_fetch_bytes=FETCH_BYTES, fetch_max_bytes=FETCH_BYTES) as consumer:
            consumer.assign([(topic, 0)])
            got, after_throttle = 0, None
            while got < backlog:
                got += sum(len(r.value) for r in consumer.poll(1.0))
                if after_throttle is None and consumer.throttled > 0:
                    # the burst is spent: the rate holds from here
                    after_throttle = (time.monotonic(), got, consumer.throttle_time_ms)
            assert after_throttle is not None, "the consumer was never throttled"
            seconds = time.monotonic() - after_throttle[0]
            read = got - after_throttle[1]
            assert read >= RATE, f"only {read} bytes read after the first throttle"
            assert read / seconds <= 1.3 * RATE, f"{read / seconds / 1024:.0f} KiB/s under a {RATE // 1024} KiB/s quota"
            delayed = (consumer.throttle_time_ms - after_throttle[2]) / 1000
            assert delayed <= _delay_allowed(read, 2 * FETCH_BYTES), (
                f"answers delayed {delayed:.2f} s for {read / 1024:.0f} KiB under a {RATE // 1024} KiB/s quota")
            assert consumer.throttled > 0
    finally:
        with Admin(cluster.bootstrap) as admin:
            admin.alter_client_quotas({"client-id": client_id}, remove=["consumer_byte_rate"])
