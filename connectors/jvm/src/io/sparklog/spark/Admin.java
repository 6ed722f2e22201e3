package io.sparklog.spark;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.channels.Channels;
import java.util.List;
import java.util.concurrent.TimeUnit;

import org.apache.arrow.vector.ipc.WriteChannel;
import org.apache.arrow.vector.ipc.message.MessageSerializer;
import org.apache.arrow.vector.types.pojo.Schema;
import org.sparkproject.connect.grpc.ManagedChannel;

/** The two admin calls the JVM sink makes (createTopic=true, and the first write to a typed
 *  topic without a schema): Admin.CreateTopic and Admin.RegisterSchema on a bootstrap broker's
 *  gRPC listener (spark_log/proto/broker.proto), as the Python sink makes them
 *  (connectors/client.py create_typed_topic / register_schema). */
final class Admin {
  private Admin() {}

  static final int TOPIC_ALREADY_EXISTS = 5;
  private static final String SERVICE = "spark_log.broker.v1.Admin/";

  interface Call { byte[] on(org.sparkproject.connect.grpc.Channel channel) throws IOException; }

  /** {@code call} on the first bootstrap broker that answers (typed errors are not retried). */
  static byte[] onBootstrap(String bootstrap, Security security, Call call) {
    SparkLogException last = null;
    for (String address : bootstrap.split(",")) {
      ManagedChannel channel = null;
      try {
        channel = Grpc.channel(address.trim(), security);
        return call.on(Grpc.authenticated(channel, security));
      } catch (SparkLogException e) {
        if (e.code != ErrorCodes.BROKER_NOT_AVAILABLE) throw e;
        last = e;
      } catch (IOException e) {
        last = new SparkLogException("BrokerNotAvailableError", ErrorCodes.BROKER_NOT_AVAILABLE, address + ": " + e);
      } finally {
        if (channel != null) {
          channel.shutdownNow();
          try {
            channel.awaitTermination(5, TimeUnit.SECONDS);
          } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
          }
        }
      }
    }
    throw last != null ? last : new SparkLogException("BrokerNotAvailableError", ErrorCodes.BROKER_NOT_AVAILABLE, "no bootstrap");
  }

  /** A typed topic without a schema; one that another writer created first is fine. */
  static void createTypedTopic(String bootstrap, Security security, String topic, int partitions, int replicationFactor,
                               List<String> keyColumns) {
    createTypedTopic(bootstrap, security, topic, partitions, replicationFactor, keyColumns, java.util.Collections.emptyMap());
  }

  /** As above, with topic settings (tombstoneColumn: cleanup.policy=compact and tombstone.column). */
  static void createTypedTopic(String bootstrap, Security security, String topic, int partitions, int replicationFactor,
                               List<String> keyColumns, java.util.Map<String, String> config) {
    Grpc.Proto req = new Grpc.Proto().str(1, topic).i64(2, partitions).i64(3, replicationFactor);
    for (java.util.Map.Entry<String, String> e : new java.util.TreeMap<>(config).entrySet()) {
      req.bytes(4, new Grpc.Proto().str(1, e.getKey()).str(2, e.getValue()).bytes());
    }
    if (keyColumns != null) for (String k : keyColumns) req.str(6, k);
    req.str(8, "typed");
    byte[] body = req.bytes();
    try {
      onBootstrap(bootstrap, security, channel -> Grpc.unary(channel, SERVICE + "CreateTopic", body));
    } catch (SparkLogException e) {
      if (e.code != TOPIC_ALREADY_EXISTS) throw e;
    }
  }

  /** The topic's settings (Admin.DescribeTopic's configs) as the brokers describe them. */
  static java.util.Map<String, String> topicConfig(String bootstrap, Security security, String topic) {
    byte[] answer = onBootstrap(bootstrap, security, channel -> Grpc.unary(channel, SERVICE + "DescribeTopic",
        new Grpc.Proto().str(1, topic).bytes()));
    java.util.Map<String, String> out = new java.util.TreeMap<>();
    try {
      for (Object[] f : Grpc.fields(answer)) {
        if ((int) f[0] != 5 || !(f[1] instanceof byte[])) continue;
        List<Object[]> entry = Grpc.fields((byte[]) f[1]);
        out.put(Grpc.string(entry, 1), Grpc.string(entry, 2));
      }
    } catch (IOException e) {
      throw new SparkLogException("SparkLogError", 1, "topic '" + topic + "': unreadable DescribeTopic answer: " + e);
    }
    return out;
  }

  /** Register {@code schema} as the topic's next schema (the latest again is a no-op). */
  static void registerSchema(String bootstrap, Security security, String topic, Schema schema) {
    ByteArrayOutputStream ipc = new ByteArrayOutputStream();
    try {
      MessageSerializer.serialize(new WriteChannel(MemoryChannels.writer(ipc)), schema);
    } catch (IOException e) {
      throw new IllegalStateException(e);
    }
    byte[] body = new Grpc.Proto().str(1, topic).bytes(2, ipc.toByteArray()).bytes();
    onBootstrap(bootstrap, security, channel -> Grpc.unary(channel, SERVICE + "RegisterSchema", body));
  }

  /** The topic's metadata once the data listener's broker knows it (within 30 s). */
  static Cluster.TopicMeta await(Cluster cluster, String topic) {
    long deadline = System.currentTimeMillis() + 30_000;
    while (true) {
      try {
        Cluster.TopicMeta meta = cluster.topic(topic, true);
        boolean led = !meta.partitions.isEmpty();
        for (Cluster.PartitionMeta p : meta.partitions) led &= p.leader >= 0;
        if (led || System.currentTimeMillis() > deadline) return meta;
      } catch (SparkLogException e) {
        if (e.code != ErrorCodes.UNKNOWN_TOPIC_OR_PARTITION || System.currentTimeMillis() > deadline) throw e;
      }
      Cluster.sleep(100);
    }
  }

  /** The topic's metadata once it shows a schema (within 30 s). */
  static Cluster.TopicMeta awaitSchema(Cluster cluster, String topic) {
    long deadline = System.currentTimeMillis() + 30_000;
    while (true) {
      Cluster.TopicMeta meta = cluster.topic(topic, true);
      if (meta.latest() != null || System.currentTimeMillis() > deadline) return meta;
      Cluster.sleep(100);
    }
  }
}
