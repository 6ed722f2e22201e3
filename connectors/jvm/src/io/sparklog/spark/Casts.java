package io.sparklog.spark;

import java.math.BigDecimal;
import java.math.BigInteger;
import java.math.RoundingMode;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.vector.BaseFixedWidthVector;
import org.apache.arrow.vector.BaseIntVector;
import org.apache.arrow.vector.BaseVariableWidthVector;
import org.apache.arrow.vector.BigIntVector;
import org.apache.arrow.vector.BitVector;
import org.apache.arrow.vector.DateDayVector;
import org.apache.arrow.vector.DateMilliVector;
import org.apache.arrow.vector.DecimalVector;
import org.apache.arrow.vector.FieldVector;
import org.apache.arrow.vector.Float4Vector;
import org.apache.arrow.vector.Float8Vector;
import org.apache.arrow.vector.IntVector;
import org.apache.arrow.vector.NullVector;
import org.apache.arrow.vector.SmallIntVector;
import org.apache.arrow.vector.TimeStampVector;
import org.apache.arrow.vector.TinyIntVector;
import org.apache.arrow.vector.UInt1Vector;
import org.apache.arrow.vector.UInt2Vector;
import org.apache.arrow.vector.UInt4Vector;
import org.apache.arrow.vector.UInt8Vector;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.types.DateUnit;
import org.apache.arrow.vector.types.FloatingPointPrecision;
import org.apache.arrow.vector.types.TimeUnit;
import org.apache.arrow.vector.types.pojo.ArrowType;
import org.apache.arrow.vector.types.pojo.Field;
import org.apache.arrow.vector.types.pojo.Schema;

/** Casts on typed writes: a DataFrame column whose Arrow type (pyspark's, with UTC) differs from
 *  the topic's is cast to it, as the Python sink does (connectors/client.py check_writable at
 *  start: a cast pyarrow has a kernel for; connectors/writer.py at write: pyarrow's safe cast,
 *  whose refusal of a value is a SchemaMismatchError).  Same rule, same errors, same messages
 *  (pyarrow's type names and value messages).
 *
 *  Implemented here (value for value as pyarrow's safe cast): among booleans, signed and
 *  unsigned integers, float and double; decimal128 to decimal128 and integers, integers to
 *  decimal128; string/binary to string, large_string, binary, large_binary (UTF-8 checked);
 *  date32 and timestamps to timestamps, date32 and date64; int32 and date32, int64 and
 *  timestamps (reinterpreted); null to any of these.  A cast pyarrow has but this list lacks
 *  (text to and from numbers and temporals, decimals and floating point, nested types, ...)
 *  is refused at start with the Python sink's message and a note that the Python connector
 *  applies it. */
public final class Casts {
  private Casts() {}

  /** Why {@code have} cannot be written as {@code want} (null: it can); {@code topic} names the topic. */
  static String refusal(Field have, Field want, String topic) {
    String base = "column '" + want.getName() + "' of topic '" + topic + "' is " + name(want) + "; the DataFrame has "
        + name(have);
    if (implemented(have.getType(), want.getType())) return null;
    if (arrowCastable(have, want)) {
      return base + " (a cast the Python connector applies; the JVM writer does not implement it yet)";
    }
    return base;
  }

  /** For tests (py4j): the refusal of each column of {@code have} as the same column of
   *  {@code want} (both Arrow IPC schema messages), "" where none. */
  public static String[] refusals(byte[] have, byte[] want, String topic) throws java.io.IOException {
    Schema h = schema(have), w = schema(want);
    String[] out = new String[w.getFields().size()];
    for (int i = 0; i < out.length; i++) {
      String r = refusal(h.getFields().get(i), w.getFields().get(i), topic);
      out[i] = r == null ? "" : r;
    }
    return out;
  }

  private static Schema schema(byte[] ipc) throws java.io.IOException {
    return Cluster.readSchema(ipc);
  }

  /** For tests (py4j): the Arrow IPC stream {@code ipc} cast to {@code want}'s types (an IPC
   *  schema message), as an IPC stream; a refused value raises the sink's SparkLogException. */
  public static byte[] castStream(byte[] ipc, byte[] want, String topic) throws java.io.IOException {
    Schema w = schema(want);
    try (BufferAllocator a = org.apache.spark.sql.util.ArrowUtils.rootAllocator().newChildAllocator("casts", 0, Long.MAX_VALUE);
         org.apache.arrow.vector.ipc.ArrowStreamReader reader = new org.apache.arrow.vector.ipc.ArrowStreamReader(
             new java.io.ByteArrayInputStream(ipc), a)) {
      java.io.ByteArrayOutputStream bytes = new java.io.ByteArrayOutputStream();
      VectorSchemaRoot in = reader.getVectorSchemaRoot();
      try (VectorSchemaRoot out = VectorSchemaRoot.create(w, a);
           org.apache.arrow.vector.ipc.ArrowStreamWriter writer = new org.apache.arrow.vector.ipc.ArrowStreamWriter(
               out, null, java.nio.channels.Channels.newChannel(bytes))) {
        writer.start();
        while (reader.loadNextBatch()) {
          try (VectorSchemaRoot cast = apply(in, w, a, topic);
               org.apache.arrow.vector.ipc.message.ArrowRecordBatch batch = new org.apache.arrow.vector.VectorUnloader(cast).getRecordBatch()) {
            new org.apache.arrow.vector.VectorLoader(out).load(batch);
          }
          writer.writeBatch();
        }
        writer.end();
      }
      return bytes.toByteArray();
    }
  }

  /** {@code root} (the topic's column names, the DataFrame's types) as {@code want}: columns of the
   *  same type are transferred, the others cast.  The caller closes both roots. */
  static VectorSchemaRoot apply(VectorSchemaRoot root, Schema want, BufferAllocator a, String topic) {
    List<FieldVector> out = new ArrayList<>();
    int rows = root.getRowCount();
    try {
      for (Field w : want.getFields()) {
        FieldVector v = root.getVector(w.getName());
        if (sameType(v.getField(), w)) {
          org.apache.arrow.vector.util.TransferPair t = v.getTransferPair(w, a);
          t.splitAndTransfer(0, rows);
          out.add((FieldVector) t.getTo());
        } else {
          out.add(cast(v, w, rows, a, topic));
        }
      }
    } catch (RuntimeException e) {
      for (FieldVector v : out) v.close();
      throw e;
    }
    return new VectorSchemaRoot(want.getFields(), out, rows);
  }

  static boolean sameType(Field a, Field b) {
    if (!a.getType().equals(b.getType()) || a.getChildren().size() != b.getChildren().size()) return false;
    for (int i = 0; i < a.getChildren().size(); i++) {
      Field x = a.getChildren().get(i), y = b.getChildren().get(i);
      if (!(a.getType() instanceof ArrowType.List) && !x.getName().equals(y.getName())) return false;
      if (!sameType(x, y)) return false;
    }
    return true;
  }

  // --- which casts ---------------------------------------------------------------------------

  private enum Kind { NULL, BOOL, INT, FLOAT, DECIMAL, TEXT, BYTES, DATE32, DATE64, TIMESTAMP, OTHER }

  private static Kind kind(ArrowType t) {
    if (t instanceof ArrowType.Null) return Kind.NULL;
    if (t instanceof ArrowType.Bool) return Kind.BOOL;
    if (t instanceof ArrowType.Int) return Kind.INT;
    if (t instanceof ArrowType.FloatingPoint) {
      return ((ArrowType.FloatingPoint) t).getPrecision() == FloatingPointPrecision.HALF ? Kind.OTHER : Kind.FLOAT;
    }
    if (t instanceof ArrowType.Decimal) return ((ArrowType.Decimal) t).getBitWidth() == 128 ? Kind.DECIMAL : Kind.OTHER;
    if (t instanceof ArrowType.Utf8 || t instanceof ArrowType.LargeUtf8) return Kind.TEXT;
    if (t instanceof ArrowType.Binary || t instanceof ArrowType.LargeBinary) return Kind.BYTES;
    if (t instanceof ArrowType.Date) return ((ArrowType.Date) t).getUnit() == DateUnit.DAY ? Kind.DATE32 : Kind.DATE64;
    if (t instanceof ArrowType.Timestamp) return Kind.TIMESTAMP;
    return Kind.OTHER;
  }

  private static boolean implemented(ArrowType from, ArrowType to) {
    Kind f = kind(from), t = kind(to);
    if (t == Kind.OTHER || t == Kind.NULL || f == Kind.OTHER) return f == Kind.NULL && t == Kind.NULL;
    if (f == Kind.NULL) return true;
    boolean numeric = f == Kind.BOOL || f == Kind.INT || f == Kind.FLOAT;
    switch (t) {
      case BOOL: return f == Kind.BOOL || f == Kind.INT || f == Kind.FLOAT;
      case INT:
        return numeric || f == Kind.DECIMAL || (f == Kind.DATE32 && bits(to) == 32 && signed(to))
            || (f == Kind.TIMESTAMP && bits(to) == 64 && signed(to));
      case FLOAT: return numeric;
      case DECIMAL: return f == Kind.DECIMAL || f == Kind.INT;
      case TEXT: return f == Kind.TEXT || f == Kind.BYTES;
      case BYTES: return f == Kind.TEXT || f == Kind.BYTES;
      case DATE32: return f == Kind.DATE32 || f == Kind.TIMESTAMP || (f == Kind.INT && bits(from) == 32 && signed(from));
      case DATE64: return f == Kind.DATE32 || f == Kind.TIMESTAMP;
      case TIMESTAMP: return f == Kind.TIMESTAMP || f == Kind.DATE32 || (f == Kind.INT && bits(from) == 64 && signed(from));
      default: return false;
    }
  }

  /** Whether pyarrow casts an (empty) array of {@code from} to {@code to}: the Python sink's start
   *  check, for the types a DataFrame's columns have. */
  private static boolean arrowCastable(Field from, Field to) {
    ArrowType f = from.getType(), t = to.getType();
    if (f instanceof ArrowType.Null) return true;
    boolean fNested = f instanceof ArrowType.List || f instanceof ArrowType.LargeList || f instanceof ArrowType.Struct
        || f instanceof ArrowType.Map;
    if (fNested) {
      if (f instanceof ArrowType.Map) return t instanceof ArrowType.Map;
      if (f instanceof ArrowType.Struct) return t instanceof ArrowType.Struct;
      return t instanceof ArrowType.List || t instanceof ArrowType.LargeList || t instanceof ArrowType.FixedSizeList;
    }
    Kind fk = kind(f);
    String tn = arrowTypeId(t);
    switch (fk) {
      case BOOL:
        return tn.matches("bool|int|uint|float|double|string|large_string|string_view");
      case INT: {
        boolean base = tn.matches("bool|int|uint|float|double|halffloat|decimal|string|large_string|string_view");
        int b = bits(f);
        if (b == 32 && (t instanceof ArrowType.Date && ((ArrowType.Date) t).getUnit() == DateUnit.DAY || t instanceof ArrowType.Time
            && ((ArrowType.Time) t).getBitWidth() == 32)) return true;
        if (b == 64 && (t instanceof ArrowType.Timestamp || t instanceof ArrowType.Duration
            || t instanceof ArrowType.Date && ((ArrowType.Date) t).getUnit() == DateUnit.MILLISECOND
            || t instanceof ArrowType.Time && ((ArrowType.Time) t).getBitWidth() == 64)) return true;
        return base;
      }
      case FLOAT:
        return tn.matches("bool|int|uint|float|double|halffloat|decimal|string|large_string|string_view");
      case DECIMAL:
        return tn.matches("int|uint|float|double|decimal|string|large_string|string_view");
      case TEXT:
        return tn.matches("bool|int|uint|float|double|halffloat|decimal|string|large_string|string_view|binary|large_binary"
            + "|fixed_size_binary|date|timestamp|dictionary");
      case BYTES:
        return tn.matches("bool|int|uint|float|double|halffloat|decimal|string|large_string|string_view|binary|large_binary"
            + "|fixed_size_binary|dictionary");
      case DATE32:
        return tn.matches("string|large_string|string_view|date|timestamp") || tn.equals("int") && bits(t) == 32 && signed(t);
      case TIMESTAMP:
        return tn.matches("string|large_string|string_view|date|timestamp|time")
            || tn.equals("int") && bits(t) == 64 && signed(t);
      default:
        return false;
    }
  }

  private static String arrowTypeId(ArrowType t) {
    if (t instanceof ArrowType.Int) return ((ArrowType.Int) t).getIsSigned() ? "int" : "uint";
    if (t instanceof ArrowType.FloatingPoint) {
      FloatingPointPrecision p = ((ArrowType.FloatingPoint) t).getPrecision();
      return p == FloatingPointPrecision.HALF ? "halffloat" : p == FloatingPointPrecision.SINGLE ? "float" : "double";
    }
    if (t instanceof ArrowType.Decimal) return "decimal";
    if (t instanceof ArrowType.Bool) return "bool";
    if (t instanceof ArrowType.Utf8) return "string";
    if (t instanceof ArrowType.LargeUtf8) return "large_string";
    if (t instanceof ArrowType.Utf8View) return "string_view";
    if (t instanceof ArrowType.Binary) return "binary";
    if (t instanceof ArrowType.LargeBinary) return "large_binary";
    if (t instanceof ArrowType.FixedSizeBinary) return "fixed_size_binary";
    if (t instanceof ArrowType.Date) return "date";
    if (t instanceof ArrowType.Timestamp) return "timestamp";
    if (t instanceof ArrowType.Time) return "time";
    if (t instanceof ArrowType.Duration) return "duration";
    if (t instanceof ArrowType.Null) return "null";
    return "other";
  }

  private static int bits(ArrowType t) { return ((ArrowType.Int) t).getBitWidth(); }

  private static boolean signed(ArrowType t) { return ((ArrowType.Int) t).getIsSigned(); }

  // --- pyarrow's names of types ----------------------------------------------------------------

  static String name(Field f) {
    ArrowType t = f.getType();
    if (t instanceof ArrowType.List) return "list<" + f.getChildren().get(0).getName() + ": " + name(f.getChildren().get(0)) + ">";
    if (t instanceof ArrowType.LargeList) {
      return "large_list<" + f.getChildren().get(0).getName() + ": " + name(f.getChildren().get(0)) + ">";
    }
    if (t instanceof ArrowType.Struct) {
      StringBuilder b = new StringBuilder("struct<");
      for (int i = 0; i < f.getChildren().size(); i++) {
        Field c = f.getChildren().get(i);
        if (i > 0) b.append(", ");
        b.append(c.getName()).append(": ").append(name(c));
        if (!c.isNullable()) b.append(" not null");
      }
      return b.append('>').toString();
    }
    if (t instanceof ArrowType.Map) {
      Field entries = f.getChildren().get(0);
      return "map<" + name(entries.getChildren().get(0)) + ", " + name(entries.getChildren().get(1)) + ">";
    }
    return name(t);
  }

  static String name(ArrowType t) {
    if (t instanceof ArrowType.Int) return (signed(t) ? "int" : "uint") + bits(t);
    if (t instanceof ArrowType.Decimal) {
      ArrowType.Decimal d = (ArrowType.Decimal) t;
      return "decimal" + d.getBitWidth() + "(" + d.getPrecision() + ", " + d.getScale() + ")";
    }
    if (t instanceof ArrowType.Date) return ((ArrowType.Date) t).getUnit() == DateUnit.DAY ? "date32[day]" : "date64[ms]";
    if (t instanceof ArrowType.Timestamp) {
      ArrowType.Timestamp ts = (ArrowType.Timestamp) t;
      return "timestamp[" + unit(ts.getUnit()) + (ts.getTimezone() == null ? "" : ", tz=" + ts.getTimezone()) + "]";
    }
    if (t instanceof ArrowType.Time) return "time" + ((ArrowType.Time) t).getBitWidth() + "[" + unit(((ArrowType.Time) t).getUnit()) + "]";
    if (t instanceof ArrowType.Duration) return "duration[" + unit(((ArrowType.Duration) t).getUnit()) + "]";
    if (t instanceof ArrowType.FixedSizeBinary) return "fixed_size_binary[" + ((ArrowType.FixedSizeBinary) t).getByteWidth() + "]";
    return arrowTypeId(t);
  }

  private static String unit(TimeUnit u) {
    switch (u) {
      case SECOND: return "s";
      case MILLISECOND: return "ms";
      case MICROSECOND: return "us";
      default: return "ns";
    }
  }

  private static long perSecond(TimeUnit u) {
    switch (u) {
      case SECOND: return 1L;
      case MILLISECOND: return 1_000L;
      case MICROSECOND: return 1_000_000L;
      default: return 1_000_000_000L;
    }
  }

  // --- the values ------------------------------------------------------------------------------

  private static SparkLogException refused(Field want, FieldVector from, String topic, String why) {
    return new SparkLogException("SchemaMismatchError", 14, "column '" + want.getName() + "' of topic '" + topic + "' is "
        + name(want) + "; a value of the DataFrame's " + name(from.getField()) + " column does not convert: " + why);
  }

  private static FieldVector cast(FieldVector from, Field want, int rows, BufferAllocator a, String topic) {
    FieldVector to = want.createVector(a);
    try {
      to.setInitialCapacity(Math.max(rows, 1));
      to.allocateNew();
      fill(from, to, want, rows, topic);
      to.setValueCount(rows);
      return to;
    } catch (RuntimeException e) {
      to.close();
      throw e;
    }
  }

  private static void fill(FieldVector from, FieldVector to, Field want, int rows, String topic) {
    ArrowType f = from.getField().getType(), t = want.getType();
    Kind fk = kind(f), tk = kind(t);
    if (fk == Kind.INT && tk == Kind.DECIMAL && rows > 0) {
      int digits = new int[] {0, 3, 5, 0, 10, 0, 0, 0, 19}[bits(f) / 8];
      ArrowType.Decimal d = (ArrowType.Decimal) t;
      if (d.getPrecision() - d.getScale() < digits) {
        throw refused(want, from, topic, "Precision is not great enough for the result. It should be at least "
            + (digits + d.getScale()));
      }
    }
    for (int i = 0; i < rows; i++) {
      if (fk == Kind.NULL || from.isNull(i)) {
        setNull(to, i);
        continue;
      }
      switch (tk) {
        case BOOL:
          ((BitVector) to).set(i, fk == Kind.FLOAT ? (asDouble(from, i) != 0 ? 1 : 0) : (asLong(from, i) != 0 ? 1 : 0));
          break;
        case INT:
          setLong(to, i, toInt(from, i, fk, t, want, topic));
          break;
        case FLOAT: {
          double v;
          if (fk == Kind.FLOAT) {
            v = asDouble(from, i);
          } else {
            long x = asLong(from, i);
            long limit = ((ArrowType.FloatingPoint) t).getPrecision() == FloatingPointPrecision.SINGLE ? 1L << 24 : 1L << 53;
            if (x > limit || x < -limit) {
              throw refused(want, from, topic, "Integer value " + x + " not in range: " + (-limit) + " to " + limit);
            }
            v = x;
          }
          if (to instanceof Float4Vector) ((Float4Vector) to).set(i, (float) v);
          else ((Float8Vector) to).set(i, v);
          break;
        }
        case DECIMAL: {
          ArrowType.Decimal d = (ArrowType.Decimal) t;
          BigDecimal v = fk == Kind.DECIMAL ? ((DecimalVector) from).getObject(i) : BigDecimal.valueOf(asLong(from, i));
          BigDecimal scaled;
          try {
            scaled = v.setScale(d.getScale(), RoundingMode.UNNECESSARY);
          } catch (ArithmeticException e) {
            throw refused(want, from, topic, "Rescaling Decimal value would cause data loss");
          }
          if (scaled.unscaledValue().abs().compareTo(BigInteger.TEN.pow(d.getPrecision())) >= 0) {
            throw refused(want, from, topic, "Decimal value does not fit in precision " + d.getPrecision());
          }
          ((DecimalVector) to).setSafe(i, scaled);
          break;
        }
        case TEXT: case BYTES: {
          byte[] b = ((BaseVariableWidthVector) from).get(i);
          if (tk == Kind.TEXT && fk == Kind.BYTES) {
            try {
              StandardCharsets.UTF_8.newDecoder().onMalformedInput(CodingErrorAction.REPORT)
                  .onUnmappableCharacter(CodingErrorAction.REPORT).decode(ByteBuffer.wrap(b));
            } catch (CharacterCodingException e) {
              throw refused(want, from, topic, "Invalid UTF8 payload");
            }
          }
          if (to instanceof BaseVariableWidthVector) ((BaseVariableWidthVector) to).setSafe(i, b);
          else ((org.apache.arrow.vector.BaseLargeVariableWidthVector) to).setSafe(i, b);
          break;
        }
        case DATE32: {
          int days;
          if (fk == Kind.DATE32) days = ((DateDayVector) from).get(i);
          else if (fk == Kind.INT) days = (int) asLong(from, i);
          else days = (int) Math.floorDiv(((TimeStampVector) from).get(i), 86_400L * perSecond(tsUnit(f)));
          ((DateDayVector) to).set(i, days);
          break;
        }
        case DATE64: {
          long ms = fk == Kind.DATE32 ? ((DateDayVector) from).get(i) * 86_400_000L
              : Math.floorDiv(((TimeStampVector) from).get(i), 86_400L * perSecond(tsUnit(f))) * 86_400_000L;
          ((DateMilliVector) to).set(i, ms);
          break;
        }
        case TIMESTAMP: {
          TimeUnit tu = ((ArrowType.Timestamp) t).getUnit();
          long v;
          if (fk == Kind.INT) {
            v = asLong(from, i);
          } else {
            long raw = fk == Kind.DATE32 ? ((DateDayVector) from).get(i) : ((TimeStampVector) from).get(i);
            long fromPer = fk == Kind.DATE32 ? 1 : perSecond(tsUnit(f));
            long toPer = perSecond(tu) * (fk == Kind.DATE32 ? 86_400L : 1);
            if (fk == Kind.DATE32) {
              v = mulExact(raw, toPer, want, from, topic, raw);
            } else if (toPer >= fromPer) {
              v = mulExact(raw, toPer / fromPer, want, from, topic, raw);
            } else {
              long div = fromPer / toPer;
              if (raw % div != 0) {
                throw refused(want, from, topic, "Casting from " + name(f) + " to " + name(t) + " would lose data: " + raw);
              }
              v = raw / div;
            }
          }
          ((TimeStampVector) to).set(i, v);
          break;
        }
        default:
          throw new IllegalStateException("no cast from " + name(f) + " to " + name(t));
      }
    }
  }

  private static long mulExact(long raw, long factor, Field want, FieldVector from, String topic, long shown) {
    try {
      return Math.multiplyExact(raw, factor);
    } catch (ArithmeticException e) {
      throw refused(want, from, topic, "Casting from " + name(from.getField().getType()) + " to " + name(want.getType())
          + " would result in out of bounds timestamp: " + shown);
    }
  }

  private static TimeUnit tsUnit(ArrowType t) { return ((ArrowType.Timestamp) t).getUnit(); }

  private static long toInt(FieldVector from, int i, Kind fk, ArrowType t, Field want, String topic) {
    int b = bits(t);
    boolean s = signed(t);
    BigInteger min = s ? BigInteger.ONE.shiftLeft(b - 1).negate() : BigInteger.ZERO;
    BigInteger max = (s ? BigInteger.ONE.shiftLeft(b - 1) : BigInteger.ONE.shiftLeft(b)).subtract(BigInteger.ONE);
    if (fk == Kind.FLOAT) {
      double v = asDouble(from, i);
      boolean ok = !Double.isNaN(v) && !Double.isInfinite(v) && v == Math.rint(v)
          && new BigDecimal(v).toBigInteger().compareTo(min) >= 0 && new BigDecimal(v).toBigInteger().compareTo(max) <= 0;
      if (!ok) throw refused(want, from, topic, "Float value " + printf(v) + " was truncated converting to " + name(t));
      return new BigDecimal(v).toBigInteger().longValue();
    }
    if (fk == Kind.DECIMAL) {
      BigDecimal v = ((DecimalVector) from).getObject(i);
      BigInteger x;
      try {
        x = v.setScale(0, RoundingMode.UNNECESSARY).toBigIntegerExact();
      } catch (ArithmeticException e) {
        throw refused(want, from, topic, "Rescaling Decimal value would cause data loss");
      }
      if (x.compareTo(min) < 0 || x.compareTo(max) > 0) throw refused(want, from, topic, "Integer value out of bounds");
      return x.longValue();
    }
    long v = fk == Kind.TIMESTAMP ? ((TimeStampVector) from).get(i) : fk == Kind.DATE32 ? ((DateDayVector) from).get(i)
        : asLong(from, i);
    BigInteger x = BigInteger.valueOf(v);
    if (x.compareTo(min) < 0 || x.compareTo(max) > 0) {
      // pyarrow names the range both types hold
      ArrowType ft = from.getField().getType();
      if (ft instanceof ArrowType.Int) {
        int fb = bits(ft);
        BigInteger fmin = signed(ft) ? BigInteger.ONE.shiftLeft(fb - 1).negate() : BigInteger.ZERO;
        BigInteger fmax = (signed(ft) ? BigInteger.ONE.shiftLeft(fb - 1) : BigInteger.ONE.shiftLeft(fb)).subtract(BigInteger.ONE);
        min = min.max(fmin);
        max = max.min(fmax);
      }
      throw refused(want, from, topic, "Integer value " + v + " not in range: " + min + " to " + max);
    }
    return v;
  }

  /** C's printf("%f") of {@code v}, as pyarrow's messages print floats. */
  private static String printf(double v) {
    if (Double.isNaN(v)) return "nan";
    if (Double.isInfinite(v)) return v > 0 ? "inf" : "-inf";
    String s = new BigDecimal(v).setScale(6, RoundingMode.HALF_EVEN).toPlainString();
    return (v < 0 || (v == 0 && 1 / v < 0)) && !s.startsWith("-") ? "-" + s : s;
  }

  private static long asLong(FieldVector v, int i) {
    if (v instanceof BitVector) return ((BitVector) v).get(i);
    if (v instanceof UInt8Vector) return ((UInt8Vector) v).get(i);
    if (v instanceof BaseIntVector) return ((BaseIntVector) v).getValueAsLong(i);
    throw new IllegalStateException("not an integer column: " + v.getField());
  }

  private static double asDouble(FieldVector v, int i) {
    if (v instanceof Float4Vector) return ((Float4Vector) v).get(i);
    return ((Float8Vector) v).get(i);
  }

  private static void setLong(FieldVector to, int i, long v) {
    if (to instanceof TinyIntVector) ((TinyIntVector) to).set(i, (byte) v);
    else if (to instanceof SmallIntVector) ((SmallIntVector) to).set(i, (short) v);
    else if (to instanceof IntVector) ((IntVector) to).set(i, (int) v);
    else if (to instanceof BigIntVector) ((BigIntVector) to).set(i, v);
    else if (to instanceof UInt1Vector) ((UInt1Vector) to).set(i, (int) v);
    else if (to instanceof UInt2Vector) ((UInt2Vector) to).set(i, (int) v);
    else if (to instanceof UInt4Vector) ((UInt4Vector) to).set(i, (int) v);
    else ((UInt8Vector) to).set(i, v);
  }

  private static void setNull(FieldVector to, int i) {
    if (to instanceof BaseFixedWidthVector) ((BaseFixedWidthVector) to).setNull(i);
    else if (to instanceof BaseVariableWidthVector) ((BaseVariableWidthVector) to).setNull(i);
    else if (to instanceof org.apache.arrow.vector.BaseLargeVariableWidthVector) {
      ((org.apache.arrow.vector.BaseLargeVariableWidthVector) to).setNull(i);
    } else if (!(to instanceof NullVector)) {
      throw new IllegalStateException("cannot set a null in " + to.getField());
    }
  }
}
