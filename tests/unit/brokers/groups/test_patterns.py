"""Subscription patterns (KIP-848 ``subscribed_topic_regex``) on the coordinator
(brokers/groups/model.py ``Subscription``, checked by core.py at heartbeat time).

Any client allowed to join some group sends one, and the coordinator matches it against
every topic of the cluster: it is compiled with RE2 (linear time, as Kafka's RE2J), never
with Python's backtracking ``re``, where ``([a-z0-9-]|[a-z0-9-])*X`` takes 2**n steps on a
topic name of n characters with the GIL held (found by a security review: one heartbeat
stalled every thread of the broker)."""
from __future__ import annotations

import dataclasses
import logging
import re
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

from brokers.groups.core import GroupShard
from brokers.groups.messages import Heartbeat
from brokers.groups.model import GroupConfig, Subscription
from brokers.groups.records import GroupRecord, decode, encode
from spark_log.errors import InvalidRegularExpressionError

from .support import TOPICS, Driver

REPO = Path(__file__).resolve().parents[4]
HOSTILE = r"([a-z0-9-]|[a-z0-9-])*X"


def test_a_hostile_pattern_resolves_at_once_against_long_topic_names() -> None:
    # In a child process with a deadline: with a backtracking engine this would run for
    # ages (2**60 steps) and must fail the test, not hang it.
    script = textwrap.dedent(f"""
        import time
        from brokers.groups.model import Subscription
        names = [("orders-eu-west-archive-" * 11)[:n] for n in (60, 120, 249)]
        topics = {{name: ("id", 3) for name in names}}
        subscription = Subscription((), {HOSTILE!r})
        start = time.monotonic()
        assert subscription.resolve(topics) == frozenset()
        assert not any(subscription.matches(name) for name in names)
        assert Subscription((), {HOSTILE!r}).resolve({{names[0] + "X": ("id", 1)}}) == {{names[0] + "X"}}
        print(f"{{time.monotonic() - start:.4f}}")
    """)
    try:
        done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        pytest.fail(f"resolving {HOSTILE!r} against a 60-character topic name ran for more than 30 s")
    assert done.returncode == 0, done.stderr
    assert float(done.stdout) < 5.0, f"resolving took {done.stdout.strip()} s"


@pytest.mark.parametrize("pattern", [
    r"(t)\1",                      # a backreference
    r"(?=t).*",                    # lookahead
    r"(?!__).*",                   # negative lookahead
    r".*(?<=t)",                   # lookbehind
    r"(?<!x)t",                    # negative lookbehind
    "(",                           # not a regular expression at all
    "t|" + "x" * 1_000,            # too long (the cap: 1,000 characters)
    r"(?:[a-z]|[0-9]){1,1000}",    # too large compiled (a counted repeat is expanded)
])
def test_patterns_re2_refuses_are_invalid_regular_expressions(pattern: str) -> None:
    shard = GroupShard(config=GroupConfig(min_session_timeout_ms=100))
    hb = Heartbeat(group_id="g", member_id="m", member_epoch=0, subscription=Subscription((), pattern),
                   session_timeout_ms=3000)
    with pytest.raises(InvalidRegularExpressionError):
        shard.heartbeat(hb, 0, {"t": ("id", 1)})
    assert shard.list_groups() == []


NAMES = ["t", "u", "orders", "orders-eu", "orders.eu", "orders_eu", "Orders-EU-2", "logs-a", "logs-b", "logs-",
         "a" * 249, "__consumer_offsets", "__transaction_state", "x.y-z_0"]


@pytest.mark.parametrize("pattern", [
    ".*", "t", "logs-.*", "logs-[ab]", "orders(-eu)?", r"orders\.eu", "orders.eu", "(?i)orders-eu.*",
    r"[A-Za-z]+-\w+(-\d)?", "t|u", "(orders|logs)-.+", "a{249}", "a+", "[^_].*", "_.*", "ord", r"\w+",
])
def test_ordinary_patterns_match_in_full_as_before(pattern: str) -> None:
    expected = {n for n in NAMES if not n.startswith("__") and re.fullmatch(pattern, n)}
    subscription = Subscription((), pattern)
    assert {n for n in NAMES if subscription.matches(n)} == expected
    assert subscription.resolve({n: ("id", 1) for n in NAMES}) == expected


def test_a_heartbeat_with_an_ordinary_pattern_is_taken() -> None:
    d = Driver()
    d.converge("a", topics=(), regex="logs-.*")
    assert d.assigned("a") == {("logs-a", 0), ("logs-a", 1), ("logs-b", 0)}


def test_a_stored_member_with_a_pattern_re2_refuses_still_loads_and_matches_nothing(
        caplog: pytest.LogCaptureFixture) -> None:
    # A group record written before patterns were compiled with RE2 may hold one that
    # Python's re took (a lookahead here): loading it must not fail, the pattern matches
    # no topic (logged), and the group goes on.
    d = Driver()
    d.converge("a", topics=(), regex="logs-.*")
    stored = d.shard.group("g")
    assert stored is not None
    old = f"(?=l)logs-.*|{uuid.uuid4().hex}"   # unique: the warning is logged once per pattern
    stored = dataclasses.replace(stored, members={
        "a": dataclasses.replace(stored.members["a"], subscription=Subscription((), old))})
    record = decode(*encode(GroupRecord("g", stored)))

    loaded = Driver(TOPICS)
    loaded.shard.apply(record, 0)
    group = loaded.shard.group("g")
    assert group is not None and group.members["a"].subscription.regex == old
    with caplog.at_level(logging.WARNING, logger="brokers.groups.model"):
        assert not group.members["a"].subscription.matches("logs-a")
        assert group.members["a"].subscription.resolve(TOPICS) == frozenset()
        loaded.converge("b", topics=("t",))    # a new target: the old pattern is resolved again
    group = loaded.shard.group("g")
    assert group is not None and set(group.topics) == {"t"}
    assert group.members["a"].target == frozenset()
    assert any(old in r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)
