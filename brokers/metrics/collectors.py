"""Scrape-time collectors: metrics read from the node's existing state when ``/metrics`` is
asked for, so nothing on the request path pays for them.

``NodeCollector`` (every node): Raft (role, epoch, leader, high watermark, applied offset,
log end, commit lag = committed but not yet applied entries) and, on the active controller
only (as Kafka's controller metrics), the cluster's brokers, topics, partitions and offline
partitions (no leader).

``BrokerCollector`` (broker nodes): for the replicas this broker hosts, log size, segment
count and offsets per partition; for the partitions it leads, the under-replicated (fewer
in-sync replicas than the replication factor; replicas a reassignment is still adding do
not count, as in ``Admin.describe_topic``), under-min-ISR
and per-partition flags; ISR shrinks and expands it asked the controller for; committed
offsets and lag (high watermark - committed offset, where this broker hosts the partition)
of the groups it coordinates; the cleaner (per compacted partition: cleaned offset, dirty
ratio; the pool: jobs, failures, busy logs, I/O throttle time); quota throttling.

``TransactionCollector`` (broker nodes): the transaction coordinator's decisions
(transactions started, committed, aborted, timed out), the transactions it holds open now
by state and the age of the oldest, the ``__transaction_state`` partitions it coordinates,
and the markers this broker wrote as a partition leader.  With them ``BrokerCollector``
reports each led partition's last stable offset and its lag behind the high watermark
(HW - LSO: what a read_committed consumer cannot see yet because a transaction is open).

Each collector swallows and logs a failure of one part (a partition closing while it is
read) rather than failing the scrape.
"""
from __future__ import annotations

import logging
from typing import Any, Callable, Iterator, Protocol

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from brokers.groups import INTERNAL_TOPIC
from brokers.metadata.image import MetadataImage
from brokers.partition import Partition
from spark_log.errors import SparkLogError


# What the collectors read, as protocols (this package imports neither the node's parts nor
# the broker server, which import it).

class RaftStatus(Protocol):
    @property
    def epoch(self) -> int: ...
    @property
    def leader_id(self) -> int | None: ...

    def status(self) -> tuple[str, int, int, int]: ...


class ActiveFlag(Protocol):
    @property
    def is_active(self) -> bool: ...


class QuotaStats(Protocol):
    def stats(self) -> tuple[dict[str, tuple[int, int, int]], int]: ...


class HostedPartitions(Protocol):
    @property
    def broker_id(self) -> int: ...
    @property
    def image(self) -> MetadataImage: ...

    def hosted(self) -> list[Partition]: ...


class IsrCounts(Protocol):
    @property
    def shrinks(self) -> int: ...
    @property
    def expands(self) -> int: ...


class CommittedOffsets(Protocol):
    def committed_offsets(self) -> dict[str, dict[tuple[str, int], int]]: ...


class Throttle(Protocol):
    @property
    def throttled_ms(self) -> int: ...


class CleanerStats(Protocol):
    @property
    def jobs_done(self) -> int: ...
    @property
    def jobs_failed(self) -> int: ...
    @property
    def throttle(self) -> Throttle: ...

    def busy(self) -> int: ...


class TxnCounts(Protocol):
    def counts(self) -> tuple[int, int, int, int]: ...


class TxnCoordinatorStats(Protocol):
    @property
    def stats(self) -> TxnCounts: ...

    def open_transactions(self) -> tuple[dict[Any, int], int]: ...

    def loaded_partitions(self) -> list[int]: ...


class MarkerCounts(Protocol):
    def written(self) -> tuple[int, int]: ...


__all__ = ["NodeCollector", "BrokerCollector", "TransactionCollector", "TxnCoordinatorStats", "MarkerCounts", "RAFT_ROLES", "RaftStatus", "ActiveFlag", "QuotaStats",
           "HostedPartitions", "IsrCounts", "CommittedOffsets", "CleanerStats"]

log = logging.getLogger(__name__)

RAFT_ROLES = ("leader", "follower", "candidate", "prospective", "voted", "unattached")


def _gauge(name: str, doc: str, value: float | None = None, labels: list[str] | None = None) -> GaugeMetricFamily:
    if labels is not None:
        return GaugeMetricFamily(name, doc, labels=labels)
    return GaugeMetricFamily(name, doc, value=value if value is not None else 0)


class NodeCollector(Collector):
    def __init__(self, *, broker_id: int, raft: Callable[[], RaftStatus | None],
                 controller: Callable[[], ActiveFlag | None], image: Callable[[], MetadataImage],
                 quotas: QuotaStats) -> None:
        self.broker_id = broker_id
        self._raft = raft
        self._controller = controller
        self._image = image
        self._quotas = quotas

    def collect(self) -> Iterator[Metric]:
        yield _gauge("spark_log_node_info", "This node (always 1), by id", 1)
        raft = self._raft()
        if raft is not None:
            role, hw, applied, end = raft.status()
            roles = _gauge("spark_log_raft_role", "1 for this node's current Raft role", labels=["role"])
            for name in RAFT_ROLES:
                roles.add_metric([name], 1 if name == role else 0)
            yield roles
            yield _gauge("spark_log_raft_epoch", "Current Raft epoch", raft.epoch)
            yield _gauge("spark_log_raft_leader_id", "Raft leader (the active controller) as this node sees it; -1: none",
                         raft.leader_id if raft.leader_id is not None else -1)
            yield _gauge("spark_log_raft_high_watermark", "Committed end of the metadata log", hw)
            yield _gauge("spark_log_raft_applied_offset", "Next metadata log offset to apply", applied)
            yield _gauge("spark_log_raft_log_end_offset", "End of this node's metadata log", end)
            yield _gauge("spark_log_raft_commit_lag", "Metadata entries committed but not yet applied here",
                         max(0, hw - applied))
        controller = self._controller()
        active = controller is not None and controller.is_active
        yield _gauge("spark_log_controller_active", "1 on the active controller", 1 if active else 0)
        yield _gauge("spark_log_metadata_offset", "Metadata log offset of the image this node serves",
                     self._image().offset)
        if active:
            image = self._image()
            partitions = list(image.iter_partitions())
            yield _gauge("spark_log_controller_offline_partitions", "Partitions without a leader",
                         sum(1 for _, _, p in partitions if p.leader is None))
            yield _gauge("spark_log_controller_partitions", "Partitions in the cluster", len(partitions))
            yield _gauge("spark_log_controller_topics", "Topics in the cluster", len(image.topics))
            yield _gauge("spark_log_controller_brokers", "Registered brokers", len(image.brokers))
            yield _gauge("spark_log_controller_fenced_brokers", "Registered brokers that are fenced",
                         sum(1 for b in image.brokers.values() if b.fenced))
        throttled, delayed_now = self._quotas.stats()
        delayed = CounterMetricFamily("spark_log_quota_throttled", "Answers delayed by a client quota", labels=["quota"])
        delay_ms = CounterMetricFamily("spark_log_quota_throttle_time_ms", "Total delay of throttled answers (ms)",
                                       labels=["quota"])
        refused = CounterMetricFamily("spark_log_quota_refused", "Calls refused: too many answers already delayed",
                                      labels=["quota"])
        for key in sorted(set(throttled) | {"producer_byte_rate", "consumer_byte_rate"}):
            counts = throttled.get(key, (0, 0, 0))
            delayed.add_metric([key], counts[0])
            delay_ms.add_metric([key], counts[1])
            refused.add_metric([key], counts[2])
        yield delayed
        yield delay_ms
        yield refused
        yield _gauge("spark_log_quota_delayed_answers", "Answers being delayed now", delayed_now)


class BrokerCollector(Collector):
    def __init__(self, *, partitions: HostedPartitions, isr: IsrCounts, groups: CommittedOffsets,
                 cleaner: CleanerStats) -> None:
        self.partitions = partitions
        self.isr = isr
        self.groups = groups
        self.cleaner = cleaner

    def collect(self) -> Iterator[Metric]:
        manager = self.partitions
        broker_id = manager.broker_id
        image = manager.image
        hosted = sorted(manager.hosted(), key=lambda p: (p.topic, p.partition))
        labels = ["topic", "partition"]
        size = _gauge("spark_log_log_size_bytes", "Bytes of a hosted replica's log", labels=labels)
        segments = _gauge("spark_log_log_segments", "Segments of a hosted replica's log", labels=labels)
        start = _gauge("spark_log_log_start_offset", "First offset of a hosted replica's log", labels=labels)
        end = _gauge("spark_log_log_end_offset", "Log end offset of a hosted replica", labels=labels)
        hw = _gauge("spark_log_partition_high_watermark", "High watermark of a partition this broker leads",
                    labels=labels)
        urp = _gauge("spark_log_partition_under_replicated", "1 when a partition this broker leads is under-replicated",
                     labels=labels)
        isr_size = _gauge("spark_log_partition_isr_size", "In-sync replicas of a partition this broker leads",
                          labels=labels)
        lso = _gauge("spark_log_partition_last_stable_offset", "Last stable offset of a partition this broker leads "
                     "(first offset of its oldest open transaction, capped by the high watermark)", labels=labels)
        lso_lag = _gauge("spark_log_partition_lso_lag", "High watermark - last stable offset of a partition this broker "
                         "leads: offsets a read_committed consumer cannot read yet", labels=labels)
        cleaned = _gauge("spark_log_cleaner_cleaned_offset", "Offset below which a compacted log is clean",
                         labels=labels)
        dirty = _gauge("spark_log_cleaner_dirty_ratio", "Dirty share of a compacted log's cleanable part",
                       labels=labels)
        tiered_end = _gauge("spark_log_tier_tiered_end_offset", "Offset below which the Delta tier durably holds a "
                            "tiered partition (remote.storage.enable)", labels=labels)
        tier_lag = _gauge("spark_log_tier_lag_offsets", "Offsets of a tiered partition that could be tiered and are "
                          "not yet (tierable end - tiered end)", labels=labels)
        high_watermarks: dict[tuple[str, int], int] = {}
        led = under_replicated = under_min_isr = 0
        for partition in hosted:
            key = [partition.topic, str(partition.partition)]
            try:
                offsets, nbytes, count = partition.storage_stats()
                status = partition.compaction_status() if partition.config.compact else None
            except SparkLogError:
                continue  # closed or deleted since it was listed
            size.add_metric(key, nbytes)
            segments.add_metric(key, count)
            start.add_metric(key, offsets.log_start_offset)
            end.add_metric(key, offsets.log_end_offset)
            high_watermarks[(partition.topic, partition.partition)] = offsets.high_watermark
            if status is not None:
                cleaned.add_metric(key, status.cleaned_offset)
                dirty.add_metric(key, status.dirty_ratio)
            if partition.config.remote_storage_enable:
                try:
                    tier = partition.tier_status()
                except SparkLogError:
                    continue
                tiered_end.add_metric(key, tier.tiered_end)
                tier_lag.add_metric(key, max(0, tier.tierable_end - tier.tiered_end))
            info = image.partition(partition.topic, partition.partition)
            if not partition.is_leader or info is None or info.leader != broker_id:
                continue
            led += 1
            hw.add_metric(key, offsets.high_watermark)
            lso.add_metric(key, offsets.last_stable_offset)
            lso_lag.add_metric(key, max(0, offsets.high_watermark - offsets.last_stable_offset))
            lagging = len(info.isr) < len(info.replicas) - len(info.adding_replicas)  # as Admin's under_replicated
            under_replicated += lagging
            urp.add_metric(key, 1 if lagging else 0)
            isr_size.add_metric(key, len(info.isr))
            if len(info.isr) < partition.config.min_insync_replicas:
                under_min_isr += 1
        yield _gauge("spark_log_replicas", "Replicas hosted by this broker", len(hosted))
        yield _gauge("spark_log_leader_partitions", "Partitions this broker leads", led)
        yield _gauge("spark_log_under_replicated_partitions", "Partitions this broker leads with a replica out of the ISR",
                     under_replicated)
        yield _gauge("spark_log_under_min_isr_partitions", "Partitions this broker leads with fewer in-sync replicas "
                     "than min.insync.replicas", under_min_isr)
        yield from (size, segments, start, end, hw, lso, lso_lag, urp, isr_size, cleaned, dirty, tiered_end, tier_lag)
        isr = self.isr
        yield CounterMetricFamily("spark_log_isr_shrinks", "ISR shrinks this broker made as leader", value=isr.shrinks)
        yield CounterMetricFamily("spark_log_isr_expands", "ISR expansions this broker made as leader", value=isr.expands)
        yield from self._groups(high_watermarks)
        pool = self.cleaner
        yield CounterMetricFamily("spark_log_cleaner_jobs", "Cleaner jobs done", value=pool.jobs_done)
        yield CounterMetricFamily("spark_log_cleaner_jobs_failed", "Cleaner jobs that failed", value=pool.jobs_failed)
        yield _gauge("spark_log_cleaner_busy_logs", "Logs being cleaned now", pool.busy())
        yield CounterMetricFamily("spark_log_cleaner_io_throttle_ms", "Time cleaner threads waited for their I/O limit",
                                  value=pool.throttle.throttled_ms)

    def _groups(self, high_watermarks: dict[tuple[str, int], int]) -> Iterator[Metric]:
        labels = ["group", "topic", "partition"]
        committed = _gauge("spark_log_group_committed_offset", "Committed offset of a group this broker coordinates",
                           labels=labels)
        lag = _gauge("spark_log_group_lag", "High watermark - committed offset (partitions hosted by the coordinator)",
                     labels=labels)
        groups = self.groups.committed_offsets()
        for group, offsets in sorted(groups.items()):
            for (topic, index), offset in sorted(offsets.items()):
                if topic == INTERNAL_TOPIC:
                    continue
                key = [group, topic, str(index)]
                committed.add_metric(key, offset)
                high = high_watermarks.get((topic, index))
                if high is not None:
                    lag.add_metric(key, max(0, high - offset))
        yield _gauge("spark_log_groups", "Groups with committed offsets this broker coordinates", len(groups))
        yield committed
        yield lag


class TransactionCollector(Collector):
    def __init__(self, *, coordinator: TxnCoordinatorStats, markers: MarkerCounts) -> None:
        self.coordinator = coordinator
        self.markers = markers

    def collect(self) -> Iterator[Metric]:
        coordinator = self.coordinator
        started, committed, aborted, timed_out = coordinator.stats.counts()
        yield CounterMetricFamily("spark_log_txn_started", "Transactions this broker's coordinator started",
                                  value=started)
        yield CounterMetricFamily("spark_log_txn_committed", "Transactions this broker's coordinator committed "
                                  "(every marker written)", value=committed)
        yield CounterMetricFamily("spark_log_txn_aborted", "Transactions this broker's coordinator aborted (every "
                                  "marker written; timed-out ones included)", value=aborted)
        yield CounterMetricFamily("spark_log_txn_timed_out", "Transactions this broker's coordinator aborted because "
                                  "they were open past their timeout", value=timed_out)
        by_state, oldest_ms = coordinator.open_transactions()
        open_now = _gauge("spark_log_txn_open", "Transactions not complete yet on this broker's coordinator, by state",
                          labels=["state"])
        for state, count in sorted(by_state.items(), key=lambda item: str(item[0].value)):
            open_now.add_metric([str(state.value)], count)
        yield open_now
        yield _gauge("spark_log_txn_oldest_open_age_ms", "Age of the oldest open transaction on this broker's "
                     "coordinator (ms); -1: none open", oldest_ms)
        yield _gauge("spark_log_txn_coordinator_partitions", "__transaction_state partitions this broker coordinates "
                     "(loaded)", len(coordinator.loaded_partitions()))
        commits, aborts = self.markers.written()
        markers = CounterMetricFamily("spark_log_txn_markers_written", "Transaction markers this broker wrote as a "
                                      "partition leader (replicated)", labels=["type"])
        markers.add_metric(["commit"], commits)
        markers.add_metric(["abort"], aborts)
        yield markers
