"""Byte-rate quotas with an injected clock: token-bucket accounting, throttle times, entity precedence."""
from __future__ import annotations

from types import MappingProxyType

from brokers.metadata.security_image import DEFAULT, QuotaEntity
from brokers.security.quotas import QuotaManager, resolve
from spark_log.clock import ManualClock

P = "producer_byte_rate"


def quotas(entries: dict[QuotaEntity, dict[str, float]]) -> MappingProxyType[QuotaEntity, MappingProxyType[str, float]]:
    return MappingProxyType({e: MappingProxyType(v) for e, v in entries.items()})


def test_burst_then_debt_then_throttle_times_that_hold_the_rate() -> None:
    clock = ManualClock()
    manager = QuotaManager(clock=clock, burst_ms=1000, max_throttle_ms=10_000)
    q = quotas({QuotaEntity(None, "etl"): {P: 1000.0}})  # 1000 B/s, burst 1000 B
    assert manager.charge(q, P, "ANONYMOUS", "etl", 600).throttle_ms == 0
    assert manager.charge(q, P, "ANONYMOUS", "etl", 400).throttle_ms == 0  # the burst is spent exactly
    charge = manager.charge(q, P, "ANONYMOUS", "etl", 500)  # 500 B of debt at 1000 B/s
    assert charge.throttle_ms == 500
    manager.done(charge)
    clock.advance(500)  # the client waited out the throttle: debt paid, nothing saved up
    assert manager.charge(q, P, "ANONYMOUS", "etl", 1).throttle_ms == 1
    clock.advance(2000)  # idle: refills to the burst, not beyond
    assert manager.charge(q, P, "ANONYMOUS", "etl", 1001).throttle_ms == 1  # full again: 1000 - 1001 = -1 B -> 1 ms


def test_a_steady_sender_is_held_to_the_rate() -> None:
    clock = ManualClock()
    manager = QuotaManager(clock=clock, burst_ms=1000)
    q = quotas({QuotaEntity("alice", None): {P: 10_000.0}})
    sent = 0
    for _ in range(200):  # 200 requests of 1000 B, each sent when the previous answer came back
        charge = manager.charge(q, P, "alice", "", 1000)
        sent += 1000
        clock.advance(charge.throttle_ms + 5)  # 5 ms of round trip
        manager.done(charge)
    rate = sent / (clock.monotonic_ms() / 1000)
    assert 10_000 * 0.95 <= rate <= 10_000 * 1.06  # the burst (1 s worth) spread over 20 s


def test_throttle_is_capped_and_delayed_answers_are_bounded() -> None:
    clock = ManualClock()
    manager = QuotaManager(clock=clock, burst_ms=1000, max_throttle_ms=2000, max_delayed=2)
    q = quotas({QuotaEntity(None, "etl"): {P: 100.0}})
    first = manager.charge(q, P, "u", "etl", 10_000)
    assert first.throttle_ms == 2000
    assert manager.admit(q, P, "u", "etl")
    manager.charge(q, P, "u", "etl", 1)
    assert not manager.admit(q, P, "u", "etl")  # two answers being delayed
    manager.done(first)
    assert manager.admit(q, P, "u", "etl")
    assert manager.admit(q, P, "u", "other")  # no quota for that client id


def test_kafka_precedence_and_buckets() -> None:
    q = quotas({
        QuotaEntity("alice", "etl"): {P: 1.0},
        QuotaEntity("alice", None): {P: 2.0},
        QuotaEntity(DEFAULT, None): {P: 3.0},
        QuotaEntity(None, "etl"): {P: 4.0},
        QuotaEntity(None, DEFAULT): {P: 5.0},
    })
    assert resolve(q, P, "alice", "etl") == (QuotaEntity("alice", "etl"), 1.0)
    assert resolve(q, P, "alice", "web") == (QuotaEntity("alice", None), 2.0)
    assert resolve(q, P, "bob", "etl") == (QuotaEntity("bob", None), 3.0)  # default user: a bucket per user
    assert resolve(quotas({QuotaEntity(None, DEFAULT): {P: 5.0}}), P, "bob", "x") == (QuotaEntity(None, "x"), 5.0)
    assert resolve(q, "consumer_byte_rate", "alice", "etl") is None


def test_users_of_a_default_quota_do_not_share_a_bucket() -> None:
    clock = ManualClock()
    manager = QuotaManager(clock=clock, burst_ms=1000)
    q = quotas({QuotaEntity(DEFAULT, None): {P: 1000.0}})
    assert manager.charge(q, P, "alice", "", 2000).throttle_ms == 1000
    assert manager.charge(q, P, "bob", "", 1000).throttle_ms == 0
