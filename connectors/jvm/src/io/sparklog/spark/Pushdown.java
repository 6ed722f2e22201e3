package io.sparklog.spark;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

import org.apache.spark.sql.sources.EqualTo;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.sources.GreaterThan;
import org.apache.spark.sql.sources.GreaterThanOrEqual;
import org.apache.spark.sql.sources.In;
import org.apache.spark.sql.sources.LessThan;
import org.apache.spark.sql.sources.LessThanOrEqual;

/** Filter pushdown for batch reads (option pushFilters=true), as connectors/filters.py does it:
 *
 *  <pre>
 *  predicate                          effect                                  Spark re-checks
 *  topic/partition =, IN, &lt;, ...      drop whole topic partitions             no
 *  offset =, &lt;, &lt;=, &gt;, &gt;=             shrink [start, end)                     no
 *  offset IN (...)                    shrink to [min, max + 1)                yes
 *  timestamp &gt; / &gt;=                   start at the first offset by time       yes
 *  </pre>
 *
 *  Everything else is left to Spark.  Not done here (yet): the Python source also sends simple
 *  predicates on a typed topic's columns to the brokers as a row filter (a Substrait expression
 *  in the gRPC Fetch, which the data listener's FETCH does not carry); Spark evaluates them after
 *  the read, so the rows are the same, only more of them travel. */
final class Pushdown {
  final List<Object[]> topicTests = new ArrayList<>();      // {op, value}
  final List<Object[]> partitionTests = new ArrayList<>();
  long offsetLow = 0;        // inclusive
  Long offsetHigh = null;    // exclusive
  Long minTimestamp = null;  // ms
  final List<Filter> pushed = new ArrayList<>();

  /** Absorb what it can of {@code filters}; returns the filters Spark must still evaluate. */
  Filter[] push(Filter[] filters) {
    List<Filter> remaining = new ArrayList<>();
    for (Filter f : filters) {
      String column = column(f);
      String op = op(f);
      Object value = value(f);
      if (("topic".equals(column) || "partition".equals(column)) && op != null && comparable(column, f)) {
        (column.equals("topic") ? topicTests : partitionTests).add(new Object[] {op, value});
        pushed.add(f);
        continue;
      }
      if ("offset".equals(column) && op != null && !op.equals("in") && integral(value)) {
        long v = ((Number) value).longValue();
        long low;
        Long high;
        switch (op) {
          case "eq": low = v; high = v + 1; break;
          case "gt": low = v + 1; high = null; break;
          case "ge": low = v; high = null; break;
          case "lt": low = 0; high = v; break;
          default: low = 0; high = v + 1; break;  // le
        }
        offsetLow = Math.max(offsetLow, low);
        if (high != null) offsetHigh = offsetHigh == null ? high : Math.min(offsetHigh, high);
        pushed.add(f);
        continue;
      }
      if ("offset".equals(column) && "in".equals(op)) {
        Object[] values = ((In) f).values();
        boolean ints = values.length > 0;
        for (Object x : values) ints &= integral(x);
        if (ints) {
          long min = Long.MAX_VALUE, max = Long.MIN_VALUE;
          for (Object x : values) {
            min = Math.min(min, ((Number) x).longValue());
            max = Math.max(max, ((Number) x).longValue());
          }
          offsetLow = Math.max(offsetLow, min);
          offsetHigh = offsetHigh == null ? max + 1 : Math.min(offsetHigh, max + 1);
          pushed.add(f);
        }
      } else if ("timestamp".equals(column) && ("gt".equals(op) || "ge".equals(op))) {
        Long ms = millis(value);
        if (ms != null) {
          minTimestamp = minTimestamp == null ? ms : Math.max(minTimestamp, ms);
          pushed.add(f);
        }
      }
      remaining.add(f);
    }
    return remaining.toArray(new Filter[0]);
  }

  boolean keep(TopicPartition tp) {
    for (Object[] t : topicTests) if (!test((String) t[0], tp.topic, t[1])) return false;
    for (Object[] t : partitionTests) if (!test((String) t[0], (long) tp.partition, t[1])) return false;
    return true;
  }

  /** [begin, end) restricted to the absorbed topic, partition and offset predicates: {begin, end}. */
  List<TreeMap<TopicPartition, Long>> narrow(Map<TopicPartition, Long> begin, Map<TopicPartition, Long> end) {
    TreeMap<TopicPartition, Long> b = new TreeMap<>(), e = new TreeMap<>();
    for (Map.Entry<TopicPartition, Long> x : end.entrySet()) {
      if (!keep(x.getKey())) continue;
      b.put(x.getKey(), Math.max(begin.getOrDefault(x.getKey(), 0L), offsetLow));
      e.put(x.getKey(), offsetHigh == null ? x.getValue() : Math.min(x.getValue(), offsetHigh));
    }
    List<TreeMap<TopicPartition, Long>> out = new ArrayList<>();
    out.add(b);
    out.add(e);
    return out;
  }

  private static String column(Filter f) {
    String[] refs = f.references();
    return refs.length == 1 ? refs[0] : null;
  }

  private static String op(Filter f) {
    if (f instanceof EqualTo) return "eq";
    if (f instanceof GreaterThan) return "gt";
    if (f instanceof GreaterThanOrEqual) return "ge";
    if (f instanceof LessThan) return "lt";
    if (f instanceof LessThanOrEqual) return "le";
    if (f instanceof In) return "in";
    return null;
  }

  private static Object value(Filter f) {
    if (f instanceof EqualTo) return ((EqualTo) f).value();
    if (f instanceof GreaterThan) return ((GreaterThan) f).value();
    if (f instanceof GreaterThanOrEqual) return ((GreaterThanOrEqual) f).value();
    if (f instanceof LessThan) return ((LessThan) f).value();
    if (f instanceof LessThanOrEqual) return ((LessThanOrEqual) f).value();
    if (f instanceof In) return ((In) f).values();
    return null;
  }

  private static boolean integral(Object v) {
    return v instanceof Long || v instanceof Integer || v instanceof Short || v instanceof Byte;
  }

  /** A topic test compares strings, a partition test integers; anything else is left to Spark. */
  private static boolean comparable(String column, Filter f) {
    Object v = value(f);
    Object[] values = v instanceof Object[] ? (Object[]) v : new Object[] {v};
    for (Object x : values) {
      if (column.equals("topic") ? !(x instanceof String) : !integral(x)) return false;
    }
    return true;
  }

  @SuppressWarnings("unchecked")
  private static boolean test(String op, Object actual, Object value) {
    if (op.equals("in")) {
      for (Object x : (Object[]) value) if (compare(actual, x) == 0) return true;
      return false;
    }
    int c = compare(actual, value);
    switch (op) {
      case "eq": return c == 0;
      case "gt": return c > 0;
      case "ge": return c >= 0;
      case "lt": return c < 0;
      default: return c <= 0;
    }
  }

  private static int compare(Object actual, Object value) {
    if (actual instanceof String) return ((String) actual).compareTo((String) value);
    return Long.compare((Long) actual, ((Number) value).longValue());
  }

  private static Long millis(Object v) {
    if (v instanceof java.sql.Timestamp) return ((java.sql.Timestamp) v).getTime();
    if (v instanceof java.time.Instant) return ((java.time.Instant) v).toEpochMilli();
    if (v instanceof java.time.LocalDateTime) return ((java.time.LocalDateTime) v).toInstant(java.time.ZoneOffset.UTC).toEpochMilli();
    return null;
  }
}
