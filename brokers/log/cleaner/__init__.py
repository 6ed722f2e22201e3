"""Log compaction (``cleanup.policy=compact``): the broker's log cleaner.

One concept per module: ``plan`` (plans, published as control frames, and the planning
rules: pure), ``records`` (a frame's keys, tombstones and timestamps), ``offset_map``
(key -> latest offset, bounded), ``filter`` (what becomes of each frame, and the cleaned
output with its fillers: pure over bytes), ``cleaner`` (the passes over a log snapshot),
``checkpoint`` (``cleaner-offset-checkpoint``), ``throttle`` (the I/O rate limit) and
``pool`` (the cleaner threads: which log to clean next).  The log itself owns what its
recovery must understand: ``brokers/log/swap.py`` (the crash-safe file swap and its
completion), ``brokers/log/crash_points.py`` (named kill points for tests) and
``brokers/log/snapshot.py`` (what it hands the cleaner); the log never imports the cleaner.

How a partition is cleaned, and why every replica ends with the same records, is written
at the top of ``plan.py``; the partition unit (``brokers/partition/cleaning.py``) runs the
passes with its lock, and the broker (``brokers/server``) runs the pool.
"""
