package io.sparklog.spark;

import java.util.Arrays;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;

import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.SupportsWrite;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.write.LogicalWriteInfo;
import org.apache.spark.sql.connector.write.WriteBuilder;
import org.apache.spark.sql.sources.DataSourceRegister;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/** The {@code spark-log} format in the JVM: a DataSource V2 source and sink with the Python
 *  connector's options, columns and checkpoint offsets (connectors/source.py). */
public final class SparkLogProvider implements TableProvider, DataSourceRegister {
  @Override public String shortName() { return "spark-log"; }

  @Override public boolean supportsExternalMetadata() { return true; }

  @Override
  public StructType inferSchema(CaseInsensitiveStringMap options) {
    if (isWrite(options)) return new StructType();
    ReadPlan plan = new ReadPlan(Options.parse(options, Options.READER));
    plan.close();
    return plan.fullSchema;
  }

  private static boolean isWrite(Map<String, String> options) {
    // Spark asks a TableProvider for its schema on writes too (writeStream); a reader's options
    // name what to read (subscribe, subscribePattern or assign), a sink's do not (with rows naming
    // their topic, not even a topic).
    for (String k : options.keySet()) {
      if (k.equalsIgnoreCase("subscribe") || k.equalsIgnoreCase("subscribePattern") || k.equalsIgnoreCase("assign")) return false;
    }
    return true;
  }

  @Override
  public Table getTable(StructType schema, Transform[] partitioning, Map<String, String> properties) {
    return new SparkLogTable(schema);
  }

  static final class SparkLogTable implements SupportsRead, SupportsWrite {
    private final StructType schema;

    SparkLogTable(StructType schema) { this.schema = schema; }

    @Override public String name() { return "spark-log"; }

    @Override public StructType schema() { return schema; }

    @Override
    public Set<TableCapability> capabilities() {
      return new HashSet<>(Arrays.asList(TableCapability.BATCH_READ, TableCapability.MICRO_BATCH_READ,
          TableCapability.BATCH_WRITE, TableCapability.STREAMING_WRITE, TableCapability.ACCEPT_ANY_SCHEMA));
    }

    @Override
    public ScanBuilder newScanBuilder(CaseInsensitiveStringMap options) {
      Options parsed = Options.parse(options, Options.READER);
      ReadPlan plan = new ReadPlan(parsed);
      if (schema.length() > 0 && !schema.equals(plan.fullSchema)) {
        throw new SparkLogException("SchemaMismatchError", 14, "the schema given to the reader (" + schema.simpleString()
            + ") differs from the topic's (" + plan.fullSchema.simpleString() + "); use the 'columns' option to select columns");
      }
      return new Scans.Builder(plan);
    }

    @Override
    public WriteBuilder newWriteBuilder(LogicalWriteInfo info) {
      return new Writes.Builder(info);
    }
  }
}
