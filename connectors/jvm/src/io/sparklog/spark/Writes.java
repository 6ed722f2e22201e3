package io.sparklog.spark;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.Serializable;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.Channels;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import java.util.UUID;
import java.util.zip.CRC32C;

import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.vector.FieldVector;
import org.apache.arrow.vector.TimeStampMilliVector;
import org.apache.arrow.vector.VarBinaryVector;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.VectorUnloader;
import org.apache.arrow.vector.compression.CompressionCodec;
import org.apache.arrow.vector.compression.CompressionUtil;
import org.apache.arrow.vector.compression.NoCompressionCodec;
import org.apache.arrow.vector.ipc.WriteChannel;
import org.apache.arrow.vector.ipc.message.ArrowRecordBatch;
import org.apache.arrow.vector.ipc.message.MessageSerializer;
import org.apache.arrow.vector.types.pojo.ArrowType;
import org.apache.arrow.vector.types.pojo.Field;
import org.apache.arrow.vector.types.pojo.Schema;
import org.apache.spark.TaskContext;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.write.BatchWrite;
import org.apache.spark.sql.connector.write.DataWriter;
import org.apache.spark.sql.connector.write.DataWriterFactory;
import org.apache.spark.sql.connector.write.LogicalWriteInfo;
import org.apache.spark.sql.connector.write.PhysicalWriteInfo;
import org.apache.spark.sql.connector.write.Write;
import org.apache.spark.sql.connector.write.WriteBuilder;
import org.apache.spark.sql.connector.write.WriterCommitMessage;
import org.apache.spark.sql.connector.write.streaming.StreamingDataWriterFactory;
import org.apache.spark.sql.connector.write.streaming.StreamingWrite;
import org.apache.spark.sql.execution.arrow.ArrowWriter;
import org.apache.spark.sql.execution.arrow.ArrowWriter$;
import org.apache.spark.sql.types.BinaryType;
import org.apache.spark.sql.types.ByteType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.IntegerType;
import org.apache.spark.sql.types.LongType;
import org.apache.spark.sql.types.ShortType;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.types.TimestampType;
import org.apache.spark.sql.util.ArrowUtils;

/** The sink: the exactly-once idempotent scheme of connectors/writer.py.  Each write task is an
 *  idempotent producer whose id and epoch come from (query id, Spark partition, batch id)
 *  (Identity.producer: the same function as writer.producer_identity), frames are cut
 *  deterministically (the task's rows in chunks of spark.sql.execution.arrow.maxRecordsPerBatch rows
 *  (default CHUNK_ROWS), read on the driver: as Spark's Arrow batches reach the
 *  Python sink; one frame per chunk and partition, sliced when larger than batchSize), and
 *  sequences run from 0 per partition in input order, so a re-run task's frames are
 *  acknowledged as duplicates by the brokers.  Rows without a key go to partition
 *  (spark partition + chunk index) % partitions. */
final class Writes {
  private Writes() {}

  static final int CHUNK_ROWS = 10_000;
  static final List<String> ROUTING = Arrays.asList("topic", "partition", "offset", "timestamp", "timestampType");

  static final class Builder implements WriteBuilder {
    private final LogicalWriteInfo info;

    Builder(LogicalWriteInfo info) { this.info = info; }

    @Override public Write build() {
      Target target = new Target(Options.parse(info.options(), Options.WRITER), info.schema());
      return new Write() {
        @Override public BatchWrite toBatch() { return new Sink(target, UUID.randomUUID().toString().replace("-", ""), false); }

        @Override public StreamingWrite toStreaming() { return new Sink(target, info.queryId(), true); }
      };
    }
  }

  /** What the driver resolved at start (connectors/writer.py resolve_target). */
  static final class Target implements Serializable {
    final String bootstrap, topic, kind, schemaJson;
    final int schemaId, partitions, acks, timeoutMs, codec;
    final long batchSize;
    final int keyOrdinal, valueOrdinal, partitionOrdinal, timestampOrdinal;
    /** Without the topic option: the string column naming each row's topic (bytes topics). */
    final int topicOrdinal;
    int headersOrdinal = -1;
    /** Typed topics whose DataFrame columns need casts (Casts): the schema the rows are written
     *  in before the cast (the topic's column names, the DataFrame's types); null: none. */
    String writeSchemaJson;
    final boolean keyIsString, valueIsString;
    final int[] dataOrdinals, keyOrdinals;
    final StructType input;
    final Security security;
    /** Rows per chunk: Spark's Arrow batch size, as the Python sink's batches are cut. */
    final int chunkRows;
    /** transactional=true: each micro-batch (batch write: the whole write) is one transaction. */
    final boolean transactional;
    final int transactionTimeoutMs;

    /** The session time zone, in which Spark hands the Python sink its timestamps (and so the
     *  text a timestamp key column hashes as, spark_log.partitioner.key_array). */
    final String keyZone = org.apache.spark.sql.internal.SQLConf.get().sessionLocalTimeZone();

    Target(Options o, StructType input) {
      this.input = input;
      this.security = o.security;
      int arrowBatch = org.apache.spark.sql.internal.SQLConf.get().arrowMaxRecordsPerBatch();
      this.chunkRows = arrowBatch > 0 ? arrowBatch : CHUNK_ROWS;
      this.transactional = o.bool("transactional", false);
      Long txnTimeout = o.longOpt("transactionTimeoutMs", 1);
      if (txnTimeout != null && !transactional) {
        throw SparkLogException.config("transactionTimeoutMs", "applies only with transactional=true");
      }
      this.transactionTimeoutMs = txnTimeout == null ? 600_000 : (int) Math.min(Integer.MAX_VALUE, txnTimeout);
      bootstrap = o.bootstrap();
      String named = o.get("topic");
      if (named != null && named.trim().isEmpty()) throw SparkLogException.config("topic", "must not be empty");
      topic = named == null ? null : named.trim();
      String tombstone = o.get("tombstoneColumn");
      if (tombstone != null && tombstone.trim().isEmpty()) throw SparkLogException.config("tombstoneColumn", "must name a column");
      tombstone = tombstone == null ? null : tombstone.trim();
      topicOrdinal = topic == null ? ordinal(input, "topic") : -1;
      if (topic == null) {
        if (topicOrdinal < 0) throw SparkLogException.config("topic", "is required unless the DataFrame has a 'topic' column");
        if (!(input.fields()[topicOrdinal].dataType() instanceof StringType)) {
          throw new SparkLogException("SchemaMismatchError", 14, "column 'topic' must be a string, got "
              + input.fields()[topicOrdinal].dataType().simpleString());
        }
        if (tombstone != null) throw SparkLogException.config("tombstoneColumn", "needs option 'topic' (a typed topic)");
      }
      String a = o.has("acks") ? o.get("acks").trim().toLowerCase(Locale.ROOT) : "all";
      if (a.equals("0")) throw SparkLogException.config("acks", "cannot be 0: the sink must know a write landed to be exactly-once");
      if (!a.equals("all") && !a.equals("-1") && !a.equals("1")) throw SparkLogException.config("acks", "must be all, -1 or 1, got '" + a + "'");
      acks = a.equals("1") ? 1 : -1;
      if (transactional && acks != -1) throw SparkLogException.config("transactional", "needs acks=all");
      String c = o.has("compression") ? o.get("compression").trim().toLowerCase(Locale.ROOT) : "lz4";
      switch (c) {
        case "lz4": codec = 1; break;
        case "zstd": codec = 2; break;
        case "none": case "uncompressed": codec = 0; break;
        default: throw SparkLogException.config("compression", "must be lz4, zstd or none, got '" + c + "'");
      }
      Long bs = o.longOpt("batchSize", 1);
      batchSize = bs == null ? 4L << 20 : bs;
      Long t = o.longOpt("timeoutMs", 1);
      timeoutMs = t == null ? 120_000 : (int) Math.min(Integer.MAX_VALUE, t);
      boolean create = o.bool("createTopic", false);
      if (create && topic == null) throw SparkLogException.config("createTopic", "needs option 'topic' (the topic to create)");
      if (!create && (o.has("partitions") || o.has("replicationFactor"))) {
        throw SparkLogException.config(o.has("partitions") ? "partitions" : "replicationFactor", "applies with createTopic=true only");
      }
      Long parts = o.longOpt("partitions", 1), rf = o.longOpt("replicationFactor", 1);
      if (topic == null) {  // rows name their topics: bytes topics, resolved by each task (connectors/writer.py)
        for (String n : new String[] {"keyColumns"}) {
          if (o.has(n) && !o.names(n).equals(List.of("key"))) {
            throw SparkLogException.config(n, "applies to typed topics; rows naming their topic write bytes topics, which "
                + "hash the 'key' column");
          }
        }
        kind = "bytes";
        partitions = 0;
        schemaId = 0;
        schemaJson = null;
        dataOrdinals = keyOrdinals = null;
        partitionOrdinal = partitionOrdinal(input);
        valueOrdinal = ordinal(input, "value");
        if (valueOrdinal < 0) {
          throw new SparkLogException("SchemaMismatchError", 14, "rows naming their topic are written to bytes topics (key, "
              + "value, headers, timestamp) and the DataFrame has no 'value' column (it has "
              + Arrays.asList(input.fieldNames()) + ")");
        }
        keyOrdinal = ordinal(input, "key");
        keyIsString = keyOrdinal >= 0 && binaryOrString(input, keyOrdinal, "key");
        valueIsString = binaryOrString(input, valueOrdinal, "value");
        headersOrdinal = ordinal(input, "headers");
        timestampOrdinal = timestampOrdinal(input);
        return;
      }
      Cluster cluster = new Cluster(bootstrap, security);
      Cluster.TopicMeta meta;
      try {
        try {
          meta = cluster.topic(topic, true);
        } catch (SparkLogException e) {
          if (e.code != ErrorCodes.UNKNOWN_TOPIC_OR_PARTITION) throw e;
          if (!create) {
            throw new SparkLogException("UnknownTopicOrPartitionError", e.code, "topic '" + topic + "' does not exist; create "
                + "it first (Admin.create_topic('" + topic + "', kind='typed') or `spark-log topics create " + topic
                + " --typed`: the first write sets its schema; or a bytes topic), or set option createTopic=true (with "
                + "partitions / replicationFactor) to create a typed topic from the DataFrame's schema");
          }
          // a typed topic without a schema (the first write below registers the DataFrame's), as the Python sink does
          Map<String, String> config = new TreeMap<>();
          if (tombstone != null) {
            config.put("cleanup.policy", "compact");
            config.put("tombstone.column", tombstone);
          }
          Admin.createTypedTopic(bootstrap, security, topic, parts == null ? 1 : parts.intValue(), rf == null ? 1 : rf.intValue(),
              o.names("keyColumns"), config);
          meta = Admin.await(cluster, topic);
        }
        if (meta.kind.equals("typed") && meta.latest() == null) {
          Schema data = dataSchema(input);
          Admin.registerSchema(bootstrap, security, topic, data);
          meta = Admin.awaitSchema(cluster, topic);
        }
      } finally {
        cluster.close();
      }
      kind = meta.kind;
      partitions = meta.partitions.size();
      partitionOrdinal = partitionOrdinal(input);
      List<String> names = Arrays.asList(input.fieldNames());
      if (kind.equals("bytes") && tombstone != null) {
        throw SparkLogException.config("tombstoneColumn", "applies to typed topics; '" + topic + "' is a bytes topic, whose "
            + "tombstones are rows with a null 'value'");
      }
      if (kind.equals("bytes")) {
        if (o.has("keyColumns") && !o.names("keyColumns").equals(List.of("key"))) {
          throw SparkLogException.config("keyColumns", "applies to typed topics; bytes topics hash the 'key' column");
        }
        valueOrdinal = ordinal(input, "value");
        if (valueOrdinal < 0) {
          throw new SparkLogException("SchemaMismatchError", 14, "topic '" + topic + "' is a bytes topic (key, value, headers, "
              + "timestamp) and the DataFrame has no 'value' column (it has " + names + ")");
        }
        keyOrdinal = ordinal(input, "key");
        keyIsString = keyOrdinal >= 0 && binaryOrString(input, keyOrdinal, "key");
        valueIsString = binaryOrString(input, valueOrdinal, "value");
        headersOrdinal = ordinal(input, "headers");
        checkHeaders(meta.schemas.get(0));
        timestampOrdinal = timestampOrdinal(input);
        Schema stored = meta.schemas.get(0);
        schemaId = 0;
        schemaJson = stored.toJson();
        dataOrdinals = null;
        keyOrdinals = null;
      } else {
        if (ordinal(input, "timestamp") >= 0) {  // as the Python sink (connectors/writer.py resolve_target)
          throw new SparkLogException("SchemaMismatchError", 14, "topic '" + topic + "' is a typed topic, whose frames "
              + "carry one timestamp each, and the sink cannot yet set record timestamps from the DataFrame's 'timestamp' "
              + "column (it would stamp the write time instead); drop the column (df.drop('timestamp')) to write with "
              + "the write time, or write to a bytes topic, which keeps it");
        }
        Schema schema = meta.latest();
        schemaId = meta.latestSchemaId();
        schemaJson = schema.toJson();
        List<String> data = new ArrayList<>();
        for (String n : names) if (!ROUTING.contains(n)) data.add(n);
        List<String> want = new ArrayList<>();
        for (Field f : schema.getFields()) want.add(f.getName());
        List<String> missing = new ArrayList<>(want), unknown = new ArrayList<>(data);
        missing.removeAll(data);
        unknown.removeAll(want);
        if (!missing.isEmpty() || !unknown.isEmpty()) {
          throw new SparkLogException("SchemaMismatchError", 14, "the DataFrame does not match topic '" + topic + "': missing "
              + "columns " + missing + ", unexpected " + unknown);
        }
        dataOrdinals = new int[want.size()];
        List<Field> written = new ArrayList<>();
        boolean casts = false;
        for (int i = 0; i < want.size(); i++) {
          Field f = schema.getFields().get(i);
          dataOrdinals[i] = ordinal(input, f.getName());
          DataType dt = input.fields()[dataOrdinals[i]].dataType();
          Field have = ArrowUtils.toArrowField(f.getName(), dt, true, "UTC", false, org.apache.spark.sql.types.Metadata.empty());
          if (!sameTypes(have, f)) {  // cast to the topic's type, as the Python sink does (Casts)
            String refusal = Casts.refusal(have, f, topic);
            if (refusal != null) throw new SparkLogException("SchemaMismatchError", 14, refusal);
            casts = true;
          }
          written.add(have);
        }
        writeSchemaJson = casts ? new Schema(written).toJson() : null;
        List<String> keys = o.names("keyColumns") != null ? o.names("keyColumns") : meta.keyColumns;
        keyOrdinals = new int[keys.size()];
        for (int i = 0; i < keys.size(); i++) {
          keyOrdinals[i] = ordinal(input, keys.get(i));
          if (keyOrdinals[i] < 0) throw SparkLogException.config("keyColumns", "names columns the DataFrame lacks: " + keys);
          checkKeyType(keys.get(i), input.fields()[keyOrdinals[i]].dataType());
        }
        keyOrdinal = valueOrdinal = timestampOrdinal = -1;
        keyIsString = valueIsString = false;
        if (tombstone != null) checkTombstoneColumn(tombstone, input);
      }
    }

    /** A key column hashes as the text pyarrow's cast to string gives (key_array): only the types
     *  the JVM reproduces exactly are taken; float/double are refused, as Java's decimal text of a
     *  binary float is not Arrow's in every case, and a different text routes the key to a different
     *  partition than the Python sink and the Producer (per-key order and compaction break). */
    private static void checkKeyType(String name, DataType t) {
      if (t instanceof org.apache.spark.sql.types.FloatType || t instanceof org.apache.spark.sql.types.DoubleType) {
        throw new SparkLogException("SchemaMismatchError", 14, "key column '" + name + "' is a " + t.simpleString()
            + ": the JVM sink cannot hash a floating-point key exactly as the Python sink and the Producer do (their key "
            + "is Arrow's text of the value), so its rows would land in other partitions; cast the key column to string "
            + "(df.withColumn('" + name + "', col('" + name + "').cast('string'))) or write with the Python sink (format "
            + "'spark-log')");
      }
      boolean ok = t instanceof BinaryType || t instanceof StringType || t instanceof org.apache.spark.sql.types.BooleanType
          || t instanceof ByteType || t instanceof ShortType || t instanceof IntegerType || t instanceof LongType
          || t instanceof org.apache.spark.sql.types.DecimalType || t instanceof org.apache.spark.sql.types.DateType
          || t instanceof TimestampType || t instanceof org.apache.spark.sql.types.TimestampNTZType;
      if (!ok) {
        throw new SparkLogException("SchemaMismatchError", 14, "key column '" + name + "' is a " + t.simpleString()
            + ", which has no key text; key columns are strings, binary, integers, booleans, decimals, dates or timestamps");
      }
    }

    /** tombstoneColumn: a boolean column of the DataFrame, the topic's tombstone.column
     *  (connectors/writer.py _check_tombstone_column). */
    private void checkTombstoneColumn(String column, StructType input) {
      int at = ordinal(input, column);
      if (at < 0 || !(input.fields()[at].dataType() instanceof org.apache.spark.sql.types.BooleanType)) {
        String found = at < 0 ? "missing" : "of type " + input.fields()[at].dataType().simpleString();
        throw SparkLogException.config("tombstoneColumn", "names '" + column + "', which must be a boolean column of the "
            + "DataFrame (" + found + ")");
      }
      String now = Admin.topicConfig(bootstrap, security, topic).getOrDefault("tombstone.column", "");
      if (!now.equals(column)) {
        throw SparkLogException.config("tombstoneColumn", "is '" + column + "' but topic '" + topic + "' marks tombstones with "
            + (now.isEmpty() ? "none" : "'" + now + "'") + "; set the topic's setting first: Admin.alter_configs('" + topic
            + "', set={'tombstone.column': '" + column + "'})");
      }
    }

    /** A headers column must have the bytes topics' headers type (checked against {@code stored}). */
    void checkHeaders(Schema stored) {
      if (headersOrdinal < 0) return;
      DataType ht = input.fields()[headersOrdinal].dataType();
      Field have = ArrowUtils.toArrowField("headers", ht, true, "UTC", false, org.apache.spark.sql.types.Metadata.empty());
      Field want = stored.getFields().stream().filter(f -> f.getName().equals("headers")).findFirst().orElse(null);
      if (want == null || !sameTypes(have, want)) {
        throw new SparkLogException("SchemaMismatchError", 14, "column 'headers' must be array<struct<key: string, "
            + "value: binary>>, got " + ht.simpleString());
      }
    }

    private static int partitionOrdinal(StructType input) {
      int at = ordinal(input, "partition");
      if (at >= 0) {
        DataType pt = input.fields()[at].dataType();
        if (!(pt instanceof IntegerType) && !(pt instanceof LongType)) {
          throw new SparkLogException("SchemaMismatchError", 14, "column 'partition' must be an integer, got " + pt.simpleString());
        }
      }
      return at;
    }

    private static int timestampOrdinal(StructType input) {
      int at = ordinal(input, "timestamp");
      DataType t = at >= 0 ? input.fields()[at].dataType() : null;
      if (at >= 0 && !(t instanceof TimestampType) && !(t instanceof LongType) && !(t instanceof IntegerType)
          && !(t instanceof ShortType) && !(t instanceof ByteType)) {
        throw new SparkLogException("SchemaMismatchError", 14, "column 'timestamp' must be a timestamp or integer ms, got "
            + t.simpleString());
      }
      return at;
    }

    /** The DataFrame's data columns (without the routing ones) as Arrow, as the Python sink
     *  registers them (pyspark's to_arrow_schema with UTC: ArrowUtils.toArrowSchema). */
    private static Schema dataSchema(StructType input) {
      StructType data = new StructType();
      for (StructField f : input.fields()) if (!ROUTING.contains(f.name())) data = data.add(f);
      return ArrowUtils.toArrowSchema(data, "UTC", true, false);
    }

    /** Same Arrow types and child names all the way down (nullability aside). */
    private static boolean sameTypes(Field a, Field b) {
      if (!a.getType().equals(b.getType()) || a.getChildren().size() != b.getChildren().size()) return false;
      for (int i = 0; i < a.getChildren().size(); i++) {
        Field x = a.getChildren().get(i), y = b.getChildren().get(i);
        if (!(a.getType() instanceof ArrowType.List) && !x.getName().equals(y.getName())) return false;
        if (!sameTypes(x, y)) return false;
      }
      return true;
    }

    private static int ordinal(StructType s, String name) {
      String[] names = s.fieldNames();
      for (int i = 0; i < names.length; i++) if (names[i].equals(name)) return i;
      return -1;
    }

    private static boolean binaryOrString(StructType s, int i, String name) {
      DataType t = s.fields()[i].dataType();
      if (t instanceof StringType) return true;
      if (t instanceof BinaryType) return false;
      throw new SparkLogException("SchemaMismatchError", 14, "column '" + name + "' must be binary or string, got " + t.simpleString());
    }
  }

  static final class Commit implements WriterCommitMessage {
    final int sparkPartition;
    final long rows, frames, producerId;
    final int producerEpoch;
    /** Transactional writes: the transaction the task joined ("" for none), and whether it did. */
    String transactionalId = "", run = "";
    long label;
    boolean joined;

    Commit(int sparkPartition, long rows, long frames, long producerId, int producerEpoch) {
      this.sparkPartition = sparkPartition; this.rows = rows; this.frames = frames; this.producerId = producerId;
      this.producerEpoch = producerEpoch;
    }
  }

  /** The transaction a task writes in (connectors/writer.py: transactional_id_of(query id) and the
   *  batch id for streams, spark-job-<id> and 0 for a batch write; the run names the writer). */
  static final class Transaction implements java.io.Serializable {
    final String transactionalId, run;
    final long label;

    Transaction(String transactionalId, long label, String run) {
      this.transactionalId = transactionalId; this.label = label; this.run = run;
    }
  }

  /** The driver's end of a transactional write: commit (or abort) with the joined participants.
   *  {@code own} is the transaction as the driver names it: an abort after failed tasks (which
   *  send no message) still ends it, aborting every participant that joined. */
  static void endTransaction(Target target, Transaction own, WriterCommitMessage[] messages, boolean commit) {
    if (!target.transactional) return;
    String transactionalId = own.transactionalId, run = own.run;
    long label = own.label;
    List<Long> participants = new ArrayList<>();
    for (WriterCommitMessage m : messages) {
      if (!(m instanceof Commit) || ((Commit) m).transactionalId.isEmpty()) continue;
      Commit c = (Commit) m;
      transactionalId = c.transactionalId;
      run = c.run;
      label = c.label;
      if (c.joined) participants.add(c.producerId);
    }
    if (commit) CrashPoints.reach("before-commit");
    Txn.end(target.bootstrap, target.security, transactionalId, label, run, commit, participants, target.timeoutMs);
    if (commit) CrashPoints.reach("during-commit");
  }

  static final class Sink implements BatchWrite, StreamingWrite {
    private final Target target;
    private final String id;
    private final boolean streaming;
    /** This writer instance (one per query run): a newer run aborts an older one's open batch. */
    private final String run = UUID.randomUUID().toString().replace("-", "");

    Sink(Target target, String id, boolean streaming) { this.target = target; this.id = id; this.streaming = streaming; }

    @Override public DataWriterFactory createBatchWriterFactory(PhysicalWriteInfo info) { return new Factory(target, id, run); }

    @Override public StreamingDataWriterFactory createStreamingWriterFactory(PhysicalWriteInfo info) {
      return new Factory(target, id, run);
    }

    @Override public boolean useCommitCoordinator() { return false; }

    private Transaction batchTransaction() { return new Transaction("spark-job-" + id, 0, id); }

    private Transaction streamTransaction(long epochId) {
      String query = org.apache.spark.SparkContext.getOrCreate().getLocalProperty("sql.streaming.queryId");
      String batch = org.apache.spark.SparkContext.getOrCreate().getLocalProperty("streaming.sql.batchId");
      return new Transaction("spark-sink-" + (query != null ? query : id), batch != null ? Long.parseLong(batch) : epochId, run);
    }

    @Override public void commit(WriterCommitMessage[] messages) { endTransaction(target, batchTransaction(), messages, true); }

    @Override public void abort(WriterCommitMessage[] messages) { endTransaction(target, batchTransaction(), messages, false); }

    @Override public void commit(long epochId, WriterCommitMessage[] messages) {
      endTransaction(target, streamTransaction(epochId), messages, true);
    }

    @Override public void abort(long epochId, WriterCommitMessage[] messages) {
      endTransaction(target, streamTransaction(epochId), messages, false);
    }
  }

  static final class Factory implements DataWriterFactory, StreamingDataWriterFactory {
    private final Target target;
    private final String id, run;

    Factory(Target target, String id, String run) { this.target = target; this.id = id; this.run = run; }

    @Override public DataWriter<InternalRow> createWriter(int partitionId, long taskId) {
      long[] identity = Identity.producer(id, partitionId, 0);
      Transaction txn = target.transactional ? new Transaction("spark-job-" + id, 0, id) : null;
      return new TaskWriter(target, partitionId, identity[0], (int) identity[1], txn);
    }

    @Override public DataWriter<InternalRow> createWriter(int partitionId, long taskId, long epochId) {
      TaskContext ctx = TaskContext.get();
      String query = ctx != null ? ctx.getLocalProperty("sql.streaming.queryId") : null;
      String batch = ctx != null ? ctx.getLocalProperty("streaming.sql.batchId") : null;
      long batchId = batch != null ? Long.parseLong(batch) : epochId;
      long[] identity = Identity.producer(query != null ? query : id, partitionId, batchId);
      Transaction txn = target.transactional ? new Transaction("spark-sink-" + (query != null ? query : id), batchId, run) : null;
      return new TaskWriter(target, partitionId, identity[0], (int) identity[1], txn);
    }
  }

  /** One partition's rows of the current chunk. */
  private static final class Pending {
    final VectorSchemaRoot root;
    final ArrowWriter writer;  // typed topics
    final org.apache.spark.sql.execution.arrow.ArrowFieldWriter headers;  // bytes topics written with a headers column
    int rows;
    long firstTs = Long.MIN_VALUE, maxTs = Long.MIN_VALUE;

    Pending(VectorSchemaRoot root, boolean typed, boolean withHeaders) {
      this.root = root;
      this.writer = typed ? ArrowWriter.create(root) : null;
      if (!typed) {
        for (FieldVector v : root.getFieldVectors()) v.allocateNew();
      }
      this.headers = !typed && withHeaders ? ArrowWriter$.MODULE$.createFieldWriter(root.getVector("headers")) : null;
    }
  }

  static final class TaskWriter implements DataWriter<InternalRow> {
    private final Target target;
    private final int sparkPartition;
    private long producerId;
    private int producerEpoch;
    private final Transaction txn;
    private boolean joined, alreadyCommitted;
    private final java.util.Set<TopicPartition> added = new java.util.HashSet<>();
    /** Each written topic's schema and partition count (one topic unless rows name theirs). */
    private final Map<String, Schema> schemas = new HashMap<>();
    private final Map<String, Integer> partitionCounts = new HashMap<>();
    private final BufferAllocator allocator;
    private final Cluster cluster;
    private final CompressionCodec codec;
    /** The current chunk's rows by topic, then partition. */
    private final Map<String, Map<Integer, Pending>> pending = new TreeMap<>();
    private final Map<TopicPartition, Integer> sequences = new HashMap<>();
    private final MappedRow mapped;
    private final long now = System.currentTimeMillis();
    private long rows, frames, chunk;
    private int inChunk;
    private static final boolean PROFILE = System.getenv("SPARK_LOG_JVM_PROFILE") != null;
    private final long created = System.nanoTime();
    private long encodeNanos, sendNanos, sentBytes;

    TaskWriter(Target target, int sparkPartition, long producerId, int producerEpoch, Transaction txn) {
      this.target = target;
      this.sparkPartition = sparkPartition;
      this.producerId = producerId;
      this.producerEpoch = producerEpoch;
      this.txn = txn;
      if (target.topic != null) {
        try {
          schemas.put(target.topic, Schema.fromJSON(target.schemaJson));
        } catch (IOException e) {
          throw new RuntimeException(e);
        }
        partitionCounts.put(target.topic, target.partitions);
      }
      this.allocator = ArrowUtils.rootAllocator().newChildAllocator("spark-log writer " + sparkPartition, 0, Long.MAX_VALUE);
      this.cluster = new Cluster(target.bootstrap, target.security);
      this.codec = target.codec == 0 ? NoCompressionCodec.INSTANCE
          : Lz4Codecs.INSTANCE.createCodec(target.codec == 1 ? CompressionUtil.CodecType.LZ4_FRAME : CompressionUtil.CodecType.ZSTD);
      this.mapped = target.dataOrdinals != null ? new MappedRow(target.dataOrdinals) : null;
      try {
        this.writeSchema = target.writeSchemaJson == null ? null : Schema.fromJSON(target.writeSchemaJson);
      } catch (IOException e) {
        throw new RuntimeException(e);
      }
    }

    /** Typed topics written with casts: the rows' schema before the cast (Target.writeSchemaJson). */
    private final Schema writeSchema;

    /** Rows naming their topic: the topic's schema and partitions, from metadata once per task
     *  (a bytes topic; a typed one is refused: such rows carry key, value, headers, timestamp). */
    private String topicOf(InternalRow row) {
      if (target.topic != null) return target.topic;
      if (row.isNullAt(target.topicOrdinal)) {
        throw SparkLogException.config("topic", "is not set and column 'topic' is null in some rows");
      }
      String topic = row.getUTF8String(target.topicOrdinal).toString();
      if (!schemas.containsKey(topic)) {
        Cluster.TopicMeta meta = cluster.topic(topic, true);
        if (!meta.kind.equals("bytes")) {
          throw new SparkLogException("SchemaMismatchError", 14, "column 'topic' names '" + topic + "', a " + meta.kind
              + " topic; rows naming their topic are written to bytes topics (key, value, headers, timestamp): write a "
              + "typed topic with option 'topic'");
        }
        Schema stored = meta.schemas.get(0);
        target.checkHeaders(stored);
        schemas.put(topic, stored);
        partitionCounts.put(topic, meta.partitions.size());
      }
      return topic;
    }

    private int route(InternalRow row, int n) {
      if (target.partitionOrdinal >= 0 && !row.isNullAt(target.partitionOrdinal)) {
        long given = target.input.fields()[target.partitionOrdinal].dataType() instanceof LongType
            ? row.getLong(target.partitionOrdinal) : row.getInt(target.partitionOrdinal);
        if (given < 0 || given >= n) {
          throw new SparkLogException("InvalidConfigError", 3, "column 'partition' holds " + given
              + ", but the topic has partitions 0 to " + (n - 1));
        }
        return (int) given;
      }
      byte[] key = null;
      if (target.kind.equals("bytes")) {
        if (target.keyOrdinal >= 0 && !row.isNullAt(target.keyOrdinal)) {
          key = target.keyIsString ? row.getUTF8String(target.keyOrdinal).getBytes() : row.getBinary(target.keyOrdinal);
        }
      } else if (target.keyOrdinals.length > 0) {
        boolean present = false;
        ByteArrayOutputStream joined = new ByteArrayOutputStream();
        for (int i = 0; i < target.keyOrdinals.length; i++) {
          int k = target.keyOrdinals[i];
          if (i > 0) joined.write(0x1f);
          if (row.isNullAt(k)) continue;
          present = true;
          byte[] b = keyBytes(row, k, target.input.fields()[k].dataType(), target.keyZone);
          joined.write(b, 0, b.length);
        }
        if (present) key = joined.toByteArray();
      }
      if (key != null) return (Identity.murmur2(key) & 0x7fffffff) % n;
      return (int) ((sparkPartition + chunk) % n);
    }

    /** A key column's bytes: exactly pyarrow's cast to string of the column as Spark hands it to the
     *  Python sink (spark_log.partitioner.key_array; timestamps in microseconds, session time zone). */
    static byte[] keyBytes(InternalRow row, int k, DataType t, String zone) {
      if (t instanceof BinaryType) return row.getBinary(k);
      if (t instanceof StringType) return row.getUTF8String(k).getBytes();
      String text;
      if (t instanceof org.apache.spark.sql.types.BooleanType) text = row.getBoolean(k) ? "true" : "false";
      else if (t instanceof ByteType) text = Byte.toString(row.getByte(k));
      else if (t instanceof ShortType) text = Short.toString(row.getShort(k));
      else if (t instanceof IntegerType) text = Integer.toString(row.getInt(k));
      else if (t instanceof LongType) text = Long.toString(row.getLong(k));
      else if (t instanceof org.apache.spark.sql.types.DecimalType) {
        org.apache.spark.sql.types.DecimalType d = (org.apache.spark.sql.types.DecimalType) t;
        text = row.getDecimal(k, d.precision(), d.scale()).toJavaBigDecimal().setScale(d.scale()).toString();
      } else if (t instanceof org.apache.spark.sql.types.DateType) text = dateText(java.time.LocalDate.ofEpochDay(row.getInt(k)));
      else if (t instanceof TimestampType) text = timestampText(row.getLong(k), zone);
      else if (t instanceof org.apache.spark.sql.types.TimestampNTZType) text = timestampText(row.getLong(k), null);
      else throw new SparkLogException("SchemaMismatchError", 14, "a key column is a " + t.simpleString());
      return text.getBytes(StandardCharsets.UTF_8);
    }

    private static String year(int y) {
      String digits = Integer.toString(Math.abs(y));
      while (digits.length() < 4) digits = "0" + digits;
      return y < 0 ? "-" + digits : digits;
    }

    private static String two(int v) { return v < 10 ? "0" + v : Integer.toString(v); }

    /** Arrow's date32 text: YYYY-MM-DD (at least four year digits). */
    static String dateText(java.time.LocalDate d) {
      return year(d.getYear()) + "-" + two(d.getMonthValue()) + "-" + two(d.getDayOfMonth());
    }

    /** Arrow's timestamp[us] text: "YYYY-MM-DD HH:MM:SS.ffffff", then "Z" for the zone "UTC",
     *  the offset as +HHMM for any other zone, nothing without one (TIMESTAMP_NTZ). */
    static String timestampText(long micros, String zone) {
      long seconds = Math.floorDiv(micros, 1_000_000L);
      int fraction = (int) Math.floorMod(micros, 1_000_000L);
      java.time.LocalDateTime local;
      String suffix;
      if (zone == null) {
        local = java.time.LocalDateTime.ofEpochSecond(seconds, 0, java.time.ZoneOffset.UTC);
        suffix = "";
      } else {
        java.time.ZonedDateTime at = java.time.Instant.ofEpochSecond(seconds).atZone(java.time.ZoneId.of(zone));
        local = at.toLocalDateTime();
        if (zone.equals("UTC")) {
          suffix = "Z";
        } else {
          int offset = at.getOffset().getTotalSeconds();
          int abs = Math.abs(offset);
          suffix = (offset < 0 ? "-" : "+") + two(abs / 3600) + two(abs % 3600 / 60);
        }
      }
      String f = Integer.toString(fraction);
      while (f.length() < 6) f = "0" + f;
      return dateText(local.toLocalDate()) + " " + two(local.getHour()) + ":" + two(local.getMinute()) + ":"
          + two(local.getSecond()) + "." + f + suffix;
    }

    /** A bytes topic's 'timestamp' column as epoch ms: a timestamp (Spark's microseconds, floored)
     *  or an integer taken as milliseconds, as the Python sink takes both. */
    private static long millis(InternalRow row, int at, DataType type) {
      if (type instanceof TimestampType) return Math.floorDiv(row.getLong(at), 1000);
      if (type instanceof LongType) return row.getLong(at);
      if (type instanceof IntegerType) return row.getInt(at);
      if (type instanceof ShortType) return row.getShort(at);
      return row.getByte(at);
    }

    @Override
    public void write(InternalRow row) throws IOException {
      if (txn != null && !joined) {
        join();
      }
      if (alreadyCommitted) return;  // this batch's transaction committed before: write nothing
      String topic = topicOf(row);
      int p = route(row, partitionCounts.get(topic));
      Pending buf = pending.computeIfAbsent(topic, t -> new TreeMap<>()).computeIfAbsent(p,
          k -> new Pending(VectorSchemaRoot.create(writeSchema != null ? writeSchema : schemas.get(topic), allocator),
              mapped != null, target.headersOrdinal >= 0));
      int i = buf.rows;
      if (mapped != null) {
        buf.writer.write(mapped.of(row));
        if (buf.firstTs == Long.MIN_VALUE) buf.firstTs = buf.maxTs = now;
      } else {
        VarBinaryVector key = (VarBinaryVector) buf.root.getVector("key");
        VarBinaryVector value = (VarBinaryVector) buf.root.getVector("value");
        TimeStampMilliVector ts = (TimeStampMilliVector) buf.root.getVector("timestamp");
        if (target.keyOrdinal < 0 || row.isNullAt(target.keyOrdinal)) key.setNull(i);
        else key.setSafe(i, target.keyIsString ? row.getUTF8String(target.keyOrdinal).getBytes() : row.getBinary(target.keyOrdinal));
        if (row.isNullAt(target.valueOrdinal)) value.setNull(i);
        else value.setSafe(i, target.valueIsString ? row.getUTF8String(target.valueOrdinal).getBytes() : row.getBinary(target.valueOrdinal));
        long millis = target.timestampOrdinal >= 0 && !row.isNullAt(target.timestampOrdinal)
            ? millis(row, target.timestampOrdinal, target.input.fields()[target.timestampOrdinal].dataType()) : now;
        ts.setSafe(i, millis);
        if (buf.headers != null) buf.headers.write(row, target.headersOrdinal);
        else buf.root.getVector("headers").setNull(i);
        if (buf.firstTs == Long.MIN_VALUE) buf.firstTs = millis;
        buf.maxTs = Math.max(buf.maxTs, millis);
      }
      buf.rows++;
      rows++;
      if (++inChunk == target.chunkRows) flush();
    }

    private void flush() throws IOException {
      for (Map.Entry<String, Map<Integer, Pending>> byTopic : pending.entrySet()) {
        String topic = byTopic.getKey();
        Map<Integer, List<byte[]>> framesByPartition = new TreeMap<>();
        for (Map.Entry<Integer, Pending> e : byTopic.getValue().entrySet()) {
          Pending buf = e.getValue();
          if (buf.writer != null) {
            buf.writer.finish();
          } else {
            if (buf.headers != null) buf.headers.finish();
            for (FieldVector v : buf.root.getFieldVectors()) v.setValueCount(buf.rows);
            buf.root.setRowCount(buf.rows);
          }
          long t0 = System.nanoTime();
          framesByPartition.put(e.getKey(), encode(topic, e.getKey(), buf));
          encodeNanos += System.nanoTime() - t0;
          buf.root.close();
        }
        byTopic.getValue().clear();
        long t1 = System.nanoTime();
        send(topic, framesByPartition);
        sendNanos += System.nanoTime() - t1;
      }
      pending.clear();
      inChunk = 0;
      chunk++;
    }

    private List<byte[]> encode(String topic, int partition, Pending buf) throws IOException {
      VectorSchemaRoot root = writeSchema == null ? buf.root : Casts.apply(buf.root, schemas.get(topic), allocator, topic);
      try {
        long size = 0;
        for (FieldVector v : root.getFieldVectors()) size += v.getBufferSize();
        int pieces = (int) Math.max(1, Math.min(buf.rows, (size + target.batchSize - 1) / target.batchSize));
        int per = (buf.rows + pieces - 1) / pieces;
        List<byte[]> out = new ArrayList<>();
        for (int start = 0; start < buf.rows; start += per) {
          int n = Math.min(per, buf.rows - start);
          VectorSchemaRoot piece = pieces == 1 ? root : root.slice(start, n);
          try {
            out.add(frame(new TopicPartition(topic, partition), piece, n, buf.firstTs, buf.maxTs));
          } finally {
            if (piece != root) piece.close();
          }
        }
        return out;
      } finally {
        if (root != buf.root) root.close();
      }
    }

    /** Join the task's transaction as a participant with a fresh producer id (or learn that
     *  its batch committed before); sequences start from 0 under the new id. */
    private void join() {
      long[] got = Txn.join(target.bootstrap, target.security, txn.transactionalId, txn.label, txn.run,
          target.transactionTimeoutMs);
      joined = true;
      if (got == null) {
        alreadyCommitted = true;
        return;
      }
      producerId = got[0];
      producerEpoch = (int) got[1];
      sequences.clear();
    }

    private byte[] frame(TopicPartition partition, VectorSchemaRoot root, int count, long firstTs, long maxTs) throws IOException {
      ByteArrayOutputStream body = new ByteArrayOutputStream();
      body.write(new byte[64]);
      try (ArrowRecordBatch batch = new VectorUnloader(root, true, codec, true).getRecordBatch()) {
        MessageSerializer.serialize(new WriteChannel(MemoryChannels.writer(body)), batch);
      }
      byte[] frame = body.toByteArray();
      int sequence = sequences.getOrDefault(partition, 0);
      sequences.put(partition, sequence + count);
      ByteBuffer h = ByteBuffer.wrap(frame).order(ByteOrder.LITTLE_ENDIAN);
      h.putLong(0, 0L).putInt(8, frame.length).putInt(12, -1);
      h.put(16, (byte) 'S').put(17, (byte) 'L').put(18, (byte) 1).put(19, (byte) 0);
      h.putShort(24, (short) (target.codec | (txn != null ? 0x10 : 0))).putShort(26, (short) producerEpoch).putInt(28, count);
      h.putLong(32, firstTs).putLong(40, maxTs).putLong(48, producerId).putInt(56, sequence).putInt(60, target.schemaId);
      CRC32C crc = new CRC32C();
      crc.update(frame, 24, frame.length - 24);
      h.putInt(20, (int) crc.getValue());
      frames++;
      return frame;
    }

    private void send(String topic, Map<Integer, List<byte[]>> byPartition) {
      Map<Integer, List<byte[]>> todo = new TreeMap<>(byPartition);
      long deadline = System.currentTimeMillis() + target.timeoutMs;
      boolean refresh = false;
      long backoff = 50;
      while (!todo.isEmpty()) {
        Map<Integer, List<Integer>> byLeader = new TreeMap<>();
        for (int p : todo.keySet()) byLeader.computeIfAbsent(cluster.leader(topic, p, refresh), k -> new ArrayList<>()).add(p);
        refresh = false;
        SparkLogException last = null;
        Map<Integer, List<byte[]>> again = new TreeMap<>();
        for (Map.Entry<Integer, List<Integer>> e : byLeader.entrySet()) {
          Buf req = new Buf();
          if (txn != null) {
            req.str(txn.transactionalId);
            for (int p : e.getValue()) {
              if (added.add(new TopicPartition(topic, p))) {
                Txn.addPartition(target.bootstrap, target.security, txn.transactionalId, producerId, producerEpoch,
                    topic, p);
              }
            }
          }
          req.i16(target.acks).i32(target.timeoutMs).i32(e.getValue().size());
          for (int p : e.getValue()) {
            int size = 0;
            for (byte[] f : todo.get(p)) size += f.length;
            sentBytes += size;
            req.str(topic).i32(p).i32(-1).i32(size);
            for (byte[] f : todo.get(p)) req.raw(f);
          }
          ByteBuffer r;
          try {
            if (e.getKey() < 0) throw new SparkLogException("NotLeaderError", ErrorCodes.NOT_LEADER, "no leader");
            DataConnection c = cluster.connection(e.getKey());
            try {
              r = c.call(txn != null ? DataConnection.PRODUCE_TXN : DataConnection.PRODUCE, req);
            } catch (IOException io) {
              throw new SparkLogException("BrokerNotAvailableError", ErrorCodes.BROKER_NOT_AVAILABLE, io.toString());
            }
          } catch (SparkLogException err) {
            if (!err.retriable()) throw err;
            for (int p : e.getValue()) again.put(p, todo.get(p));
            last = err;
            continue;
          }
          for (int n = r.getInt(); n > 0; n--) {
            Buf.str(r);
            int p = r.getInt();
            short code = r.getShort();
            String message = Buf.str(r);
            r.getLong();
            r.getLong();
            r.get();
            if (code == 0) continue;
            SparkLogException err = SparkLogException.of(code, topic + "-" + p + ": " + message);
            if (!err.retriable()) throw err;
            again.put(p, todo.get(p));
            last = err;
          }
        }
        todo = again;
        if (!todo.isEmpty()) {
          if (System.currentTimeMillis() > deadline) throw last;
          refresh = true;
          Cluster.sleep(backoff);
          backoff = Math.min(1000, backoff * 2);
        }
      }
    }

    @Override
    public WriterCommitMessage commit() throws IOException {
      if (txn != null && !joined) join();
      if (!pending.isEmpty()) flush();
      Commit c = new Commit(sparkPartition, rows, frames, producerId, producerEpoch);
      if (txn != null) {
        c.transactionalId = txn.transactionalId;
        c.run = txn.run;
        c.label = txn.label;
        c.joined = !alreadyCommitted;
      }
      return c;
    }

    @Override public void abort() {}

    @Override
    public void close() {
      if (PROFILE) {
        System.err.printf("spark-log profile writer %d: task %.1f ms, %d rows, %d frames, encode %.1f ms, send %.1f ms (%d bytes)%n",
            sparkPartition, (System.nanoTime() - created) / 1e6, rows, frames, encodeNanos / 1e6, sendNanos / 1e6, sentBytes);
      }
      for (Map<Integer, Pending> byTopic : pending.values()) for (Pending p : byTopic.values()) p.root.close();
      pending.clear();
      cluster.close();
      allocator.close();
    }
  }
}
