"""Named crash points of the transactional sink's driver, for kill -9 tests.

``reach(name)`` is a no-op unless the environment variable ``SPARK_LOG_SINK_CRASH_AT``
names this point: then it appends ``name`` to the file named by
``SPARK_LOG_SINK_CRASH_MARKER`` (fsynced, so the test can assert the point was reached) and
kills the process group of the process that reached it with SIGKILL.  In the Python sink
that process is the Spark Python worker running the driver-side commit, which has a process
group of its own: the worker dies at that moment and the query's driver fails with it (it
is not killed itself), so the commit stops exactly there, as a crash of the driver would
stop it.  (The JVM sink's points, ``CrashPoints.java``, kill the driver's whole group.)
The points (``writer.py``):

- ``before-commit``: every task of the micro-batch wrote and returned; the driver has not
  asked the coordinator to commit yet;
- ``during-commit``: the coordinator took the commit (the transaction is prepared or
  complete), Spark has not recorded the batch as committed in its checkpoint.

Production never sets the variable.
"""
from __future__ import annotations

import os
import signal

__all__ = ["POINTS", "reach"]

POINTS = ("before-commit", "during-commit")


def reach(name: str) -> None:
    if os.environ.get("SPARK_LOG_SINK_CRASH_AT", "") != name:
        return
    marker = os.environ.get("SPARK_LOG_SINK_CRASH_MARKER", "")
    if marker:
        with open(marker, "a") as out:
            out.write(f"{name}\n")
            out.flush()
            os.fsync(out.fileno())
    os.killpg(os.getpgid(0), signal.SIGKILL)
