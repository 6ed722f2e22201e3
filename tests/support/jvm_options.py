"""The JVM options of every JVM the suite starts: C1 only and the serial collector.

``tests/conftest.py`` adds them to ``JAVA_TOOL_OPTIONS`` when the suite starts, so every
JVM started from it picks them up: the Spark sessions of the test processes, the Spark jobs
they run as subprocesses (the demo, the notebook, the kill jobs, the hosting application and
its ``local-cluster`` executors) and their children.

Why: the suite's JVMs live seconds to minutes and run small queries.  With the defaults they
spend much of their CPU in the C2 compiler's threads and the parallel collector's, on a
2-core machine where every CPU second is a second of someone else's wall time.  Measured
with each run's whole process tree in a cgroup, beside two suites: ``tests/jobs/test_demo.py``
95 CPU s with the defaults against 48 with these, ``tests/spark/test_streaming.py`` 181
against 121 (a kill job's Spark session start and first query: 16.8 against 9.1).  What the
tests check does not depend on the JIT or the collector.  The product leaves the JVM's
defaults alone.
"""
from __future__ import annotations

__all__ = ["SUITE_JVM_OPTIONS", "with_suite_jvm_options"]

SUITE_JVM_OPTIONS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")


def with_suite_jvm_options(java_tool_options: str) -> str:
    """``java_tool_options`` with each of ``SUITE_JVM_OPTIONS`` it lacks appended."""
    present = java_tool_options.split()
    return " ".join(present + [option for option in SUITE_JVM_OPTIONS if option not in present])
