package io.sparklog.spark;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.util.ArrayData;
import org.apache.spark.sql.catalyst.util.MapData;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.Decimal;
import org.apache.spark.unsafe.types.BinaryView;
import org.apache.spark.unsafe.types.CalendarInterval;
import org.apache.spark.unsafe.types.UTF8String;
import org.apache.spark.unsafe.types.VariantVal;

/** A view of a row whose field i is field {@code map[i]} of the underlying row (no copy):
 *  lets Spark's ArrowWriter write a DataFrame's data columns in the topic's column order. */
final class MappedRow extends InternalRow {
  private final int[] map;
  private InternalRow row;

  MappedRow(int[] map) { this.map = map; }

  MappedRow of(InternalRow r) { row = r; return this; }

  @Override public int numFields() { return map.length; }
  @Override public void setNullAt(int i) { throw new UnsupportedOperationException(); }
  @Override public void update(int i, Object value) { throw new UnsupportedOperationException(); }
  @Override public InternalRow copy() { throw new UnsupportedOperationException(); }
  @Override public boolean isNullAt(int i) { return row.isNullAt(map[i]); }
  @Override public boolean getBoolean(int i) { return row.getBoolean(map[i]); }
  @Override public byte getByte(int i) { return row.getByte(map[i]); }
  @Override public short getShort(int i) { return row.getShort(map[i]); }
  @Override public int getInt(int i) { return row.getInt(map[i]); }
  @Override public long getLong(int i) { return row.getLong(map[i]); }
  @Override public float getFloat(int i) { return row.getFloat(map[i]); }
  @Override public double getDouble(int i) { return row.getDouble(map[i]); }
  @Override public Decimal getDecimal(int i, int p, int s) { return row.getDecimal(map[i], p, s); }
  @Override public UTF8String getUTF8String(int i) { return row.getUTF8String(map[i]); }
  @Override public byte[] getBinary(int i) { return row.getBinary(map[i]); }
  @Override public BinaryView getBinaryView(int i) { return row.getBinaryView(map[i]); }
  @Override public CalendarInterval getInterval(int i) { return row.getInterval(map[i]); }
  @Override public VariantVal getVariant(int i) { return row.getVariant(map[i]); }
  @Override public InternalRow getStruct(int i, int n) { return row.getStruct(map[i], n); }
  @Override public ArrayData getArray(int i) { return row.getArray(map[i]); }
  @Override public MapData getMap(int i) { return row.getMap(map[i]); }
  @Override public Object get(int i, DataType t) { return row.get(map[i], t); }
}
