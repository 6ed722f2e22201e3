"""Kafka's murmur2 partitioner, public: the same key lands in the same partition from a
``Producer``, from the Spark sink and from Kafka's default partitioner (same key bytes,
same partition count).

- ``murmur2(data) -> int``: Kafka's ``Utils.murmur2`` (signed 32-bit, as Java returns it).
- ``partition_for_key(key, num_partitions) -> int``: one key (``bytes``, or ``str`` as UTF-8).
- ``key_array(table, key_columns) -> (keys, present)``: the key bytes of every row of an
  Arrow table or batch (several columns are cast to text and joined with ``\\x1f``, nulls as
  the empty string) and a boolean numpy mask of the rows that have a key (a row whose key
  columns are all null has none: producers send it to the sticky partition).
- ``partitions_for_keys(keys, num_partitions) -> numpy int32 array``: the partition of
  every key, vectorised (no per-row Python loop).
- ``murmur2_array(keys) -> numpy uint32 array``: the raw hashes.

The values are a stable contract (pinned by tests).  ``spark_log._partitioner`` is the
implementation.
"""
from __future__ import annotations

from ._partitioner import key_array as key_array
from ._partitioner import murmur2 as murmur2
from ._partitioner import murmur2_array as murmur2_array
from ._partitioner import partition_for_key as partition_for_key
from ._partitioner import partitions_for_keys as partitions_for_keys

__all__ = ["key_array", "murmur2", "murmur2_array", "partition_for_key", "partitions_for_keys"]
