package io.sparklog.spark;

import java.io.ByteArrayInputStream;
import java.io.Closeable;
import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.nio.channels.Channels;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;

import org.apache.arrow.vector.ipc.ReadChannel;
import org.apache.arrow.vector.ipc.message.MessageSerializer;
import org.apache.arrow.vector.types.pojo.Schema;

/** The brokers as the JVM connector sees them: metadata from a data listener, one
 *  connection per broker, requests routed to partition leaders (retried on NOT_LEADER and
 *  connection failures after a metadata refresh).  Not thread-safe: one per task / driver
 *  object.
 *
 *  Discovery: the bootstrap option holds brokers' gRPC addresses; the data listener of one
 *  of them is found with the gRPC method {@code spark_log.data.v1.DataListener/Describe}
 *  (called through the gRPC runtime pip's pyspark ships, shaded in spark-connect), once per
 *  JVM and bootstrap; its METADATA answer then names every broker's data listener.
 *
 *  Leader epochs (KIP-320, as spark_log/_client.py's Cluster): per partition the metadata with
 *  the highest leader epoch seen is kept; a METADATA answer with an older one is stale (a broker
 *  behind the metadata log, or a deposed leader cut off from the controller) and the next broker
 *  is asked.  LIST_OFFSETS_V2, FETCH_V2 and FETCH_TIER_V2 carry the epoch; brokers refuse another
 *  one (FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH, retried after a refresh).  So a Cluster that
 *  has seen a new leader never takes a deposed leader's "latest" (a query's latestOffset going
 *  backwards) or records. */
final class Cluster implements Closeable {
  static final class Broker {
    final int id;
    final String address;
    final String dataHost;
    final int dataPort;

    Broker(int id, String address, String dataHost, int dataPort) {
      this.id = id; this.address = address; this.dataHost = dataHost; this.dataPort = dataPort;
    }

    String host() {
      int colon = address.lastIndexOf(':');
      return colon < 0 ? address : address.substring(0, colon);
    }
  }

  static final class PartitionMeta {
    final int partition, leader, leaderEpoch;
    final int[] replicas, isr;

    PartitionMeta(int partition, int leader, int leaderEpoch, int[] replicas, int[] isr) {
      this.partition = partition; this.leader = leader; this.leaderEpoch = leaderEpoch;
      this.replicas = replicas; this.isr = isr;
    }
  }

  static final class TopicMeta {
    final String name, kind;
    /** The topic's id (METADATA_V2): a topic deleted and created again under the same name has a new one. */
    final String topicId;
    final int timestampType;
    final List<String> keyColumns;
    final TreeMap<Integer, Schema> schemas;
    final List<PartitionMeta> partitions;

    TopicMeta(String name, String topicId, String kind, int timestampType, List<String> keyColumns,
              TreeMap<Integer, Schema> schemas, List<PartitionMeta> partitions) {
      this.name = name; this.topicId = topicId; this.kind = kind; this.timestampType = timestampType; this.keyColumns = keyColumns;
      this.schemas = schemas; this.partitions = partitions;
    }

    /** The topic's latest schema (typed topics), null when it has none yet. */
    Schema latest() { return schemas.isEmpty() ? null : schemas.lastEntry().getValue(); }

    int latestSchemaId() { return schemas.isEmpty() ? -1 : schemas.lastKey(); }
  }

  private static final Map<String, String[]> DISCOVERED = new ConcurrentHashMap<>();
  static final int IO_TIMEOUT_MS = 180_000;

  /** Metadata shared by the Cluster objects of one JVM (tasks), per bootstrap and security:
   *  a task reuses what another fetched less than SHARED_TTL_MS ago instead of asking again;
   *  a refresh (retries, unknown schema ids) always asks. */
  private static final class Shared {
    final Map<Integer, Broker> brokers;
    final Map<String, TopicMeta> topics = new ConcurrentHashMap<>();
    final Map<String, Long> fetched = new ConcurrentHashMap<>();

    Shared(Map<Integer, Broker> brokers) { this.brokers = brokers; }
  }

  private static final Map<String, Shared> SHARED = new ConcurrentHashMap<>();
  static final long SHARED_TTL_MS = 10_000;

  private final String bootstrap;
  final Security security;
  private final String sharedKey;
  private final Map<Integer, Broker> brokers = new HashMap<>();
  private final Map<String, TopicMeta> topics = new HashMap<>();
  private final Map<Integer, DataConnection> connections = new HashMap<>();

  Cluster(String bootstrap, Security security) {
    if (bootstrap == null || bootstrap.trim().isEmpty()) {
      throw SparkLogException.config("bootstrap", "no broker address: give option 'bootstrap' or set SPARK_LOG_BOOTSTRAP");
    }
    this.bootstrap = bootstrap.trim();
    this.security = security == null ? Security.PLAINTEXT : security;
    this.sharedKey = this.bootstrap + "|" + this.security.key();
  }

  // --- discovery -----------------------------------------------------------------------

  private DataConnection anyConnection() { return anyConnection(java.util.Collections.emptySet()); }

  /** A connection to some broker's data listener, preferring one not in {@code avoid}
   *  (brokers that just answered with a retriable error, e.g. one catching up with the
   *  metadata log after a restart). */
  private DataConnection anyConnection(java.util.Set<DataConnection> avoid) {
    for (DataConnection c : connections.values()) if (!c.broken() && !avoid.contains(c)) return c;
    for (DataConnection c : extra) if (!c.broken() && !avoid.contains(c)) return c;
    for (Broker b : brokers.values()) {
      DataConnection open = connections.get(b.id);
      if (b.dataPort > 0 && (open == null || open.broken())) {
        try {
          return connection(b.id);
        } catch (RuntimeException ignored) {
          // try the next
        }
      }
    }
    for (DataConnection c : connections.values()) if (!c.broken()) return c;
    String[] found = DISCOVERED.get(sharedKey);
    if (found != null) {
      try {
        return adopt(DataConnection.borrow(found[0], Integer.parseInt(found[1]), IO_TIMEOUT_MS, security));
      } catch (IOException e) {
        DISCOVERED.remove(sharedKey);
      }
    }
    StringBuilder why = new StringBuilder();
    for (String address : bootstrap.split(",")) {
      address = address.trim();
      try {
        String[] where = describe(address, security);
        DataConnection c = adopt(DataConnection.borrow(where[0], Integer.parseInt(where[1]), IO_TIMEOUT_MS, security));
        DISCOVERED.put(sharedKey, where);
        return c;
      } catch (SparkLogException e) {
        why.append("; ").append(address).append(": ").append(e.getMessage());
      } catch (Exception e) {
        why.append("; ").append(address).append(": ").append(e);
      }
    }
    throw new SparkLogException("BrokerNotAvailableError", ErrorCodes.BROKER_NOT_AVAILABLE,
        "no data listener reachable through bootstrap " + bootstrap + why);
  }

  /** A discovery connection, given back to the pool on close (kept apart from the per-broker ones). */
  private final List<DataConnection> extra = new ArrayList<>();

  private DataConnection adopt(DataConnection c) {
    extra.add(c);
    return c;
  }

  /** {host, port} of the data listener of the broker whose gRPC address is {@code address}. */
  static String[] describe(String address, Security security) throws Exception {
    org.sparkproject.connect.grpc.ManagedChannel channel = Grpc.channel(address, security);
    try {
      org.sparkproject.connect.grpc.MethodDescriptor.Marshaller<byte[]> raw =
          new org.sparkproject.connect.grpc.MethodDescriptor.Marshaller<byte[]>() {
            @Override public InputStream stream(byte[] value) { return new ByteArrayInputStream(value); }
            @Override public byte[] parse(InputStream stream) {
              try { return stream.readAllBytes(); } catch (IOException e) { throw new RuntimeException(e); }
            }
          };
      org.sparkproject.connect.grpc.MethodDescriptor<byte[], byte[]> method =
          org.sparkproject.connect.grpc.MethodDescriptor.<byte[], byte[]>newBuilder()
              .setType(org.sparkproject.connect.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName("spark_log.data.v1.DataListener/Describe")
              .setRequestMarshaller(raw).setResponseMarshaller(raw).build();
      byte[] answer = org.sparkproject.connect.grpc.stub.ClientCalls.blockingUnaryCall(
          Grpc.authenticated(channel, security), method,
          org.sparkproject.connect.grpc.CallOptions.DEFAULT.withDeadlineAfter(10, TimeUnit.SECONDS), new byte[0]);
      // DataListenerInfo: 1 broker_id (varint), 2 host (string), 3 port (varint), 4 reason (string)
      String host = "", reason = "";
      long port = 0;
      int at = 0;
      while (at < answer.length) {
        long[] key = varint(answer, at);
        at = (int) key[1];
        int field = (int) (key[0] >>> 3), wire = (int) (key[0] & 7);
        if (wire == 0) {
          long[] v = varint(answer, at);
          at = (int) v[1];
          if (field == 3) port = v[0];
        } else if (wire == 2) {
          long[] n = varint(answer, at);
          at = (int) n[1];
          String text = new String(answer, at, (int) n[0], java.nio.charset.StandardCharsets.UTF_8);
          at += (int) n[0];
          if (field == 2) host = text;
          if (field == 4) reason = text;
        } else {
          throw new IOException("unexpected protobuf wire type " + wire);
        }
      }
      if (port == 0) {
        throw new SparkLogException("BrokerNotAvailableError", ErrorCodes.BROKER_NOT_AVAILABLE,
            "broker " + address + " runs no data listener: " + reason);
      }
      return new String[] {host, Long.toString(port)};
    } finally {
      channel.shutdownNow();
      channel.awaitTermination(5, TimeUnit.SECONDS);
    }
  }

  private static long[] varint(byte[] b, int at) {
    long value = 0;
    int shift = 0;
    while (true) {
      int x = b[at++] & 0xFF;
      value |= (long) (x & 0x7F) << shift;
      if ((x & 0x80) == 0) return new long[] {value, at};
      shift += 7;
    }
  }

  // --- metadata ------------------------------------------------------------------------

  /** One METADATA answer, parsed (applied by {@link #refresh} once chosen). */
  private static final class Answer {
    final Map<Integer, Broker> brokers = new HashMap<>();
    final List<Object[]> topics = new ArrayList<>();  // {name, code, message, TopicMeta or null}
  }

  private static Answer parseMetadata(ByteBuffer r) {
    Answer a = new Answer();
    int nb = r.getInt();
    for (int i = 0; i < nb; i++) {
      int id = r.getInt();
      String address = Buf.str(r), dataHost = Buf.str(r);
      int dataPort = r.getInt();
      Buf.str(r);
      r.get();
      a.brokers.put(id, new Broker(id, address, dataHost, dataPort));
    }
    int nt = r.getInt();
    for (int i = 0; i < nt; i++) {
      String name = Buf.str(r);
      short code = r.getShort();
      String message = Buf.str(r);
      String topicId = Buf.str(r);  // METADATA_V2
      String kind = Buf.str(r);
      int tsType = r.get();
      List<String> keys = new ArrayList<>();
      for (int k = r.getInt(); k > 0; k--) keys.add(Buf.str(r));
      TreeMap<Integer, Schema> schemas = new TreeMap<>();
      for (int k = r.getInt(); k > 0; k--) {
        int id = r.getInt();
        schemas.put(id, readSchema(Buf.bytes(r)));
      }
      List<PartitionMeta> parts = new ArrayList<>();
      for (int k = r.getInt(); k > 0; k--) {
        int p = r.getInt(), leader = r.getInt(), epoch = r.getInt();
        int[] replicas = new int[r.getInt()];
        for (int j = 0; j < replicas.length; j++) replicas[j] = r.getInt();
        int[] isr = new int[r.getInt()];
        for (int j = 0; j < isr.length; j++) isr[j] = r.getInt();
        parts.add(new PartitionMeta(p, leader, epoch, replicas, isr));
      }
      a.topics.add(new Object[] {name, code, message,
          code == 0 ? new TopicMeta(name, topicId, kind, tsType, keys, schemas, parts) : null});
    }
    return a;
  }

  // --- leader epochs (KIP-320) ---------------------------------------------------------

  /** Per partition, the metadata with the highest leader epoch this object has seen (a seed from
   *  {@link #seen} has leader -1 until an answer at least as new names one). */
  private final Map<TopicPartition, PartitionMeta> newest = new HashMap<>();
  /** The topic id the entries of {@link #newest} belong to, per topic name: an answer about another
   *  id (the topic was deleted and created again) is never stale; the old entries are dropped. */
  private final Map<String, String> newestIds = new HashMap<>();
  /** METADATA answers found stale (an older leader epoch than seen for some partition). */
  int staleAnswers;
  /** Answers refused for their leader epoch: FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH, or a
   *  LIST_OFFSETS_V2 answer naming an older epoch than seen (each retried after a refresh). */
  int epochRefusals;

  private boolean isStale(Answer a) {
    for (Object[] t : a.topics) {
      if (t[3] == null) continue;
      TopicMeta m = (TopicMeta) t[3];
      String knownId = newestIds.get(m.name);
      if (knownId != null && !knownId.equals(m.topicId)) continue;  // another topic under that name
      for (PartitionMeta p : m.partitions) {
        if (newerKnown(m.name, p) != null) return true;
      }
    }
    return false;
  }

  /** The remembered entry of {@code p}'s partition when it has a newer leader epoch than
   *  {@code p} (which is then stale), else null: the one rule of {@link #isStale} and
   *  {@link #newest(TopicMeta)}. */
  private PartitionMeta newerKnown(String topic, PartitionMeta p) {
    PartitionMeta known = newest.get(new TopicPartition(topic, p.partition));
    return known != null && p.leaderEpoch < known.leaderEpoch ? known : null;
  }

  /** {@code m} with every partition at the highest leader epoch seen (remembered here): an
   *  older entry in {@code m} is stale and the remembered one is kept. */
  private TopicMeta newest(TopicMeta m) {
    if (m == null) return null;
    String knownId = newestIds.put(m.name, m.topicId);
    if (knownId != null && !knownId.equals(m.topicId)) {
      newest.keySet().removeIf(tp -> tp.topic.equals(m.name));  // created again: its epochs start over
    }
    List<PartitionMeta> parts = new ArrayList<>(m.partitions.size());
    boolean changed = false;
    for (PartitionMeta p : m.partitions) {
      PartitionMeta known = newerKnown(m.name, p);
      if (known != null) {
        parts.add(known);
        changed = true;
      } else {
        newest.put(new TopicPartition(m.name, p.partition), p);
        parts.add(p);
      }
    }
    return changed ? new TopicMeta(m.name, m.topicId, m.kind, m.timestampType, m.keyColumns, m.schemas, parts) : m;
  }

  /** The other way round for the JVM-wide cache: per partition the newer of {@code before} and {@code m}. */
  private static TopicMeta newerOf(TopicMeta before, TopicMeta m) {
    if (before == null || !before.topicId.equals(m.topicId) || before.partitions.size() != m.partitions.size()) return m;
    List<PartitionMeta> parts = new ArrayList<>(m.partitions.size());
    for (int i = 0; i < m.partitions.size(); i++) {
      PartitionMeta a = before.partitions.get(i), b = m.partitions.get(i);
      parts.add(a.partition == b.partition && a.leaderEpoch > b.leaderEpoch ? a : b);
    }
    return new TopicMeta(m.name, m.topicId, m.kind, m.timestampType, m.keyColumns, m.schemas, parts);
  }

  /** The highest leader epoch seen for topic-partition (-1: none). */
  int knownEpoch(String topic, int partition) {
    PartitionMeta known = newest.get(new TopicPartition(topic, partition));
    return known == null ? -1 : known.leaderEpoch;
  }

  /** Remember that topic-partition had leader epoch {@code epoch} (e.g. the driver's, for a task's
   *  reader): answers older than it are stale from now on.  The entry keeps the leader known so
   *  far (its broker then checks the epoch), else none until an answer that new names one. */
  void seen(String topic, int partition, int epoch) {
    TopicPartition tp = new TopicPartition(topic, partition);
    PartitionMeta known = newest.get(tp);
    if (epoch < 0 || (known != null && epoch <= known.leaderEpoch)) return;
    newest.put(tp, known == null ? new PartitionMeta(partition, -1, epoch, new int[0], new int[0])
        : new PartitionMeta(partition, known.leader, epoch, known.replicas, known.isr));
    topics.remove(topic);  // taken again through newest()
  }

  /** The leader epoch a request about topic-partition carries: the cached metadata's (-1: unknown). */
  int leaderEpoch(String topic, int partition) {
    for (PartitionMeta p : topic(topic, false).partitions) {
      if (p.partition == partition) return p.leaderEpoch;
    }
    return -1;
  }

  // --- metadata ------------------------------------------------------------------------

  /** Refresh metadata of {@code names} (null: every topic).  An answer stale in some partition's
   *  leader epoch (a broker behind the metadata log, or a deposed leader cut off from the
   *  controller that still answers with the image in which it leads) is passed over for the next
   *  broker; when none answers fresh, the stale answer is used for what it does not regress
   *  (partitions keep their newer entries, its broker list only adds). */
  Map<String, TopicMeta> refresh(Collection<String> names) {
    Buf req = new Buf();
    if (names == null) {
      req.i32(-1);
    } else {
      req.i32(names.size());
      for (String n : names) req.str(n);
    }
    java.util.Set<DataConnection> asked = new java.util.HashSet<>();
    DataConnection[] used = new DataConnection[1];
    Answer chosen = null;
    boolean stale = true;
    for (int attempt = 0; attempt <= Math.max(brokers.size(), 3); attempt++) {
      ByteBuffer r = callAny(DataConnection.METADATA_V2, req, asked, used);
      Answer a = parseMetadata(r);
      boolean again = asked.contains(used[0]);  // no other broker left to ask
      if (!isStale(a)) {
        chosen = a;
        stale = false;
        break;
      }
      staleAnswers++;
      if (chosen == null) chosen = a;
      asked.add(used[0]);
      if (again) break;
    }
    if (stale) {
      brokers.putAll(chosen.brokers);
    } else {
      brokers.clear();
      brokers.putAll(chosen.brokers);
    }
    Map<String, TopicMeta> out = new LinkedHashMap<>();
    for (Object[] t : chosen.topics) {
      String name = (String) t[0];
      short code = (Short) t[1];
      if (code != 0) {
        topics.remove(name);
        if (code == ErrorCodes.UNKNOWN_TOPIC_OR_PARTITION && !stale) {  // deleted: a recreated topic starts over
          newest.keySet().removeIf(tp -> tp.topic.equals(name));
          newestIds.remove(name);
        }
        if (names != null) throw SparkLogException.of(code, (String) t[2]);
        continue;
      }
      TopicMeta meta = newest((TopicMeta) t[3]);
      topics.put(name, meta);
      out.put(name, meta);
    }
    if (stale) return out;  // the JVM-wide cache takes fresh answers only (as they came, never this object's seeds)
    Shared shared = new Shared(new HashMap<>(brokers));
    Shared before = SHARED.get(sharedKey);
    if (before != null) {
      shared.topics.putAll(before.topics);
      shared.fetched.putAll(before.fetched);
    }
    long now = System.currentTimeMillis();
    for (Object[] t : chosen.topics) {
      if (t[3] == null) continue;
      String name = (String) t[0];
      shared.topics.put(name, newerOf(before == null ? null : before.topics.get(name), (TopicMeta) t[3]));
      shared.fetched.put(name, now);
    }
    SHARED.put(sharedKey, shared);
    return out;
  }

  static Schema readSchema(byte[] ipc) {
    try {
      return MessageSerializer.deserializeSchema(new ReadChannel(MemoryChannels.reader(ipc)));
    } catch (IOException e) {
      throw new SparkLogException("InvalidSchemaError", 24, "cannot read a topic schema: " + e);
    }
  }

  TopicMeta topic(String name, boolean refresh) {
    TopicMeta meta = topics.get(name);
    if (meta == null && !refresh) {
      Shared shared = SHARED.get(sharedKey);
      Long at = shared == null ? null : shared.fetched.get(name);
      if (at != null && System.currentTimeMillis() - at < SHARED_TTL_MS && shared.topics.get(name) != null) {
        meta = newest(shared.topics.get(name));
        topics.put(name, meta);
        if (brokers.isEmpty()) brokers.putAll(shared.brokers);
      }
    }
    if (meta == null || refresh) {
      refresh(java.util.Collections.singletonList(name));
      meta = topics.get(name);
    }
    return meta;
  }

  List<String> allTopics() { return new ArrayList<>(refresh(null).keySet()); }

  Map<Integer, Broker> brokers() { return brokers; }

  /** Metadata calls go to any broker: a connection that fails is dropped, and a broker
   *  that answers a retriable error (restarting, catching up with the metadata log, not
   *  registered yet) is passed over for another, with a short backoff once every broker
   *  was tried, for up to 60 s. */
  private ByteBuffer callAny(int api, Buf req, java.util.Set<DataConnection> avoid, DataConnection[] used) {
    long deadline = System.currentTimeMillis() + 60_000;
    Exception last = null;
    java.util.Set<DataConnection> refused = new java.util.HashSet<>(avoid);
    while (true) {
      DataConnection c = anyConnection(refused);
      try {
        used[0] = c;
        return c.call(api, req);
      } catch (IOException e) {
        last = e;
        c.close();
        connections.values().remove(c);
        extra.remove(c);
        DISCOVERED.remove(sharedKey);
      } catch (SparkLogException e) {
        if (!ErrorCodes.retriable(e.code)) throw e;
        last = e;
        if (refused.contains(c)) {  // every broker refused: back off, then ask them all again
          refused.clear();
          sleep(100);
        }
        refused.add(c);
      }
      if (System.currentTimeMillis() > deadline) break;
    }
    throw new SparkLogException("BrokerNotAvailableError", ErrorCodes.BROKER_NOT_AVAILABLE, "metadata: " + last);
  }

  DataConnection connection(int brokerId) {
    DataConnection c = connections.get(brokerId);
    if (c != null && !c.broken()) return c;
    connections.remove(brokerId);
    Broker b = brokers.get(brokerId);
    if (b == null || b.dataPort <= 0) {
      throw new SparkLogException("BrokerNotAvailableError", ErrorCodes.BROKER_NOT_AVAILABLE,
          "broker " + brokerId + " has no reachable data listener");
    }
    try {
      c = DataConnection.borrow(b.dataHost, b.dataPort, IO_TIMEOUT_MS, security);
    } catch (IOException e) {
      throw new SparkLogException("BrokerNotAvailableError", ErrorCodes.BROKER_NOT_AVAILABLE,
          "broker " + brokerId + " at " + b.dataHost + ":" + b.dataPort + ": " + e);
    }
    connections.put(brokerId, c);
    return c;
  }

  int leader(String topic, int partition, boolean refresh) {
    TopicMeta meta = topic(topic, refresh);
    for (PartitionMeta p : meta.partitions) {
      if (p.partition == partition) return p.leader;
    }
    throw new SparkLogException("UnknownTopicOrPartitionError", ErrorCodes.UNKNOWN_TOPIC_OR_PARTITION,
        topic + "-" + partition + " does not exist");
  }

  /** What to do with the leader's connection (IOException: the connection failed). */
  interface OnLeader<T> { T call(DataConnection c) throws IOException; }

  /** Call {@code api} on the leader of topic-partition; retried (metadata refreshed) on
   *  connection failures and whole-request retriable errors, for up to {@code deadlineMs}. */
  ByteBuffer callLeader(String topic, int partition, int api, Buf req, long deadlineMs) {
    return onLeader(topic, partition, c -> c.call(api, req), deadlineMs);
  }

  <T> T onLeader(String topic, int partition, OnLeader<T> call, long deadlineMs) {
    boolean refresh = false;
    long backoff = 50;
    while (true) {
      int leader = leader(topic, partition, refresh);
      try {
        if (leader < 0) {
          throw new SparkLogException("NotLeaderError", ErrorCodes.NOT_LEADER, topic + "-" + partition + " has no leader"
              + " known in leader epoch " + knownEpoch(topic, partition) + " or later");
        }
        DataConnection c = connection(leader);
        try {
          return call.call(c);
        } catch (IOException e) {
          c.close();
          connections.remove(leader);
          throw new SparkLogException("BrokerNotAvailableError", ErrorCodes.BROKER_NOT_AVAILABLE, e.toString());
        }
      } catch (SparkLogException e) {
        if (!e.retriable() || System.currentTimeMillis() > deadlineMs) throw e;
        refresh = true;
        sleep(backoff);
        backoff = Math.min(1000, backoff * 2);
      }
    }
  }

  static void sleep(long ms) {
    try {
      Thread.sleep(ms);
    } catch (InterruptedException e) {
      throw Interrupts.unchecked(e);
    }
  }

  /** Offsets ({@code spec}: -2 earliest, -1 latest) of {@code parts}, asked of each leader;
   *  retriable per-partition errors are retried after a metadata refresh, for up to 60 s.
   *
   *  Each partition carries the leader epoch of this object's metadata (LIST_OFFSETS_V2,
   *  KIP-320): a broker whose epoch differs refuses it (FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH,
   *  retried after a refresh), and an answer naming an older leader epoch than one seen is
   *  refused here the same way, so once a newer leader was seen a deposed leader's "latest"
   *  (its stale high watermark) is never taken. */
  Map<TopicPartition, Long> listOffsets(Collection<TopicPartition> parts, long spec, boolean committed) {
    return listOffsets(parts, spec, committed, System.currentTimeMillis() + 60_000);
  }

  Map<TopicPartition, Long> listOffsets(Collection<TopicPartition> parts, long spec, boolean committed, long deadline) {
    Map<TopicPartition, Long> out = new TreeMap<>();
    List<TopicPartition> todo = new ArrayList<>(parts);
    boolean refresh = false;
    while (!todo.isEmpty()) {
      Map<Integer, List<TopicPartition>> byLeader = new TreeMap<>();
      for (TopicPartition tp : todo) {
        byLeader.computeIfAbsent(leader(tp.topic, tp.partition, refresh), k -> new ArrayList<>()).add(tp);
      }
      refresh = false;
      List<TopicPartition> again = new ArrayList<>();
      SparkLogException lastError = null;
      for (Map.Entry<Integer, List<TopicPartition>> e : byLeader.entrySet()) {
        Buf req = new Buf().i64(spec).u8(committed ? 1 : 0).i32(e.getValue().size());
        for (TopicPartition tp : e.getValue()) req.str(tp.topic).i32(tp.partition).i32(leaderEpoch(tp.topic, tp.partition));
        ByteBuffer r;
        try {
          if (e.getKey() < 0) throw new SparkLogException("NotLeaderError", ErrorCodes.NOT_LEADER, "no leader");
          DataConnection c = connection(e.getKey());
          try {
            r = c.call(DataConnection.LIST_OFFSETS_V2, req);
          } catch (IOException io) {
            c.close();
            connections.remove(e.getKey());
            throw new SparkLogException("BrokerNotAvailableError", ErrorCodes.BROKER_NOT_AVAILABLE, io.toString());
          }
        } catch (SparkLogException err) {
          if (!err.retriable()) throw err;
          again.addAll(e.getValue());
          lastError = err;
          continue;
        }
        for (int n = r.getInt(); n > 0; n--) {
          String t = Buf.str(r);
          int p = r.getInt();
          short code = r.getShort();
          String message = Buf.str(r);
          long offset = r.getLong();
          int epoch = r.getInt();  // the answering replica's leader epoch
          if (code == 0 && epoch >= 0 && epoch < knownEpoch(t, p)) {
            code = ErrorCodes.FENCED_LEADER_EPOCH;
            message = t + "-" + p + ": broker " + e.getKey() + " answered in leader epoch " + epoch + ", older than "
                + knownEpoch(t, p) + " already seen";
          }
          if (code == 0) {
            out.put(new TopicPartition(t, p), offset);
          } else if (ErrorCodes.retriable(code)) {
            if (code == ErrorCodes.FENCED_LEADER_EPOCH || code == ErrorCodes.UNKNOWN_LEADER_EPOCH) epochRefusals++;
            again.add(new TopicPartition(t, p));
            lastError = SparkLogException.of(code, message);
          } else {
            throw SparkLogException.of(code, message);
          }
        }
      }
      todo = again;
      if (!todo.isEmpty()) {
        if (System.currentTimeMillis() > deadline) throw lastError;
        refresh = true;
        sleep(100);
      }
    }
    return out;
  }

  /** The stored bytes per record of the first data frame at or after {@code offset} of tp
   *  (one fetch of at most 1 MiB; null when there is none): maxBytesPerTrigger's estimate. */
  Double storedBytesPerRecord(TopicPartition tp, long offset, boolean committed) {
    ByteBuffer r = onLeader(tp.topic, tp.partition, c -> c.call(DataConnection.FETCH_V2, new Buf().i32(0).i32(1)
        .i32(1 << 20).u8(committed ? 1 : 0).i32(1).str(tp.topic).i32(tp.partition).i32(leaderEpoch(tp.topic, tp.partition))
        .i64(offset).i64(0).i32(1 << 20)), System.currentTimeMillis() + 30_000);
    r.getInt();
    Buf.str(r);
    r.getInt();
    short code = r.getShort();
    Buf.str(r);
    r.getLong();
    r.getLong();
    r.getLong();
    if (code != 0) return null;
    ByteBuffer frames = Buf.slice(r);
    int at = 0;
    while (at + 64 <= frames.limit()) {
      int length = frames.getInt(at + 8);
      int attributes = frames.getShort(at + 24) & 0xFFFF;
      int count = frames.getInt(at + 28);
      if (length <= 0) break;
      if ((attributes & 0x20) == 0 && count > 0) return (double) length / count;
      at += length;
    }
    return null;
  }

  /** Every partition of {@code topics}. */
  List<TopicPartition> partitionsOf(Collection<String> names) {
    List<TopicPartition> out = new ArrayList<>();
    for (String t : names) {
      for (PartitionMeta p : topic(t, false).partitions) out.add(new TopicPartition(t, p.partition));
    }
    return out;
  }

  /** Gives this object's connections back to the JVM's pool (DataConnection.giveBack). */
  @Override
  public void close() {
    for (DataConnection c : connections.values()) DataConnection.giveBack(c);
    connections.clear();
    for (DataConnection c : extra) DataConnection.giveBack(c);
    extra.clear();
  }
}
