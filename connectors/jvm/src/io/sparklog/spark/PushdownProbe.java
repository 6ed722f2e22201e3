package io.sparklog.spark;

import org.apache.arrow.vector.types.pojo.Schema;
import org.apache.spark.sql.sources.Filter;

/** For tests (py4j): which of Spark's filters the JVM scan sends to the brokers for a typed topic
 *  of this schema (an Arrow IPC schema message), one by one: tests/spark/test_typed_pushdown.py
 *  compares it with the Python source's rule (spark_log.filters.predicate). */
public final class PushdownProbe {
  private PushdownProbe() {}

  public static boolean[] pushed(byte[] schemaIpc, Filter[] filters) throws java.io.IOException {
    Schema schema = Cluster.readSchema(schemaIpc);
    boolean[] out = new boolean[filters.length];
    for (int i = 0; i < filters.length; i++) {
      Pushdown p = new Pushdown(schema);
      p.push(new Filter[] {filters[i]});
      out[i] = !p.rowPredicates.isEmpty();
    }
    return out;
  }
}
