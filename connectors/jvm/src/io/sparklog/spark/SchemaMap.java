package io.sparklog.spark;

import java.util.ArrayList;
import java.util.List;

import org.apache.arrow.vector.types.FloatingPointPrecision;
import org.apache.arrow.vector.types.pojo.ArrowType;
import org.apache.arrow.vector.types.pojo.Field;
import org.apache.arrow.vector.types.pojo.Schema;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.Metadata;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

/** How topics look to Spark: the same columns connectors/schema_mapping.py gives. */
final class SchemaMap {
  private SchemaMap() {}

  static final StructType HEADERS = new StructType()
      .add("key", DataTypes.StringType, true).add("value", DataTypes.BinaryType, true);

  static StructType metadataFields(StructType s) {
    return s.add("topic", DataTypes.StringType, true).add("partition", DataTypes.IntegerType, true)
        .add("offset", DataTypes.LongType, true).add("timestamp", DataTypes.TimestampType, true);
  }

  static StructType bytesSchema(boolean includeHeaders) {
    StructType s = metadataFields(new StructType().add("key", DataTypes.BinaryType, true).add("value", DataTypes.BinaryType, true))
        .add("timestampType", DataTypes.IntegerType, true);
    if (includeHeaders) s = s.add("headers", DataTypes.createArrayType(HEADERS, true), true);
    return s;
  }

  static StructType typedSchema(Schema topic) {
    StructType s = new StructType();
    for (Field f : topic.getFields()) {
      if (!readable(f, true)) {
        throw new SparkLogException("SchemaMismatchError", 14, "column '" + f.getName() + "' has type " + f.getType()
            + ", which the JVM implementation cannot read yet; use the Python connector");
      }
      s = s.add(f.getName(), spark(f), f.isNullable());
    }
    return metadataFields(s);
  }

  private static boolean readable(Field f, boolean top) {
    if (!Vectors.readable(f.getType(), top)) return false;
    for (Field c : f.getChildren()) if (!readable(c, false)) return false;
    return true;
  }

  /** pyspark's from_arrow_type after the Python connector's widening. */
  static DataType spark(Field f) {
    ArrowType t = f.getType();
    switch (t.getTypeID()) {
      case Bool: return DataTypes.BooleanType;
      case Int: {
        ArrowType.Int i = (ArrowType.Int) t;
        int bits = i.getBitWidth() + (i.getIsSigned() ? 0 : 1);
        if (!i.getIsSigned() && i.getBitWidth() == 64) return DataTypes.createDecimalType(20, 0);
        return bits <= 8 ? DataTypes.ByteType : bits <= 16 ? DataTypes.ShortType : bits <= 32 ? DataTypes.IntegerType : DataTypes.LongType;
      }
      case FloatingPoint:
        return ((ArrowType.FloatingPoint) t).getPrecision() == FloatingPointPrecision.SINGLE ? DataTypes.FloatType : DataTypes.DoubleType;
      case Decimal: {
        ArrowType.Decimal d = (ArrowType.Decimal) t;
        return DataTypes.createDecimalType(d.getPrecision(), d.getScale());
      }
      case Utf8: case LargeUtf8: return DataTypes.StringType;
      case Binary: case LargeBinary: return DataTypes.BinaryType;
      case Date: return DataTypes.DateType;
      case Timestamp: return DataTypes.TimestampType;
      case Null: return DataTypes.NullType;
      case List: {
        Field c = f.getChildren().get(0);
        return DataTypes.createArrayType(spark(c), c.isNullable());
      }
      case Struct: {
        List<StructField> fields = new ArrayList<>();
        for (Field c : f.getChildren()) fields.add(new StructField(c.getName(), spark(c), c.isNullable(), Metadata.empty()));
        return DataTypes.createStructType(fields);
      }
      case Map: {
        Field entries = f.getChildren().get(0);
        Field k = entries.getChildren().get(0), v = entries.getChildren().get(1);
        return DataTypes.createMapType(spark(k), spark(v), v.isNullable());
      }
      default:
        throw new SparkLogException("SchemaMismatchError", 14, "column '" + f.getName() + "' has type " + t
            + ", which Spark cannot read");
    }
  }

  static StructType project(StructType full, List<String> columns) {
    if (columns == null) return full;
    StructType out = new StructType();
    List<String> unknown = new ArrayList<>();
    for (String c : columns) {
      if (!java.util.Arrays.asList(full.fieldNames()).contains(c)) unknown.add(c);
      else out = out.add(full.apply(c));
    }
    if (!unknown.isEmpty()) {
      throw SparkLogException.config("columns", "names unknown columns " + unknown + "; the topic has "
          + java.util.Arrays.asList(full.fieldNames()));
    }
    return out;
  }
}
