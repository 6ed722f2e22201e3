package io.sparklog.spark;

/** For tests (py4j): how often the micro-batch streams of this JVM planned their input
 *  partitions.  tests/spark/test_streaming.py checks one planning per micro-batch: Spark plans a
 *  batch's scan more than once (and foreachBatch plans each action on the batch again), the
 *  later plannings of the same batch reuse the first's partitions (Scans.Stream). */
public final class PlanProbe {
  private PlanProbe() {}

  public static long streamPlannings() { return Scans.Stream.PLANNINGS.get(); }
}
