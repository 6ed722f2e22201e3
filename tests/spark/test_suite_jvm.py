"""The suite's Spark JVMs run with the suite's JVM options (``tests/support/jvm_options.py``)."""
from __future__ import annotations

from typing import Any

import pytest

from tests.support.jvm_options import SUITE_JVM_OPTIONS, with_suite_jvm_options

pytestmark = [pytest.mark.spark]


def test_the_options_are_added_once_after_the_callers_own() -> None:
    assert with_suite_jvm_options("") == " ".join(SUITE_JVM_OPTIONS)
    assert with_suite_jvm_options("-Xss4m") == " ".join(("-Xss4m", *SUITE_JVM_OPTIONS))
    once = with_suite_jvm_options("-Xss4m")
    assert with_suite_jvm_options(once) == once


def test_the_session_jvm_runs_c1_only_with_the_serial_collector(spark: Any) -> None:
    jvm = spark.sparkContext._jvm
    runtime = jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
    arguments = list(runtime.getInputArguments())
    assert all(option in arguments for option in SUITE_JVM_OPTIONS), arguments
    collectors = {bean.getName() for bean in jvm.java.lang.management.ManagementFactory.getGarbageCollectorMXBeans()}
    assert collectors == {"Copy", "MarkSweepCompact"}, collectors  # the serial collector's two generations
