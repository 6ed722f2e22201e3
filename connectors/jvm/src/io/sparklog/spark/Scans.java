package io.sparklog.spark;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

import org.apache.spark.SparkEnv;
import org.apache.spark.sql.connector.read.Batch;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.read.SupportsPushDownFilters;
import org.apache.spark.sql.connector.read.SupportsPushDownRequiredColumns;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.connector.read.streaming.Offset;
import org.apache.spark.sql.connector.read.streaming.ReadAllAvailable;
import org.apache.spark.sql.connector.read.streaming.ReadLimit;
import org.apache.spark.sql.connector.read.streaming.ReadMaxBytes;
import org.apache.spark.sql.connector.read.streaming.ReadMaxRows;
import org.apache.spark.sql.connector.read.streaming.SupportsTriggerAvailableNow;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnarBatch;
import org.apache.spark.storage.BlockManagerId;

/** Scan planning: column pruning, batch reads and micro-batch streams (connectors/reader.py). */
final class Scans {
  private Scans() {}
  static final boolean PROFILE = System.getenv("SPARK_LOG_JVM_PROFILE") != null;

  static final class Builder implements ScanBuilder, SupportsPushDownRequiredColumns, SupportsPushDownFilters {
    private final ReadPlan plan;
    private StructType required;
    /** pushFilters=true (batch reads): what the scan absorbed of Spark's filters. */
    private final Pushdown pushdown;

    Builder(ReadPlan plan) {
      this.plan = plan;
      this.required = plan.fullSchema;
      this.pushdown = new Pushdown(plan.kind.equals("typed") ? plan.topicSchema() : null);
    }

    @Override public void pruneColumns(StructType requiredSchema) {
      StructType out = new StructType();
      for (StructField f : plan.fullSchema.fields()) {
        if (requiredSchema.getFieldIndex(f.name()).isDefined()) out = out.add(f);
      }
      required = out;
    }

    /** Spark 4 pushes filters to batch scans only (a new ScanBuilder per query, so a later
     *  query on the same DataFrame never sees earlier filters); without pushFilters=true
     *  nothing is absorbed, as in the Python source. */
    @Override public Filter[] pushFilters(Filter[] filters) {
      if (!plan.options.bool("pushFilters", false)) return filters;
      return pushdown.push(filters);
    }

    @Override public Filter[] pushedFilters() { return pushdown.pushed.toArray(new Filter[0]); }

    @Override public Scan build() { return new SparkLogScan(plan, required, pushdown); }
  }

  static final class SparkLogScan implements Scan {
    private final ReadPlan plan;
    private final StructType schema;
    private final Pushdown pushdown;

    SparkLogScan(ReadPlan plan, StructType schema, Pushdown pushdown) {
      this.plan = plan;
      this.schema = schema;
      this.pushdown = pushdown;
    }

    @Override public StructType readSchema() { return schema; }

    @Override public String description() {
      return "spark-log(JVM) " + plan.options.values.keySet() + (pushdown.pushed.isEmpty() ? "" : " pushed " + pushdown.pushed);
    }

    @Override public Batch toBatch() {
      plan.options.checkBatch();
      return new RangeBatch(plan, schema, pushdown);
    }

    /** The FETCH pushdown block of the typed-column predicates, projecting the data columns the
     *  scan reads (null: none pushed). */
    static byte[] block(ReadPlan plan, StructType schema, Pushdown pushdown) {
      if (pushdown.rowPredicates.isEmpty()) return null;
      List<String> columns = new ArrayList<>();
      org.apache.arrow.vector.types.pojo.Schema topic = plan.topicSchema();
      for (StructField f : schema.fields()) {
        for (org.apache.arrow.vector.types.pojo.Field t : topic.getFields()) {
          if (t.getName().equals(f.name())) columns.add(f.name());
        }
      }
      return pushdown.block(columns);
    }

    @Override public MicroBatchStream toMicroBatchStream(String checkpointLocation) {
      plan.options.checkStreaming();
      return new Stream(plan, schema);
    }
  }

  /** Preferred locations of a partition: for each of its replicas (leader first, then the
   *  in-sync replicas) the executor that broker is paired with, as {@code executor_<host>_<id>};
   *  hosts alone when no executor is known.  A broker's executor: among the executors on the
   *  broker's host (sorted by executor id), the one at position broker id mod their number, so
   *  several brokers on one host (a local cluster) each have their own executor and a task
   *  reading a partition prefers the executor of the partition's leader.  {@link #LAST} keeps
   *  the latest plan's choices (tests and benches show them beside Spark's task list). */
  static final class Locality {
    static final Map<String, String[]> LAST = new java.util.concurrent.ConcurrentHashMap<>();
    private final Map<String, List<String>> executors = new HashMap<>();

    Locality() {
      try {
        SparkEnv env = SparkEnv.get();
        if (env == null) return;
        BlockManagerId self = env.blockManager().blockManagerId();
        List<BlockManagerId> ids = new ArrayList<>(
            scala.jdk.javaapi.CollectionConverters.asJava(env.blockManager().master().getPeers(self)));
        ids.sort(java.util.Comparator.comparing((BlockManagerId id) -> id.executorId().length())
            .thenComparing(BlockManagerId::executorId));
        for (BlockManagerId id : ids) {
          if (id.isDriver()) continue;
          executors.computeIfAbsent(id.host(), h -> new ArrayList<>()).add("executor_" + id.host() + "_" + id.executorId());
        }
      } catch (RuntimeException ignored) {
        // no executors known: hosts only
      }
    }

    String[] of(Cluster cluster, TopicPartition tp) {
      Cluster.TopicMeta meta = cluster.topic(tp.topic, false);
      LinkedHashSet<Integer> replicas = new LinkedHashSet<>();
      for (Cluster.PartitionMeta p : meta.partitions) {
        if (p.partition != tp.partition) continue;
        if (p.leader >= 0) replicas.add(p.leader);
        for (int r : p.isr) replicas.add(r);
      }
      LinkedHashSet<String> out = new LinkedHashSet<>();
      LinkedHashSet<String> hosts = new LinkedHashSet<>();
      for (int r : replicas) {
        Cluster.Broker b = cluster.brokers().get(r);
        if (b == null) continue;
        hosts.add(b.host());
        List<String> found = executors.get(b.host());
        if (found != null && !found.isEmpty()) out.add(found.get(Math.floorMod(r, found.size())));
      }
      String[] chosen = (out.isEmpty() ? hosts : out).toArray(new String[0]);
      LAST.put(tp.toString(), chosen);
      return chosen;
    }

    /** LAST as text, one "topic-partition location,location" a line (for tests and benches). */
    static String last() {
      StringBuilder b = new StringBuilder();
      for (Map.Entry<String, String[]> e : new java.util.TreeMap<>(LAST).entrySet()) {
        b.append(e.getKey()).append(' ').append(String.join(",", e.getValue())).append('\n');
      }
      return b.toString();
    }
  }

  static List<InputPartition> partitions(ReadPlan plan, StructType schema, Map<TopicPartition, Long> start,
                                         Map<TopicPartition, Long> end) {
    Long min = plan.options.longOpt("minPartitions", 1);
    List<Object[]> ranges = ReadPlan.planRanges(start, end, min == null ? 1 : min.intValue(),
        plan.options.longOpt("maxRecordsPerPartition", 1));
    Locality locality = new Locality();
    List<InputPartition> out = new ArrayList<>();
    for (Object[] r : ranges) {
      TopicPartition tp = (TopicPartition) r[0];
      out.add(new RangePartition(tp.topic, tp.partition, (long) r[1], (long) r[2], locality.of(plan.cluster(), tp),
          plan.cluster().knownEpoch(tp.topic, tp.partition)));
    }
    return out;
  }

  static final class RangeBatch implements Batch {
    private final ReadPlan plan;
    private final StructType schema;
    private final Pushdown pushdown;

    RangeBatch(ReadPlan plan, StructType schema, Pushdown pushdown) {
      this.plan = plan;
      this.schema = schema;
      this.pushdown = pushdown;
    }

    @SuppressWarnings("unchecked")
    @Override public InputPartition[] planInputPartitions() {
      try {
        TreeMap<TopicPartition, Long> begin = plan.starting("earliest");
        TreeMap<TopicPartition, Long> latest = plan.latest();
        Object ending = plan.options.spec("endingOffsets", java.util.Arrays.asList("latest"));
        TreeMap<TopicPartition, Long> end = ending == null || ending.equals("latest") ? latest
            : ReadPlan.resolve((TreeMap<TopicPartition, Long>) ending, plan.earliest(), latest, "endingOffsets");
        checkOrder(begin, end, plan.options.longOpt("startingTimestamp", 0) != null ? "startingTimestamp" : "startingOffsets");
        if (pushdown.minTimestamp != null) {  // each partition from its first record at or after the time (none: its end)
          TreeMap<TopicPartition, Long> byTime = plan.offsets(pushdown.minTimestamp);
          for (Map.Entry<TopicPartition, Long> e : begin.entrySet()) {
            Long at = byTime.get(e.getKey());
            long from = at == null || at < 0 ? end.getOrDefault(e.getKey(), e.getValue()) : at;
            e.setValue(Math.max(e.getValue(), from));
          }
        }
        List<TreeMap<TopicPartition, Long>> narrowed = pushdown.narrow(begin, end);
        return partitions(plan, schema, narrowed.get(0), narrowed.get(1)).toArray(new InputPartition[0]);
      } finally {
        plan.close();
      }
    }

    /** Refuse a read whose start is after its end in some partition, as the Python source's
     *  offsets.check_order does (and Kafka's source asserts): before pushdown narrows the ranges. */
    static void checkOrder(Map<TopicPartition, Long> begin, Map<TopicPartition, Long> end, String starting) {
      StringBuilder names = new StringBuilder();
      for (Map.Entry<TopicPartition, Long> e : new TreeMap<>(begin).entrySet()) {
        Long until = end.get(e.getKey());
        if (until == null || e.getValue() <= until) continue;
        if (names.length() > 0) names.append(", ");
        names.append(e.getKey().topic).append('-').append(e.getKey().partition).append(" starts at ").append(e.getValue())
            .append(" > ").append(until);
      }
      if (names.length() > 0) {
        throw new SparkLogException("InvalidConfigError", 0, "option '" + starting + "' starts after option 'endingOffsets' ends: "
            + names);
      }
    }

    @Override public PartitionReaderFactory createReaderFactory() {
      return new ReaderFactory(plan, schema, SparkLogScan.block(plan, schema, pushdown));
    }
  }

  static final class SparkLogOffset extends Offset {
    final TreeMap<TopicPartition, Long> offsets;
    private final String json;

    SparkLogOffset(Map<TopicPartition, Long> offsets) {
      this.offsets = new TreeMap<>(offsets);
      this.json = Json.offsets(this.offsets);
    }

    @Override public String json() { return json; }
  }

  static final class Stream implements MicroBatchStream, SupportsTriggerAvailableNow {
    private final ReadPlan plan;
    private final StructType schema;
    private TreeMap<TopicPartition, Long> target;
    private TreeMap<TopicPartition, Long> lastLatest;

    /** groupId: each completed micro-batch's end offsets published to the group (GroupProgress). */
    private final GroupProgress progress;

    Stream(ReadPlan plan, StructType schema) {
      this.plan = plan;
      this.schema = schema;
      String group = plan.options.groupId();
      this.progress = group == null ? null : new GroupProgress(group, plan.bootstrap, plan.options.security);
    }

    @Override public Offset initialOffset() { return new SparkLogOffset(plan.starting("latest")); }

    @Override public Offset deserializeOffset(String json) {
      try {
        return new SparkLogOffset(Json.parseOffsets(json));
      } catch (IllegalArgumentException e) {
        throw new SparkLogException("InvalidConfigError", 3, "offsets are not valid: " + e.getMessage());
      }
    }

    @Override public Offset latestOffset() { throw new UnsupportedOperationException("latestOffset(start, limit) is used"); }

    @Override public ReadLimit getDefaultReadLimit() {
      Long max = plan.options.longOpt("maxOffsetsPerTrigger", 1);
      Long maxBytes = plan.options.longOpt("maxBytesPerTrigger", 1);
      return max != null ? ReadLimit.maxRows(max) : maxBytes != null ? ReadLimit.maxBytes(maxBytes) : ReadLimit.allAvailable();
    }

    /** Each partition's stored bytes per record, sampled once (maxBytesPerTrigger). */
    private final Map<TopicPartition, Double> recordBytes = new HashMap<>();

    @Override public void prepareForTriggerAvailableNow() { target = plan.latest(); }

    @Override public Offset latestOffset(Offset startOffset, ReadLimit limit) {
      long t0 = System.nanoTime();
      try {
        return latestOffset0(startOffset, limit);
      } finally {
        if (PROFILE) System.err.printf("spark-log profile driver: latestOffset %.1f ms%n", (System.nanoTime() - t0) / 1e6);
      }
    }

    private Offset latestOffset0(Offset startOffset, ReadLimit limit) {
      TreeMap<TopicPartition, Long> begin = ((SparkLogOffset) startOffset).offsets;
      if (progress != null) progress.publish(begin);  // the start ends the last completed micro-batch
      TreeMap<TopicPartition, Long> latest = target != null ? target : plan.latest();
      lastLatest = latest;
      boolean failOnDataLoss = plan.options.bool("failOnDataLoss", true);
      List<String> lost = new ArrayList<>();
      for (Map.Entry<TopicPartition, Long> e : begin.entrySet()) {
        Long now = latest.get(e.getKey());
        if (now == null) lost.add(e.getKey() + " no longer exists");
        else if (now < e.getValue()) lost.add(e.getKey() + " ends at " + now + " < " + e.getValue() + " already read");
      }
      if (failOnDataLoss && !lost.isEmpty()) {
        throw new SparkLogException("OffsetOutOfRangeError", 11, "data loss: " + String.join("; ", lost)
            + ". Set failOnDataLoss=false to go on without it.");
      }
      TreeMap<TopicPartition, Long> end = new TreeMap<>(latest);
      if (!(limit instanceof ReadAllAvailable)) {
        Long maxRows = limit instanceof ReadMaxRows ? Long.valueOf(((ReadMaxRows) limit).maxRows())
            : plan.options.longOpt("maxOffsetsPerTrigger", 1);
        if (maxRows != null) end = ReadPlan.limitRows(begin, end, maxRows);
        Long maxBytes = limit instanceof ReadMaxBytes ? Long.valueOf(((ReadMaxBytes) limit).maxBytes())
            : plan.options.longOpt("maxBytesPerTrigger", 1);
        if (maxBytes != null) {
          for (Map.Entry<TopicPartition, Long> e : end.entrySet()) {
            long from = begin.getOrDefault(e.getKey(), 0L);
            if (e.getValue() > from && !recordBytes.containsKey(e.getKey())) {
              Double sampled = plan.cluster().storedBytesPerRecord(e.getKey(), from, plan.options.readCommitted());
              if (sampled != null) recordBytes.put(e.getKey(), sampled);
            }
          }
          end = ReadPlan.limitBytes(begin, end, maxBytes, recordBytes);
        }
      }
      TreeMap<TopicPartition, Long> merged = new TreeMap<>();
      for (Map.Entry<TopicPartition, Long> e : begin.entrySet()) {
        if (latest.containsKey(e.getKey())) merged.put(e.getKey(), e.getValue());
      }
      merged.putAll(end);
      return new SparkLogOffset(merged);
    }

    @Override public Offset reportLatestOffset() {
      return new SparkLogOffset(lastLatest != null ? lastLatest : plan.latest());
    }

    /** The last planning's offsets and answer: Spark plans each micro-batch's scan twice (the
     *  physical plan, then the copy it prepares for execution, both holding the same start and end
     *  Offset objects) and asks both for the input partitions; the second gets the first's answer
     *  (no second executor lookup, an RPC to the block manager master, nor metadata reads).  A
     *  later batch comes with new Offset objects and is planned anew. */
    private Offset plannedStart, plannedEnd;
    private InputPartition[] planned;
    /** Micro-batch plannings (not reused) in this JVM, for tests (PlanProbe). */
    static final java.util.concurrent.atomic.AtomicLong PLANNINGS = new java.util.concurrent.atomic.AtomicLong();

    @Override public InputPartition[] planInputPartitions(Offset start, Offset end) {
      long t0 = System.nanoTime();
      boolean again = planned != null && start == plannedStart && end == plannedEnd;
      if (!again) {
        planned = partitions(plan, schema, ((SparkLogOffset) start).offsets, ((SparkLogOffset) end).offsets)
            .toArray(new InputPartition[0]);
        plannedStart = start;
        plannedEnd = end;
        PLANNINGS.incrementAndGet();
      }
      if (PROFILE) {
        System.err.printf("spark-log profile driver: planInputPartitions %.1f ms%s%n", (System.nanoTime() - t0) / 1e6,
            again ? " (the same batch's second planning: reused)" : "");
      }
      return planned.clone();
    }

    @Override public PartitionReaderFactory createReaderFactory() { return new ReaderFactory(plan, schema); }

    /** Progress lives in Spark's checkpoint; with groupId the completed end is also published. */
    @Override public void commit(Offset end) {
      if (progress != null) progress.publish(((SparkLogOffset) end).offsets);
    }

    @Override public void stop() { plan.close(); }
  }

  static final class RangePartition implements InputPartition {
    final String topic;
    final int partition;
    final long start, end;
    final String[] locations;
    /** The partition's leader epoch in the driver's metadata when planned (-1: unknown): the task's
     *  reader takes no answer from an older one. */
    final int leaderEpoch;

    RangePartition(String topic, int partition, long start, long end, String[] locations) {
      this(topic, partition, start, end, locations, -1);
    }

    RangePartition(String topic, int partition, long start, long end, String[] locations, int leaderEpoch) {
      this.topic = topic; this.partition = partition; this.start = start; this.end = end; this.locations = locations;
      this.leaderEpoch = leaderEpoch;
    }

    @Override public String[] preferredLocations() { return locations; }

    @Override public String toString() { return topic + "-" + partition + "[" + start + ", " + end + ")"; }
  }

  static final class ReaderFactory implements PartitionReaderFactory {
    private final ReadPlan plan;
    private final StructType schema;
    /** The FETCH pushdown block (typed-column predicates for the brokers), or null. */
    private final byte[] pushBlock;

    ReaderFactory(ReadPlan plan, StructType schema) { this(plan, schema, null); }

    ReaderFactory(ReadPlan plan, StructType schema, byte[] pushBlock) {
      this.plan = plan; this.schema = schema; this.pushBlock = pushBlock;
    }

    @Override public PartitionReader<InternalRow> createReader(InputPartition partition) {
      throw new UnsupportedOperationException("spark-log reads columnar batches");
    }

    @Override public boolean supportColumnarReads(InputPartition partition) { return true; }

    @Override public PartitionReader<ColumnarBatch> createColumnarReader(InputPartition partition) {
      return new RangeReader(plan, schema, (RangePartition) partition, pushBlock);
    }
  }
}
