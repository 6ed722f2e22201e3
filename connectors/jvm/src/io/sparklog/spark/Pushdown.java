package io.sparklog.spark;

import java.math.BigDecimal;
import java.math.BigInteger;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

import org.apache.arrow.vector.types.FloatingPointPrecision;
import org.apache.arrow.vector.types.pojo.ArrowType;
import org.apache.arrow.vector.types.pojo.Field;
import org.apache.arrow.vector.types.pojo.Schema;

import org.apache.spark.sql.sources.EqualTo;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.sources.GreaterThan;
import org.apache.spark.sql.sources.GreaterThanOrEqual;
import org.apache.spark.sql.sources.In;
import org.apache.spark.sql.sources.IsNotNull;
import org.apache.spark.sql.sources.IsNull;
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
 *  typed column =, &lt;, &lt;=, &gt;, &gt;=, IN,   row filter evaluated on the brokers     yes
 *  IS [NOT] NULL
 *  </pre>
 *
 *  Everything else is left to Spark.  Typed-column predicates are pushed under the rule of
 *  spark_log.filters.predicate (the Python source's): integer, floating-point, string and
 *  boolean columns for comparisons and IN, with a value that converts to the column's type
 *  without loss (no NaN); IS [NOT] NULL on any column.  They travel in the pushdown block of
 *  the data listener's FETCH (brokers/server/data_pushdown.py), where the brokers turn them into
 *  the same row filter a gRPC Fetch carries. */
final class Pushdown {
  final List<Object[]> topicTests = new ArrayList<>();      // {op, value}
  final List<Object[]> partitionTests = new ArrayList<>();
  long offsetLow = 0;        // inclusive
  Long offsetHigh = null;    // exclusive
  Long minTimestamp = null;  // ms
  final List<Filter> pushed = new ArrayList<>();
  /** Typed topics: predicates on the topic's columns for the brokers, {column, op code, value}. */
  final List<Object[]> rowPredicates = new ArrayList<>();
  private final Map<String, Field> dataFields = new java.util.HashMap<>();

  Pushdown() {}

  /** A typed topic's columns (schema: its Arrow schema) may be filtered on the brokers. */
  Pushdown(Schema schema) {
    if (schema != null) for (Field f : schema.getFields()) dataFields.put(f.getName(), f);
  }

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
          case "eq": low = v; high = v == Long.MAX_VALUE ? null : v + 1; break;
          case "gt": low = v == Long.MAX_VALUE ? Long.MAX_VALUE : v + 1; high = null; break;
          case "ge": low = v; high = null; break;
          case "lt": low = 0; high = v; break;
          default: low = 0; high = v == Long.MAX_VALUE ? null : v + 1; break;  // le (no bound past Long.MAX_VALUE)
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
          if (max != Long.MAX_VALUE) offsetHigh = offsetHigh == null ? max + 1 : Math.min(offsetHigh, max + 1);
          pushed.add(f);
        }
      } else if ("timestamp".equals(column) && ("gt".equals(op) || "ge".equals(op))) {
        Long ms = millis(value);
        if (ms != null) {
          minTimestamp = minTimestamp == null ? ms : Math.max(minTimestamp, ms);
          pushed.add(f);
        }
      } else if (column != null && dataFields.containsKey(column)) {
        Object[] predicate = predicate(dataFields.get(column), f);
        if (predicate != null) {
          rowPredicates.add(predicate);
          pushed.add(f);
        }
      }
      remaining.add(f);
    }
    return remaining.toArray(new Filter[0]);
  }

  /** Op codes of the FETCH pushdown block: spark_log.filters.PREDICATE_OPS, from 1. */
  private static final int EQ = 1, GT = 2, GE = 3, LT = 4, LE = 5, IN = 6, IS_NULL = 7, IS_NOT_NULL = 8;

  /** {column, op code, value (IN: Object[])} of a pushable predicate on {@code field}, or null. */
  private static Object[] predicate(Field field, Filter f) {
    String name = field.getName();
    if (f instanceof IsNull) return new Object[] {name, IS_NULL, null};
    if (f instanceof IsNotNull) return new Object[] {name, IS_NOT_NULL, null};
    String op = op(f);
    if (op == null) return null;
    ArrowType t = field.getType();
    if (op.equals("in")) {
      Object[] values = ((In) f).values();
      if (values.length == 0) return null;
      for (Object v : values) if (!converts(v, t)) return null;
      return new Object[] {name, IN, values};
    }
    Object v = value(f);
    if (!converts(v, t)) return null;
    int code = op.equals("eq") ? EQ : op.equals("gt") ? GT : op.equals("ge") ? GE : op.equals("lt") ? LT : LE;
    return new Object[] {name, code, v};
  }

  /** Whether pyarrow's pa.scalar(v, type) takes {@code v} without loss for a pushable column
   *  type (integers, floating point, string, boolean), as spark_log.filters.predicate asks. */
  static boolean converts(Object v, ArrowType t) {
    if (v == null) return t instanceof ArrowType.Int || t instanceof ArrowType.FloatingPoint
        || t instanceof ArrowType.Utf8 || t instanceof ArrowType.Bool;
    if (t instanceof ArrowType.Int) {
      ArrowType.Int i = (ArrowType.Int) t;
      BigInteger x;
      if (integral(v)) {
        x = BigInteger.valueOf(((Number) v).longValue());
      } else if (v instanceof BigDecimal) {
        BigDecimal d = (BigDecimal) v;
        if (d.signum() != 0 && d.stripTrailingZeros().scale() > 0) return false;
        x = d.toBigInteger();
      } else {
        return false;
      }
      BigInteger min = i.getIsSigned() ? BigInteger.ONE.shiftLeft(i.getBitWidth() - 1).negate() : BigInteger.ZERO;
      BigInteger max = i.getIsSigned() ? BigInteger.ONE.shiftLeft(i.getBitWidth() - 1).subtract(BigInteger.ONE)
          : BigInteger.ONE.shiftLeft(i.getBitWidth()).subtract(BigInteger.ONE);
      return x.compareTo(min) >= 0 && x.compareTo(max) <= 0;
    }
    if (t instanceof ArrowType.FloatingPoint) {
      if (((ArrowType.FloatingPoint) t).getPrecision() == FloatingPointPrecision.HALF) return false;
      if (v instanceof Double) return !((Double) v).isNaN();
      if (v instanceof Float) return !((Float) v).isNaN();
      if (!integral(v)) return false;
      // pyarrow takes an integer for a floating-point column only where it is exact
      long limit = ((ArrowType.FloatingPoint) t).getPrecision() == FloatingPointPrecision.SINGLE ? 1L << 24 : 1L << 53;
      long x = ((Number) v).longValue();
      return x >= -limit && x <= limit;
    }
    if (t instanceof ArrowType.Utf8) return v instanceof String;
    if (t instanceof ArrowType.Bool) return v instanceof Boolean;
    return false;
  }

  /** The FETCH pushdown block (brokers/server/data_pushdown.py) for these predicates and the
   *  projected data columns, or null when no predicate is pushed. */
  byte[] block(List<String> columns) {
    if (rowPredicates.isEmpty()) return null;
    Buf b = new Buf().u8(1).i32(columns.size());
    for (String c : columns) b.str(c);
    b.i32(rowPredicates.size());
    for (Object[] p : rowPredicates) {
      b.str((String) p[0]).u8((Integer) p[1]);
      int code = (Integer) p[1];
      if (code == IN) {
        Object[] values = (Object[]) p[2];
        b.i32(values.length);
        for (Object v : values) encode(b, v);
      } else if (code != IS_NULL && code != IS_NOT_NULL) {
        encode(b, p[2]);
      }
    }
    return java.util.Arrays.copyOf(b.array(), b.size());
  }

  private static void encode(Buf b, Object v) {
    if (v == null) b.u8(0);
    else if (integral(v)) b.u8(1).i64(((Number) v).longValue());
    else if (v instanceof Double || v instanceof Float) b.u8(2).i64(Double.doubleToRawLongBits(((Number) v).doubleValue()));
    else if (v instanceof String) b.u8(3).str((String) v);
    else if (v instanceof Boolean) b.u8(4).u8((Boolean) v ? 1 : 0);
    else if (v instanceof BigDecimal) b.u8(5).str(((BigDecimal) v).toPlainString());
    else throw new IllegalArgumentException("no pushdown encoding for " + v.getClass());
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
