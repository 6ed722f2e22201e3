package io.sparklog.spark;

import java.io.IOException;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/** A streaming query's progress published as a consumer group (reader option {@code groupId}),
 *  as connectors/group_progress.py publishes it: the checkpoint stays the query's only source of
 *  truth; the group is a copy for lag tools.  The query commits as a member-less group
 *  (GroupCoordinator.OffsetCommit with member "" and epoch -1, metadata {@link #METADATA}), so
 *  the coordinator refuses it (NonEmptyGroupError) while consumers are members: logged, the query
 *  goes on.  Offsets are committed only when they changed; a failed commit is logged once per
 *  distinct message and tried again at a later trigger (at most every {@link #RETRY_MS}).
 *  Lives on the driver (the stream's offset methods), never shipped to executors. */
final class GroupProgress {
  static final String METADATA = "spark-log streaming query";
  static final long RETRY_MS = 5_000;
  private static final String SERVICE = "spark_log.groups.v1.GroupCoordinator/";
  private static final org.slf4j.Logger LOG = org.slf4j.LoggerFactory.getLogger(GroupProgress.class);

  final String groupId;
  private final String bootstrap;
  private final Security security;
  private Map<TopicPartition, Long> published = new TreeMap<>();
  private long retryAt;
  private String lastError = "";

  GroupProgress(String groupId, String bootstrap, Security security) {
    this.groupId = groupId;
    this.bootstrap = bootstrap;
    this.security = security;
  }

  /** Commit {@code offsets} unless they are what was last committed; true when committed now. */
  boolean publish(Map<TopicPartition, Long> offsets) {
    if (offsets.isEmpty() || offsets.equals(published) || System.currentTimeMillis() < retryAt) return false;
    try {
      commit(offsets);
    } catch (SparkLogException e) {
      retryAt = System.currentTimeMillis() + RETRY_MS;
      if (!e.getMessage().equals(lastError)) {
        lastError = e.getMessage();
        LOG.warn("query progress not committed to group '{}' (the checkpoint is unaffected): {}", groupId, e.getMessage());
      }
      return false;
    }
    published = new TreeMap<>(offsets);
    lastError = "";
    return true;
  }

  private void commit(Map<TopicPartition, Long> offsets) {
    Grpc.Proto req = new Grpc.Proto().str(1, groupId).str(2, "").i64(3, -1);
    for (Map.Entry<TopicPartition, Long> e : new TreeMap<>(offsets).entrySet()) {
      req.bytes(4, new Grpc.Proto().str(1, e.getKey().topic).i64(2, e.getKey().partition).i64(3, e.getValue())
          .str(4, METADATA).i64(5, -1).bytes());
    }
    // a short deadline: a commit never stalls a trigger for long
    Txn.call(SERVICE, bootstrap, security, groupId, "OffsetCommit", req.bytes(), System.currentTimeMillis() + 5_000);
  }

  /** Every offset the group committed (empty for a group that does not exist). */
  Map<TopicPartition, Long> committed() {
    List<Object[]> answer = Txn.call(SERVICE, bootstrap, security, groupId, "OffsetFetch",
        new Grpc.Proto().str(1, groupId).bool(3, true).bytes(), System.currentTimeMillis() + 30_000);
    Map<TopicPartition, Long> out = new TreeMap<>();
    try {
      for (Object[] f : answer) {
        if ((int) f[0] != 1 || !(f[1] instanceof byte[])) continue;
        List<Object[]> o = Grpc.fields((byte[]) f[1]);
        out.put(new TopicPartition(Grpc.string(o, 1), (int) Grpc.number(o, 2)), Grpc.number(o, 3));
      }
    } catch (IOException e) {
      throw new SparkLogException("SparkLogError", 1, "group '" + groupId + "': unreadable OffsetFetch answer: " + e);
    }
    return out;
  }

  /** startingOffsets=group (connectors/offsets.py from_group): every partition of {@code latest}
   *  starts at the group's committed offset clamped to [earliest, latest]; partitions without
   *  one start at their earliest offset. */
  static TreeMap<TopicPartition, Long> fromGroup(Map<TopicPartition, Long> committed, Map<TopicPartition, Long> earliest,
                                                 Map<TopicPartition, Long> latest) {
    TreeMap<TopicPartition, Long> out = new TreeMap<>();
    for (Map.Entry<TopicPartition, Long> e : latest.entrySet()) {
      long start = earliest.getOrDefault(e.getKey(), 0L);
      out.put(e.getKey(), Math.min(Math.max(committed.getOrDefault(e.getKey(), start), start), e.getValue()));
    }
    return out;
  }
}
