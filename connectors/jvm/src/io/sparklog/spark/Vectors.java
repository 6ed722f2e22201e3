package io.sparklog.spark;

import java.math.BigDecimal;
import java.math.BigInteger;

import org.apache.arrow.vector.BaseIntVector;
import org.apache.arrow.vector.BigIntVector;
import org.apache.arrow.vector.BitVector;
import org.apache.arrow.vector.DateDayVector;
import org.apache.arrow.vector.DecimalVector;
import org.apache.arrow.vector.FieldVector;
import org.apache.arrow.vector.Float4Vector;
import org.apache.arrow.vector.Float8Vector;
import org.apache.arrow.vector.IntVector;
import org.apache.arrow.vector.LargeVarBinaryVector;
import org.apache.arrow.vector.LargeVarCharVector;
import org.apache.arrow.vector.NullVector;
import org.apache.arrow.vector.SmallIntVector;
import org.apache.arrow.vector.TimeStampMicroTZVector;
import org.apache.arrow.vector.TimeStampVector;
import org.apache.arrow.vector.TinyIntVector;
import org.apache.arrow.vector.UInt1Vector;
import org.apache.arrow.vector.UInt2Vector;
import org.apache.arrow.vector.UInt4Vector;
import org.apache.arrow.vector.UInt8Vector;
import org.apache.arrow.vector.ValueVector;
import org.apache.arrow.vector.VarBinaryVector;
import org.apache.arrow.vector.VarCharVector;
import org.apache.arrow.vector.complex.ListVector;
import org.apache.arrow.vector.complex.MapVector;
import org.apache.arrow.vector.complex.StructVector;
import org.apache.arrow.vector.types.TimeUnit;
import org.apache.arrow.vector.types.pojo.ArrowType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.Decimal;
import org.apache.spark.sql.vectorized.ArrowColumnVector;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarArray;
import org.apache.spark.sql.vectorized.ColumnarMap;
import org.apache.spark.unsafe.types.UTF8String;

/** Spark column vectors over Arrow vectors, with no per-row conversion: Spark's
 *  ArrowColumnVector where it reads the Arrow type as is, thin views where a value needs
 *  widening (unsigned integers, timestamps in a unit other than microseconds), and the
 *  metadata columns (offset computed from the frame, constants). */
final class Vectors {
  private Vectors() {}

  /** Whether ArrowColumnVector reads {@code v} as Spark's type for it (recursively). */
  static boolean direct(ValueVector v) {
    if (v instanceof StructVector) {
      for (FieldVector c : ((StructVector) v).getChildrenFromFields()) if (!direct(c)) return false;
      return true;
    }
    if (v instanceof ListVector) return direct(((ListVector) v).getDataVector());  // MapVector is a ListVector
    return v instanceof BitVector || v instanceof TinyIntVector || v instanceof SmallIntVector || v instanceof IntVector
        || v instanceof BigIntVector || v instanceof Float4Vector || v instanceof Float8Vector || v instanceof DecimalVector
        || v instanceof VarCharVector || v instanceof LargeVarCharVector || v instanceof VarBinaryVector
        || v instanceof LargeVarBinaryVector || v instanceof DateDayVector || v instanceof TimeStampMicroTZVector
        || v instanceof NullVector;
  }

  /** The Spark column of one stored column ({@code type} is its Spark type). */
  static ColumnVector wrap(FieldVector v, DataType type) {
    if (direct(v)) return new ArrowColumnVector(v);
    if (v instanceof TimeStampVector) return new Timestamps((TimeStampVector) v, type);
    if (v instanceof UInt1Vector || v instanceof UInt2Vector || v instanceof UInt4Vector || v instanceof UInt8Vector) {
      return new Unsigned((BaseIntVector) v, type);
    }
    throw new SparkLogException("SchemaMismatchError", 14, "column '" + v.getName() + "' of Arrow type "
        + v.getField().getType() + " cannot be read by the JVM implementation yet; use the Python connector");
  }

  /** Whether {@link #wrap} can read a column of this Arrow type at the top level. */
  static boolean readable(ArrowType t, boolean topLevel) {
    switch (t.getTypeID()) {
      case Bool: case Int: case FloatingPoint: case Decimal: case Utf8: case LargeUtf8: case Binary:
      case LargeBinary: case Null:
        if (t instanceof ArrowType.Int && !((ArrowType.Int) t).getIsSigned()) return topLevel;
        if (t instanceof ArrowType.FloatingPoint
            && ((ArrowType.FloatingPoint) t).getPrecision() == org.apache.arrow.vector.types.FloatingPointPrecision.HALF) {
          return false;
        }
        return true;
      case Date:
        return ((ArrowType.Date) t).getUnit() == org.apache.arrow.vector.types.DateUnit.DAY;
      case Timestamp:
        ArrowType.Timestamp ts = (ArrowType.Timestamp) t;
        return topLevel || (ts.getUnit() == TimeUnit.MICROSECOND && ts.getTimezone() != null);
      case List: case Struct: case Map:
        return true;  // children checked by the caller
      default:
        return false;
    }
  }

  abstract static class Base extends ColumnVector {
    Base(DataType type) { super(type); }
    @Override public void close() {}
    @Override public boolean getBoolean(int i) { throw new UnsupportedOperationException(); }
    @Override public byte getByte(int i) { throw new UnsupportedOperationException(); }
    @Override public short getShort(int i) { throw new UnsupportedOperationException(); }
    @Override public int getInt(int i) { throw new UnsupportedOperationException(); }
    @Override public long getLong(int i) { throw new UnsupportedOperationException(); }
    @Override public float getFloat(int i) { throw new UnsupportedOperationException(); }
    @Override public double getDouble(int i) { throw new UnsupportedOperationException(); }
    @Override public ColumnarArray getArray(int i) { throw new UnsupportedOperationException(); }
    @Override public ColumnarMap getMap(int i) { throw new UnsupportedOperationException(); }
    @Override public Decimal getDecimal(int i, int p, int s) { throw new UnsupportedOperationException(); }
    @Override public UTF8String getUTF8String(int i) { throw new UnsupportedOperationException(); }
    @Override public byte[] getBinary(int i) { throw new UnsupportedOperationException(); }
    @Override public ColumnVector getChild(int i) { throw new UnsupportedOperationException(); }
  }

  /** A timestamp column in s/ms/ns (or without a time zone) read as Spark's microseconds. */
  static final class Timestamps extends Base {
    private final TimeStampVector v;
    private final long mul, div;

    Timestamps(TimeStampVector v, DataType type) {
      super(type);
      this.v = v;
      TimeUnit unit = ((ArrowType.Timestamp) v.getField().getType()).getUnit();
      mul = unit == TimeUnit.SECOND ? 1_000_000 : unit == TimeUnit.MILLISECOND ? 1_000 : 1;
      div = unit == TimeUnit.NANOSECOND ? 1_000 : 1;
    }

    @Override public boolean hasNull() { return v.getNullCount() > 0; }
    @Override public int numNulls() { return v.getNullCount(); }
    @Override public boolean isNullAt(int i) { return v.isNull(i); }
    @Override public long getLong(int i) { return div == 1 ? v.get(i) * mul : Math.floorDiv(v.get(i), div); }
  }

  /** Unsigned integers widened as the Python connector widens them (uint64: decimal(20,0)). */
  static final class Unsigned extends Base {
    private final BaseIntVector v;

    Unsigned(BaseIntVector v, DataType type) { super(type); this.v = v; }

    @Override public boolean hasNull() { return ((ValueVector) v).getNullCount() > 0; }
    @Override public int numNulls() { return ((ValueVector) v).getNullCount(); }
    @Override public boolean isNullAt(int i) { return ((ValueVector) v).isNull(i); }
    private long value(int i) {
      if (v instanceof UInt1Vector) return ((UInt1Vector) v).get(i) & 0xFFL;
      if (v instanceof UInt2Vector) return ((UInt2Vector) v).get(i);
      if (v instanceof UInt4Vector) return ((UInt4Vector) v).get(i) & 0xFFFFFFFFL;
      return ((UInt8Vector) v).get(i);
    }
    @Override public short getShort(int i) { return (short) value(i); }
    @Override public int getInt(int i) { return (int) value(i); }
    @Override public long getLong(int i) { return value(i); }
    @Override public Decimal getDecimal(int i, int p, int s) {
      long raw = value(i);
      BigInteger big = raw >= 0 ? BigInteger.valueOf(raw) : BigInteger.valueOf(raw).add(BigInteger.ONE.shiftLeft(64));
      return Decimal.apply(new BigDecimal(big), p, s);
    }
  }

  /** The offset column: {@code base + row} for dense frames, or the frame's per-row offsets. */
  static final class Offsets extends Base {
    private final long base;
    private final long[] offsets;
    private final int first;

    Offsets(long base, long[] offsets, int first) {
      super(org.apache.spark.sql.types.DataTypes.LongType);
      this.base = base; this.offsets = offsets; this.first = first;
    }

    @Override public boolean hasNull() { return false; }
    @Override public int numNulls() { return 0; }
    @Override public boolean isNullAt(int i) { return false; }
    @Override public long getLong(int i) { return offsets == null ? base + first + i : offsets[first + i]; }
  }
}
