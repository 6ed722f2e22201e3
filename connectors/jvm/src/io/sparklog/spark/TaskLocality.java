package io.sparklog.spark;

import java.util.ArrayList;
import java.util.List;

import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerTaskEnd;
import org.apache.spark.scheduler.TaskInfo;

/** A SparkListener that keeps every finished task's stage, index, executor, host and Spark's
 *  task locality (PROCESS_LOCAL, NODE_LOCAL, ANY, ...), so a test or bench can show where the
 *  tasks of a spark-log read ran against the executors its partitions preferred
 *  ({@code Scans.Locality.last()}).  Register with {@code sc.addSparkListener(new TaskLocality())}. */
public final class TaskLocality extends SparkListener {
  private final List<String> tasks = new ArrayList<>();

  @Override public synchronized void onTaskEnd(SparkListenerTaskEnd end) {
    TaskInfo t = end.taskInfo();
    tasks.add(end.stageId() + " " + t.index() + " " + t.executorId() + " " + t.host() + " " + t.taskLocality() + " "
        + t.successful());
  }

  /** "stage index executor host locality successful", one task a line. */
  public synchronized String report() { return String.join("\n", tasks); }

  public synchronized void clear() { tasks.clear(); }

  /** The preferred locations of the latest planned spark-log partitions ("topic-partition loc,loc" lines). */
  public static String preferred() { return Scans.Locality.last(); }
}
