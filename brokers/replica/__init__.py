"""Replication threads (Kafka's ISR model; DESIGN.md section 6).

The partition state they act on is ``brokers.partition.Partition``'s; here are only the
threads: ``fetcher`` (one follower fetcher per leader broker), ``isr`` (ISR shrink and expand
through the controller's AlterPartition), ``manager`` (assigns partitions to fetchers,
starts and stops them).  ``preferred_leader`` is the controller's pure preferred-replica
election rule (kept here, where the controller imports it from).
"""
