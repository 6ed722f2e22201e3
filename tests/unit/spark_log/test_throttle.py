"""ThrottleGate: one request in flight to a broker that throttles us, none held back otherwise."""
from __future__ import annotations

import threading

from spark_log._throttle import ThrottleGate
from tests.support.wait import wait_until


def test_unthrottled_brokers_take_any_number_of_requests() -> None:
    gate = ThrottleGate()
    for _ in range(5):
        gate.acquire("a", timeout_s=0.1)
    assert gate.throttled == 0


def test_a_throttling_broker_gets_one_request_at_a_time_until_it_answers_unthrottled() -> None:
    gate = ThrottleGate()
    gate.acquire("a")
    gate.release("a", 250)
    assert gate.is_throttled("a") and gate.throttled == 1 and gate.throttle_time_ms == 250
    gate.acquire("a")  # nothing in flight: goes
    entered = threading.Event()

    def second() -> None:
        gate.acquire("a")
        entered.set()

    thread = threading.Thread(target=second, daemon=True)
    thread.start()
    assert not entered.wait(0.2)  # held back while one is in flight
    gate.acquire("b", timeout_s=0.1)  # another broker is not affected
    gate.release("a", 0)  # answered without throttle
    wait_until(entered.is_set, timeout=5, message="the held request goes once the broker stopped throttling")
    thread.join(timeout=5)
    assert not gate.is_throttled("a")


def test_waiting_is_bounded() -> None:
    gate = ThrottleGate()
    gate.acquire("a")
    gate.release("a", 100)
    gate.acquire("a")
    gate.acquire("a", timeout_s=0.05)  # gives up waiting and goes (the broker still delays it)
