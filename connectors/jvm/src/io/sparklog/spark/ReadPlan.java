package io.sparklog.spark;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.regex.Pattern;

import org.apache.arrow.vector.types.pojo.Schema;
import org.apache.spark.sql.types.StructType;

/** What a read is, fixed on the driver when the query is planned (connectors/plan.py's
 *  ReadPlan), plus the driver-side offset logic of connectors/reader.py's _DriverSide and
 *  the pure planning math of connectors/offsets.py.  Serializable (its cluster is not). */
final class ReadPlan implements Serializable {
  final Options options;
  final String bootstrap;
  final String kind;
  final StructType fullSchema;
  final Map<String, Integer> timestampTypes = new HashMap<>();
  final String topicSchemaJson;  // typed topics: the Arrow schema's JSON, to compare with new topics
  transient Cluster cluster;

  ReadPlan(Options options) {
    this.options = options;
    this.bootstrap = options.bootstrap();
    Cluster c = cluster();
    List<String> topics = initialTopics(c);
    String k = null;
    Schema schema = null;
    List<String> schemaless = new ArrayList<>();
    for (String t : topics) {
      Cluster.TopicMeta meta = c.topic(t, false);
      if (meta.kind.equals("typed") && meta.latest() == null) schemaless.add(t);
      Schema s = meta.kind.equals("typed") ? meta.latest() : null;
      if (k != null && (!k.equals(meta.kind) || !Objects.equals(schema, s))) {
        throw new SparkLogException("SchemaMismatchError", 14, "a query reads topics of one schema; these differ: " + topics);
      }
      k = meta.kind;
      schema = s;
      timestampTypes.put(t, meta.timestampType);
    }
    if (!schemaless.isEmpty()) {
      throw new SparkLogException("NoSchemaError", 25, "typed topic(s) " + schemaless + " have no schema yet, so "
          + "there is nothing to read and no columns to infer: write to them first or register one");
    }
    kind = k == null ? "bytes" : k;
    boolean headers = options.bool("includeHeaders", false);
    if (kind.equals("typed") && headers) throw SparkLogException.config("includeHeaders", "applies to bytes topics only");
    fullSchema = SchemaMap.project(kind.equals("typed") ? SchemaMap.typedSchema(schema) : SchemaMap.bytesSchema(headers),
        options.names("columns"));
    topicSchemaJson = schema == null ? null : schema.toJson();
  }

  /** A typed topic's Arrow schema (null for bytes topics). */
  Schema topicSchema() {
    if (topicSchemaJson == null) return null;
    try {
      return Schema.fromJSON(topicSchemaJson);
    } catch (java.io.IOException e) {
      throw new IllegalStateException(e);
    }
  }

  Cluster cluster() {
    if (cluster == null) cluster = new Cluster(bootstrap, options.security);
    return cluster;
  }

  void close() {
    if (cluster != null) cluster.close();
    cluster = null;
  }

  private List<String> initialTopics(Cluster c) {
    List<String> subscribe = options.names("subscribe");
    if (subscribe != null) {  // those that exist (a deleted one: failOnDataLoss decides once offsets are compared)
      List<String> existing = existing(c, subscribe);
      if (existing.isEmpty()) {
        throw new SparkLogException("UnknownTopicOrPartitionError", ErrorCodes.UNKNOWN_TOPIC_OR_PARTITION,
            "none of the subscribed topics exists: " + subscribe);
      }
      return existing;
    }
    TreeSet<TopicPartition> assign = options.assign();
    if (assign != null) {
      TreeSet<String> names = new TreeSet<>();
      for (TopicPartition tp : assign) names.add(tp.topic);
      for (String t : names) c.topic(t, true);
      return new ArrayList<>(names);
    }
    return matching(c);
  }

  /** The topics of {@code names} that exist now, sorted. */
  private static List<String> existing(Cluster c, List<String> names) {
    java.util.Set<String> all = new java.util.HashSet<>(c.allTopics());
    List<String> out = new ArrayList<>();
    for (String t : names) if (all.contains(t)) out.add(t);
    Collections.sort(out);
    return out;
  }

  private List<String> matching(Cluster c) {
    Pattern p = Pattern.compile(options.get("subscribePattern"));
    List<String> out = new ArrayList<>();
    for (String t : c.allTopics()) if (p.matcher(t).matches()) out.add(t);
    Collections.sort(out);
    return out;
  }

  /** Topics read now: with subscribePattern, newly matching topics of the query's schema; with
   *  subscribe, the subscribed topics that exist (one created later joins, from offset 0, as
   *  with subscribePattern; a deleted one is left out, and failOnDataLoss decides). */
  List<String> topics() {
    List<String> subscribe = options.names("subscribe");
    TreeSet<TopicPartition> assign = options.assign();
    if (subscribe == null && assign != null) {
      TreeSet<String> names = new TreeSet<>();
      for (TopicPartition tp : assign) names.add(tp.topic);
      return new ArrayList<>(names);
    }
    List<String> out = new ArrayList<>();
    for (String t : subscribe != null ? existing(cluster(), subscribe) : matching(cluster())) {
      if (!timestampTypes.containsKey(t)) {
        Cluster.TopicMeta meta = cluster().topic(t, false);
        if (meta.kind.equals("typed") && meta.latest() == null) continue;
        String json = meta.latest() == null ? null : meta.latest().toJson();
        if (!meta.kind.equals(kind) || (kind.equals("typed") && !Objects.equals(json, topicSchemaJson))) {
          throw new SparkLogException("SchemaMismatchError", 14, "topic '" + t + "' matches '"
              + (subscribe != null ? "subscribe" : "subscribePattern") + "' but its "
              + "schema differs from the query's (" + meta.kind + " topic); a query reads topics of one schema");
        }
        timestampTypes.put(t, meta.timestampType);
      }
      out.add(t);
    }
    return out;
  }

  TreeMap<TopicPartition, Long> offsets(long spec) {
    for (int attempt = 1; ; attempt++) {
      try {
        return offsetsOnce(spec);
      } catch (SparkLogException e) {  // a topic deleted between listing the topics and their offsets: list again
        if (e.code != ErrorCodes.UNKNOWN_TOPIC_OR_PARTITION || options.assign() != null || attempt >= 3) throw e;
      }
    }
  }

  private TreeMap<TopicPartition, Long> offsetsOnce(long spec) {
    Cluster c = cluster();
    List<String> topics = topics();
    for (String t : topics) c.topic(t, true);
    TreeSet<TopicPartition> assign = options.assign();
    List<TopicPartition> parts = new ArrayList<>();
    for (TopicPartition tp : c.partitionsOf(topics)) if (assign == null || assign.contains(tp)) parts.add(tp);
    if (assign != null) {
      TreeSet<TopicPartition> missing = new TreeSet<>(assign);
      missing.removeAll(parts);
      if (!missing.isEmpty()) throw SparkLogException.config("assign", "names partitions that do not exist: " + missing);
    }
    return new TreeMap<>(c.listOffsets(parts, spec, options.readCommitted()));
  }

  TreeMap<TopicPartition, Long> latest() { return offsets(-1); }

  TreeMap<TopicPartition, Long> earliest() { return offsets(-2); }

  @SuppressWarnings("unchecked")
  TreeMap<TopicPartition, Long> starting(String dflt) {
    Long timestamp = options.longOpt("startingTimestamp", 0);
    if (timestamp != null) {  // each partition's first record with timestamp >= it; none: the partition's end
      TreeMap<TopicPartition, Long> latest = latest();
      TreeMap<TopicPartition, Long> found = offsets(timestamp);
      TreeMap<TopicPartition, Long> out = new TreeMap<>();
      for (Map.Entry<TopicPartition, Long> e : latest.entrySet()) {
        Long at = found.get(e.getKey());
        out.put(e.getKey(), at == null || at < 0 ? e.getValue() : at);
      }
      return out;
    }
    Object spec = options.spec("startingOffsets", Arrays.asList("earliest", "latest", "group"));
    if (spec == null) spec = dflt;
    TreeMap<TopicPartition, Long> latest = latest();
    if (spec.equals("latest")) return latest;
    TreeMap<TopicPartition, Long> earliest = earliest();
    if (spec.equals("earliest")) return earliest;
    if (spec.equals("group")) {  // checkReader: groupId is given
      return GroupProgress.fromGroup(new GroupProgress(options.groupId(), bootstrap, options.security).committed(),
          earliest, latest);
    }
    return resolve((TreeMap<TopicPartition, Long>) spec, earliest, latest, "startingOffsets");
  }

  static TreeMap<TopicPartition, Long> resolve(TreeMap<TopicPartition, Long> spec, Map<TopicPartition, Long> earliest,
                                               Map<TopicPartition, Long> latest, String option) {
    TreeSet<TopicPartition> unknown = new TreeSet<>(spec.keySet());
    unknown.removeAll(latest.keySet());
    TreeSet<TopicPartition> missing = new TreeSet<>(latest.keySet());
    missing.removeAll(spec.keySet());
    if (!unknown.isEmpty()) throw SparkLogException.config(option, "names partitions that are not read: " + unknown);
    if (!missing.isEmpty()) throw SparkLogException.config(option, "does not give an offset for: " + missing);
    TreeMap<TopicPartition, Long> out = new TreeMap<>();
    for (Map.Entry<TopicPartition, Long> e : spec.entrySet()) {
      long o = e.getValue();
      out.put(e.getKey(), o == -2 ? earliest.get(e.getKey()) : o == -1 ? latest.get(e.getKey()) : o);
    }
    return out;
  }

  /** connectors.offsets.plan_ranges: [start, end) per partition, split for minPartitions and
   *  maxRecordsPerPartition. Each long[] is {partition index into names, partition, start, end}. */
  static List<Object[]> planRanges(Map<TopicPartition, Long> start, Map<TopicPartition, Long> end, int minPartitions,
                                   Long maxPerPartition) {
    List<Object[]> whole = new ArrayList<>();
    long total = 0;
    for (Map.Entry<TopicPartition, Long> e : new TreeMap<>(end).entrySet()) {
      long s = start.getOrDefault(e.getKey(), 0L);
      if (e.getValue() > s) {
        whole.add(new Object[] {e.getKey(), s, e.getValue()});
        total += e.getValue() - s;
      }
    }
    boolean split = whole.size() < minPartitions;
    if (maxPerPartition != null) for (Object[] r : whole) if ((long) r[2] - (long) r[1] > maxPerPartition) split = true;
    if (!split || total == 0) return whole;
    List<Object[]> out = new ArrayList<>();
    for (Object[] r : whole) {
      long size = (long) r[2] - (long) r[1];
      long parts = 1;
      if (whole.size() < minPartitions) parts = Math.max(parts, (long) Math.ceil((double) size / total * minPartitions));
      if (maxPerPartition != null) parts = Math.max(parts, (size + maxPerPartition - 1) / maxPerPartition);
      parts = Math.min(parts, size);
      long base = size / parts, extra = size % parts;
      long offset = (long) r[1];
      for (long i = 0; i < parts; i++) {
        long step = base + (i < extra ? 1 : 0);
        out.add(new Object[] {r[0], offset, offset + step});
        offset += step;
      }
    }
    return out;
  }

  /** connectors.offsets.limit_bytes: latest capped so about maxBytes are read (soft). */
  static TreeMap<TopicPartition, Long> limitBytes(Map<TopicPartition, Long> start, Map<TopicPartition, Long> latest,
                                                  long maxBytes, Map<TopicPartition, Double> bytesPerRecord) {
    Map<TopicPartition, Long> backlog = new HashMap<>();
    Map<TopicPartition, Double> size = new HashMap<>();
    double total = 0;
    for (Map.Entry<TopicPartition, Long> e : latest.entrySet()) {
      long b = Math.max(0, e.getValue() - start.getOrDefault(e.getKey(), 0L));
      double s = Math.max(1.0, bytesPerRecord.getOrDefault(e.getKey(), 1.0));
      backlog.put(e.getKey(), b);
      size.put(e.getKey(), s);
      total += b * s;
    }
    TreeMap<TopicPartition, Long> out = new TreeMap<>();
    for (Map.Entry<TopicPartition, Long> e : latest.entrySet()) {
      TopicPartition tp = e.getKey();
      long begin = start.getOrDefault(tp, 0L);
      if (backlog.get(tp) == 0 || total <= maxBytes) {
        out.put(tp, e.getValue());
        continue;
      }
      long records = (long) Math.floor(maxBytes * (backlog.get(tp) * size.get(tp) / total) / size.get(tp));
      out.put(tp, begin + Math.min(backlog.get(tp), Math.max(1, records)));
    }
    return out;
  }

  /** connectors.offsets.limit_rows. */
  static TreeMap<TopicPartition, Long> limitRows(Map<TopicPartition, Long> start, Map<TopicPartition, Long> latest, long maxRows) {
    Map<TopicPartition, Long> backlog = new HashMap<>();
    long total = 0;
    for (Map.Entry<TopicPartition, Long> e : latest.entrySet()) {
      long b = Math.max(0, e.getValue() - start.getOrDefault(e.getKey(), 0L));
      backlog.put(e.getKey(), b);
      total += b;
    }
    TreeMap<TopicPartition, Long> out = new TreeMap<>();
    for (Map.Entry<TopicPartition, Long> e : latest.entrySet()) {
      long size = backlog.get(e.getKey());
      long begin = start.getOrDefault(e.getKey(), 0L);
      if (size == 0) {
        out.put(e.getKey(), e.getValue());
        continue;
      }
      long grant;
      if (total <= maxRows) {
        grant = size;
      } else {
        double share = (double) maxRows * size / total;
        grant = Math.min(size, share < 1 ? (long) Math.ceil(share) : (long) Math.floor(share));
      }
      out.put(e.getKey(), begin + grant);
    }
    return out;
  }
}
