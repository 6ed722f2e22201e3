package io.sparklog.spark;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.regex.Pattern;
import java.util.regex.PatternSyntaxException;

/** Reader and writer options, validated as connectors/options.py validates them (same names,
 *  same meanings, same refusals).  Options the JVM implementation does not implement yet are
 *  refused by name with InvalidConfigError rather than ignored. */
final class Options implements Serializable {
  static final List<String> READER = Arrays.asList("bootstrap", "subscribe", "subscribePattern", "assign",
      "startingOffsets", "endingOffsets", "startingTimestamp", "maxOffsetsPerTrigger", "maxBytesPerTrigger",
      "minPartitions", "maxRecordsPerPartition", "failOnDataLoss", "includeHeaders", "isolationLevel", "columns",
      "pushFilters", "pollTimeoutMs", "groupId");
  static final List<String> WRITER = Arrays.asList("bootstrap", "topic", "keyColumns", "acks", "compression",
      "batchSize", "timeoutMs", "tombstoneColumn", "createTopic", "partitions", "replicationFactor", "transactional",
      "transactionTimeoutMs");
  /** Accepted names the JVM implementation refuses (use the Python connector for them): none now
   *  (what it still lacks is refused where it is checked, e.g. typed writes that need a cast). */
  static final Set<String> NOT_YET = new TreeSet<>();
  private static final Set<String> SPARK_OWNED = new TreeSet<>(Arrays.asList("path", "checkpointlocation", "queryname"));

  final Map<String, String> values;
  /** kafka.security.protocol, kafka.ssl.*, kafka.sasl.*, kafka.client.id (Security.parse). */
  final Security security;

  private Options(Map<String, String> values, Security security) { this.values = values; this.security = security; }

  static Options parse(Map<String, String> raw, List<String> known) {
    Map<String, String> byLower = new HashMap<>();
    for (String k : known) byLower.put(k.toLowerCase(Locale.ROOT), k);
    Map<String, String> out = new TreeMap<>();
    Map<String, String> client = new TreeMap<>();
    for (Map.Entry<String, String> e : raw.entrySet()) {
      String lower = e.getKey().toLowerCase(Locale.ROOT);
      if (lower.equals("kafka.bootstrap.servers")) lower = "bootstrap";
      if (SPARK_OWNED.contains(lower)) continue;
      if (lower.startsWith("kafka.")) {
        client.put(e.getKey(), e.getValue());
        continue;
      }
      String name = byLower.get(lower);
      if (name == null) {
        throw SparkLogException.config(e.getKey(), "unknown option for spark-log; known options: " + String.join(", ", new TreeSet<>(known)));
      }
      if (out.containsKey(name) && !out.get(name).equals(e.getValue())) {
        throw SparkLogException.config(e.getKey(), "contradicts '" + name + "' given as '" + out.get(name) + "'");
      }
      if (NOT_YET.contains(name)) {
        throw SparkLogException.config(name, "is not supported by the JVM implementation of spark-log yet; use the "
            + "Python connector (leave the spark-log jar off spark.jars)");
      }
      out.put(name, e.getValue());
    }
    Options o = new Options(out, Security.parse(client));
    if (known == READER) o.checkReader();
    return o;
  }

  String get(String name) { return values.get(name); }

  boolean has(String name) { return values.containsKey(name); }

  String bootstrap() {
    String b = values.get("bootstrap");
    if (b != null) {
      if (b.trim().isEmpty()) throw SparkLogException.config("bootstrap", "must not be empty");
      return b.trim();
    }
    String env = System.getenv("SPARK_LOG_BOOTSTRAP");
    if (env == null || env.isEmpty()) {
      throw SparkLogException.config("bootstrap", "no broker address: give option 'bootstrap' or set SPARK_LOG_BOOTSTRAP");
    }
    return env;
  }

  Long longOpt(String name, long minimum) {
    String v = values.get(name);
    if (v == null) return null;
    long n;
    try {
      n = Long.parseLong(v.trim());
    } catch (NumberFormatException e) {
      throw SparkLogException.config(name, "must be an integer, got '" + v + "'");
    }
    if (n < minimum) throw SparkLogException.config(name, "must be >= " + minimum + ", got " + n);
    return n;
  }

  boolean bool(String name, boolean dflt) {
    String v = values.get(name);
    if (v == null) return dflt;
    String t = v.trim().toLowerCase(Locale.ROOT);
    if (!t.equals("true") && !t.equals("false")) throw SparkLogException.config(name, "must be true or false, got '" + v + "'");
    return t.equals("true");
  }

  List<String> names(String name) {
    String v = values.get(name);
    if (v == null) return null;
    List<String> items = new ArrayList<>();
    for (String s : v.split(",", -1)) {
      if (s.trim().isEmpty()) throw SparkLogException.config(name, "must be a comma-separated list of names, got '" + v + "'");
      items.add(s.trim());
    }
    if (new LinkedHashSet<>(items).size() != items.size()) throw SparkLogException.config(name, "names a column twice: '" + v + "'");
    return items;
  }

  /** The assign option's partitions. */
  @SuppressWarnings("unchecked")
  TreeSet<TopicPartition> assign() {
    String v = values.get("assign");
    if (v == null) return null;
    TreeSet<TopicPartition> out = new TreeSet<>();
    try {
      Object parsed = Json.parse(v);
      if (!(parsed instanceof Map) || ((Map<String, Object>) parsed).isEmpty()) throw new IllegalArgumentException();
      for (Map.Entry<String, Object> e : ((Map<String, Object>) parsed).entrySet()) {
        if (!(e.getValue() instanceof List) || ((List<Object>) e.getValue()).isEmpty()) throw new IllegalArgumentException();
        for (Object p : (List<Object>) e.getValue()) {
          if (!(p instanceof Long) || (Long) p < 0 || (Long) p > Integer.MAX_VALUE) throw new IllegalArgumentException();
          out.add(new TopicPartition(e.getKey(), ((Long) p).intValue()));
        }
      }
    } catch (RuntimeException e) {
      throw SparkLogException.config("assign", "must be JSON like {\"topic\": [0, 1]}, got '" + v + "'");
    }
    return out;
  }

  /** startingOffsets / endingOffsets: "earliest", "latest" or parsed JSON offsets (-2, -1 allowed as noted). */
  Object spec(String name, List<String> allow) {
    String v = values.get(name);
    if (v == null) return null;
    String word = v.trim().toLowerCase(Locale.ROOT);
    if (word.equals("earliest") || word.equals("latest") || word.equals("group")) {
      if (!allow.contains(word)) throw SparkLogException.config(name, "'" + word + "' is not allowed here");
      return word;
    }
    TreeMap<TopicPartition, Long> offsets;
    try {
      offsets = Json.parseOffsets(v);
    } catch (RuntimeException e) {
      throw SparkLogException.config(name, "must be " + allow + " or JSON like {\"topic\": {\"0\": 23, \"1\": -2}}: " + e.getMessage());
    }
    for (Map.Entry<TopicPartition, Long> e : offsets.entrySet()) {
      long o = e.getValue();
      if (o < -2) throw SparkLogException.config(name, "offset " + o + " of " + e.getKey() + " is invalid");
      if (o == -2 && !allow.contains("earliest")) throw SparkLogException.config(name, "-2 (earliest) is not allowed here");
      if (o == -1 && !allow.contains("latest")) throw SparkLogException.config(name, "-1 (latest) is not allowed here");
    }
    return offsets;
  }

  private void checkReader() {
    List<String> chosen = new ArrayList<>();
    for (String n : new String[] {"subscribe", "subscribePattern", "assign"}) if (has(n)) chosen.add(n);
    if (chosen.size() != 1) {
      throw SparkLogException.config(chosen.isEmpty() ? "subscribe" : chosen.get(chosen.size() - 1),
          "exactly one of 'subscribe', 'subscribePattern' or 'assign' is required; "
              + (chosen.isEmpty() ? "none was given" : "got " + chosen));
    }
    if (has("subscribePattern")) {
      try {
        Pattern.compile(get("subscribePattern"));
      } catch (PatternSyntaxException e) {
        throw SparkLogException.config("subscribePattern", "is not a valid regular expression: " + e.getDescription());
      }
    }
    names("subscribe");
    assign();
    Object starting = spec("startingOffsets", Arrays.asList("earliest", "latest", "group"));
    String group = get("groupId");
    if (group != null && (group.trim().isEmpty() || group.trim().length() > 249)) {
      throw SparkLogException.config("groupId", "must be 1-249 characters, got '" + group + "'");
    }
    if ("group".equals(starting) && group == null) {
      throw SparkLogException.config("startingOffsets", "is 'group': give the group with option 'groupId'");
    }
    spec("endingOffsets", Arrays.asList("latest"));
    if (has("startingOffsets") && has("startingTimestamp")) {
      throw SparkLogException.config("startingTimestamp", "contradicts 'startingOffsets': give one of them");
    }
    longOpt("startingTimestamp", 0);
    longOpt("maxOffsetsPerTrigger", 1);
    longOpt("maxBytesPerTrigger", 1);
    longOpt("minPartitions", 1);
    longOpt("maxRecordsPerPartition", 1);
    longOpt("pollTimeoutMs", 1);
    bool("failOnDataLoss", true);
    bool("includeHeaders", false);
    bool("pushFilters", false);
    String iso = get("isolationLevel");
    if (iso != null && !iso.trim().toLowerCase(Locale.ROOT).matches("read_uncommitted|read_committed")) {
      throw SparkLogException.config("isolationLevel", "must be read_uncommitted or read_committed, got '" + iso + "'");
    }
    names("columns");
  }

  boolean readCommitted() {
    String iso = get("isolationLevel");
    return iso != null && iso.trim().toLowerCase(Locale.ROOT).equals("read_committed");
  }

  /** groupId, trimmed (null without it). */
  String groupId() {
    String g = get("groupId");
    return g == null ? null : g.trim();
  }

  void checkStreaming() {
    if (has("endingOffsets")) throw SparkLogException.config("endingOffsets", "is for batch queries; a stream has no end");
    if (bool("pushFilters", false)) throw SparkLogException.config("pushFilters", "is for batch queries");
  }

  void checkBatch() {
    if ("latest".equals(spec("startingOffsets", Arrays.asList("earliest", "latest", "group")))) {
      throw SparkLogException.config("startingOffsets", "cannot be 'latest' for a batch query");
    }
    if (has("groupId")) {
      throw SparkLogException.config("groupId", "is for streaming queries (it publishes each micro-batch's progress)");
    }
    for (String n : new String[] {"maxOffsetsPerTrigger", "maxBytesPerTrigger"}) {
      if (has(n)) throw SparkLogException.config(n, "is for streaming queries; a batch query reads its whole range");
    }
  }
}
