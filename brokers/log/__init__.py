"""Segmented log storage for one partition replica (see ``partition_log.PartitionLog``).

One concept per module: ``segment`` (a data file and its indexes), ``segments`` (the
ordered set), ``offset_index``, ``time_index``, ``epoch_cache``, ``epoch_lookup``
("where does epoch E end", pure), ``checkpoint``, ``durable`` (every fsync and atomic
replace, shared with Raft), ``scan`` (walking frames in a file), ``append`` (validating a
request), ``recovery`` (opening after a crash), ``retention`` (which segments go),
``results`` and ``partition_log`` (roll, retention, truncation, flush).
"""
from .epoch_cache import EpochCache as EpochCache
from .partition_log import PartitionLog as PartitionLog
from .results import AppendInfo as AppendInfo
from .results import ReadResult as ReadResult
from .recovery import RecoveryReport as RecoveryReport

__all__ = ["AppendInfo", "EpochCache", "PartitionLog", "ReadResult", "RecoveryReport"]
