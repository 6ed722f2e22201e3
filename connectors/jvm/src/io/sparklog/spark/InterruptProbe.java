package io.sparklog.spark;

import org.apache.spark.SparkContext;
import org.apache.spark.sql.execution.streaming.runtime.StreamExecution$;

/** For tests (py4j): what the connector does on a thread whose interrupt flag is set (Spark
 *  stopping a query interrupts its stream thread): tests/spark/test_jvm_interrupts.py. */
public final class InterruptProbe {
  private InterruptProbe() {}

  /** The schema parsed on an interrupted thread (its fields as text); the flag is cleared after. */
  public static String readSchemaInterrupted(byte[] ipc) {
    Thread.currentThread().interrupt();
    try {
      return Cluster.readSchema(ipc).toString();
    } finally {
      Thread.interrupted();
    }
  }

  /** Whether Spark takes what a backoff sleep on an interrupted thread throws for an
   *  interruption (a stopped query), and whether the thread's flag was set again. */
  public static boolean[] sleepInterrupted() {
    Thread.currentThread().interrupt();
    try {
      Cluster.sleep(1);
      return new boolean[] {false, false};
    } catch (RuntimeException e) {
      boolean flagged = Thread.currentThread().isInterrupted();
      return new boolean[] {StreamExecution$.MODULE$.isInterruptionException(e, SparkContext.getOrCreate()), flagged};
    } finally {
      Thread.interrupted();
    }
  }
}
