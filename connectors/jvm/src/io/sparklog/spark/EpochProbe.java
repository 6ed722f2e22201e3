package io.sparklog.spark;

import java.util.Collections;
import java.util.HashMap;
import java.util.Map;

/** For tests (py4j): one {@link Cluster} of the JVM connector and its leader-epoch memory
 *  (KIP-320), as a query's driver holds it: tests/spark/test_jvm_leader_epochs.py moves a
 *  partition's leadership and checks that its ListOffsets and a task's reader refuse answers
 *  from older leader epochs than seen. */
public final class EpochProbe implements AutoCloseable {
  private final String bootstrap;
  private final Cluster cluster;

  public EpochProbe(String bootstrap) {
    this.bootstrap = bootstrap;
    this.cluster = new Cluster(bootstrap, Security.PLAINTEXT);
  }

  /** The leader epoch a request about topic-partition carries now (cached metadata). */
  public int leaderEpoch(String topic, int partition) { return cluster.leaderEpoch(topic, partition); }

  /** The highest leader epoch seen for topic-partition. */
  public int knownEpoch(String topic, int partition) { return cluster.knownEpoch(topic, partition); }

  public void seen(String topic, int partition, int epoch) { cluster.seen(topic, partition, epoch); }

  public void refresh(String topic) { cluster.topic(topic, true); }

  /** "latest" of topic-partition as the driver's latestOffset asks it, retried for up to {@code timeoutMs}. */
  public long latest(String topic, int partition, long timeoutMs) {
    TopicPartition tp = new TopicPartition(topic, partition);
    return cluster.listOffsets(Collections.singletonList(tp), -1, false, System.currentTimeMillis() + timeoutMs).get(tp);
  }

  public int epochRefusals() { return cluster.epochRefusals; }

  public int staleAnswers() { return cluster.staleAnswers; }

  /** A task's read of topic-partition [start, end) (a bytes topic) planned when the driver knew
   *  leader epoch {@code epoch}: {rows read, answers its reader refused for their epoch}. */
  public static long[] read(String bootstrap, String topic, int partition, long start, long end, int epoch,
                            long pollTimeoutMs) throws Exception {
    Map<String, String> raw = new HashMap<>();
    raw.put("bootstrap", bootstrap);
    raw.put("pollTimeoutMs", Long.toString(pollTimeoutMs));
    raw.put("assign", "{\"" + topic + "\": [" + partition + "]}");
    ReadPlan plan = new ReadPlan(Options.parse(raw, Options.READER));
    long rows = 0;
    RangeReader reader = new RangeReader(plan, plan.fullSchema,
        new Scans.RangePartition(topic, partition, start, end, new String[0], epoch));
    try {
      while (reader.next()) rows += reader.get().numRows();
      return new long[] {rows, reader.epochRefusals()};
    } finally {
      reader.close();
      plan.close();
    }
  }

  @Override public void close() { cluster.close(); }
}
