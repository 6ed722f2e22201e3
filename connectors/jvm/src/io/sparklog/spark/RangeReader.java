package io.sparklog.spark;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.zip.CRC32C;

import org.apache.arrow.flatbuf.MessageHeader;
import org.apache.arrow.memory.ArrowBuf;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.vector.FieldVector;
import org.apache.arrow.vector.VectorLoader;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.ipc.ReadChannel;
import org.apache.arrow.vector.ipc.message.ArrowRecordBatch;
import org.apache.arrow.vector.ipc.message.MessageMetadataResult;
import org.apache.arrow.vector.ipc.message.MessageSerializer;
import org.apache.arrow.vector.types.pojo.Schema;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.execution.vectorized.ConstantColumnVector;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.ArrowUtils;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarBatch;
import org.apache.spark.unsafe.types.UTF8String;

/** One Spark task: the records [start, end) of one topic partition as ColumnarBatches, one per
 *  stored frame (below the brokers' local log start: per frame the brokers build from the
 *  topic's Delta tier, FETCH_TIER, so a tiered topic reads whole, as the Python source does): the frame's Arrow body is loaded by Arrow Java and handed to Spark as
 *  ArrowColumnVectors (no per-row conversion); topic/partition/timestampType are constant
 *  vectors, offset a computed one.  Frames are checked (magic, version, CRC-32C) as the Python
 *  consumer checks them; control frames and frames without records are passed over. */
final class RangeReader implements PartitionReader<ColumnarBatch> {
  private static final int MAX_BYTES = 16 << 20;
  /** A frame's attribute bit: the leader stamped its header with its append time (a
   *  LogAppendTime topic); its records' timestamp column keeps the producer's CreateTime. */
  static final int ATTR_LOG_APPEND_TIME = 0x40;
  private final ReadPlan plan;
  private final StructType schema;
  private final Scans.RangePartition part;
  private final Cluster cluster;
  private final BufferAllocator allocator;
  private final ArrayDeque<ColumnarBatch> ready = new ArrayDeque<>();
  private final List<VectorSchemaRoot> readyRoots = new ArrayList<>();
  private VectorSchemaRoot current;
  private ColumnarBatch batch;
  private long position;
  private final boolean failOnDataLoss;
  /** FETCH_TIER's answer: no more than this many TIER_UNAVAILABLE answers in a row are asked again. */
  private static final int TIER_RETRIES = 4;
  /** The position is below the brokers' local log start and is read from the Delta tier. */
  private boolean inTier;
  private long tierStart, tierEnd;  // what the tier held at the last FETCH_TIER answer
  private int tierRetries, unexplained;
  private String lastRetriable;
  private final long pollTimeoutMs;
  private final int timestampType;
  private final boolean typed;
  /** SPARK_LOG_JVM_PROFILE=1: each task prints where its time went (stderr of its JVM). */
  private static final boolean PROFILE = System.getenv("SPARK_LOG_JVM_PROFILE") != null;
  private final long created = System.nanoTime();
  private long fetchNanos, decodeNanos, fetchedBytes, crcNanos, loadNanos, copyNanos, loadCpuNanos;
  private static final java.lang.management.ThreadMXBean THREADS =
      PROFILE ? java.lang.management.ManagementFactory.getThreadMXBean() : null;  // JMX only when profiling
  private final long createdCpu = PROFILE ? THREADS.getCurrentThreadCpuTime() : 0;
  private int fetches;
  /** PROFILE: the reader's construction, when its first batch was handed to Spark, and the time
   *  Spark spent on the batches between next() calls (the row conversion and the sink). */
  private long ctorNanos, firstBatchAt, lastReturned, consumeNanos;

  /** The FETCH pushdown block (typed-column predicates the brokers evaluate), or null. */
  private final byte[] pushBlock;

  RangeReader(ReadPlan plan, StructType schema, Scans.RangePartition part) { this(plan, schema, part, null); }

  RangeReader(ReadPlan plan, StructType schema, Scans.RangePartition part, byte[] pushBlock) {
    this.pushBlock = pushBlock;
    this.plan = plan;
    this.schema = schema;
    this.part = part;
    this.cluster = new Cluster(plan.bootstrap, plan.options.security);
    cluster.seen(part.topic, part.partition, part.leaderEpoch);  // the driver's: no older leader for this task
    this.allocator = ArrowUtils.rootAllocator().newChildAllocator("spark-log " + part, 0, Long.MAX_VALUE);
    this.position = part.start;
    this.failOnDataLoss = plan.options.bool("failOnDataLoss", true);
    Long poll = plan.options.longOpt("pollTimeoutMs", 1);
    this.pollTimeoutMs = poll == null ? 120_000 : poll;
    this.timestampType = plan.timestampTypes.getOrDefault(part.topic, 0);
    this.typed = plan.kind.equals("typed");
    ctorNanos = System.nanoTime() - created;
  }

  @Override
  public boolean next() throws IOException {
    if (lastReturned != 0) consumeNanos += System.nanoTime() - lastReturned;
    release();
    long lastProgress = System.currentTimeMillis();
    while (ready.isEmpty()) {
      if (position >= part.end) return false;
      long before = position;
      try {
        fetch();
      } catch (SparkLogException e) {
        if (e.code != ErrorCodes.UNKNOWN_TOPIC_OR_PARTITION || cluster.allTopics().contains(part.topic)) throw e;
        // the topic was deleted after this range was planned: its records are lost (failOnDataLoss decides)
        if (failOnDataLoss) {
          throw new SparkLogException("OffsetOutOfRangeError", 11, "data loss: " + part.topic + "-" + part.partition
              + ": the topic was deleted before this query read [" + position + ", " + part.end
              + "). Set failOnDataLoss=false to skip them and go on.");
        }
        position = part.end;
        continue;
      }
      if (position > before || !ready.isEmpty()) {
        lastProgress = System.currentTimeMillis();
      } else if (System.currentTimeMillis() - lastProgress > pollTimeoutMs) {
        throw new SparkLogException("RequestTimeoutError", ErrorCodes.REQUEST_TIMEOUT, part.topic + "-" + part.partition
            + ": no records after offset " + position + " for " + pollTimeoutMs + " ms while reading up to " + part.end
            + " (pollTimeoutMs)" + (lastRetriable == null ? "" : "; the last retriable error: " + lastRetriable));
      }
    }
    batch = ready.poll();
    current = readyRoots.remove(0);
    if (PROFILE) {
      lastReturned = System.nanoTime();
      if (firstBatchAt == 0) firstBatchAt = lastReturned;
    }
    return true;
  }

  @Override public ColumnarBatch get() { return batch; }

  private void release() {
    if (batch != null) batch.close();  // closes the constant vectors; Arrow vectors are the root's
    batch = null;
    if (current != null) current.close();
    current = null;
  }

  /** One step of the read: a FETCH of the brokers' log, or, while the position is below their
   *  local log start, a FETCH_TIER of the topic's Delta tier (brokers/server/tier_fetch.py). */
  private void fetch() {
    if (inTier) {
      int code = fetch(DataConnection.FETCH_TIER);
      if (code == ErrorCodes.OFFSET_OUT_OF_RANGE || (code == 0 && position >= tierEnd)) {
        inTier = false;  // the tier's end (the brokers take over), or the tier moved on: FETCH decides again
      }
      return;
    }
    if (fetch(DataConnection.FETCH) == ErrorCodes.OFFSET_OUT_OF_RANGE) afterLoss();
  }

  /** The FETCH or FETCH_TIER of [at, end) on the partition's leader (the answer off-heap, in this task's allocator). */
  private DataConnection.Direct request(int api, long at) {
    // FETCH_V2 / FETCH_TIER_V2: the partition's leader epoch as this task's metadata has it (KIP-320),
    // read when the request is sent (after a refresh, the new one)
    int wire = api == DataConnection.FETCH_TIER ? DataConnection.FETCH_TIER_V2 : DataConnection.FETCH_V2;
    return cluster.onLeader(part.topic, part.partition, c -> {
      Buf req = new Buf().i32(500).i32(1).i32(MAX_BYTES).u8(plan.options.readCommitted() ? 1 : 0).i32(1)
          .str(part.topic).i32(part.partition).i32(cluster.leaderEpoch(part.topic, part.partition))
          .i64(at).i64(part.end).i32(0);
      if (pushBlock != null) req.raw(pushBlock);  // FETCH and FETCH_TIER: the brokers filter (tier rows too)
      return c.callDirect(wire, req, allocator);
    }, System.currentTimeMillis() + pollTimeoutMs);
  }

  /** Prefetching: once a fetch answer is decoded, the next FETCH (from the new position) is sent
   *  on a background thread while Spark consumes the decoded batches, so the broker prepares the
   *  next answer meanwhile.  At most one is in flight, and the task's thread touches the
   *  Cluster (metadata, connections) only while none is (joined before every use). */
  private static final java.util.concurrent.ExecutorService PREFETCH = java.util.concurrent.Executors.newCachedThreadPool(r -> {
    Thread t = new Thread(r, "spark-log-prefetch");
    t.setDaemon(true);
    return t;
  });
  /** Prefetching off (for measurements): SPARK_LOG_JVM_NO_PREFETCH set, or the JVM's system
   *  property spark-log.noPrefetch=true, read per task. */
  private final boolean noPrefetch = System.getenv("SPARK_LOG_JVM_NO_PREFETCH") != null
      || Boolean.getBoolean("spark-log.noPrefetch");
  private java.util.concurrent.Future<DataConnection.Direct> inflight;
  private long inflightAt = -1;

  private DataConnection.Direct awaitPrefetch() {
    java.util.concurrent.Future<DataConnection.Direct> f = inflight;
    inflight = null;
    try {
      return f.get();
    } catch (java.util.concurrent.ExecutionException e) {
      if (e.getCause() instanceof RuntimeException) throw (RuntimeException) e.getCause();
      throw new SparkLogException("BrokerNotAvailableError", ErrorCodes.BROKER_NOT_AVAILABLE, String.valueOf(e.getCause()));
    } catch (InterruptedException e) {
      throw Interrupts.unchecked(e);
    }
  }

  /** One FETCH or FETCH_TIER of [position, part.end): its error code (0: its records are decoded
   *  and the position moved on; a retriable code: asked again at the next step, after a pause).
   *  A FETCH uses the prefetched answer when it was asked from this position. */
  private int fetch(int api) {
    long t0 = System.nanoTime();
    DataConnection.Direct got = null;
    if (inflight != null) {
      boolean useful = inflightAt == position && api == DataConnection.FETCH;
      got = awaitPrefetch();
      if (!useful) {
        got.close();
        got = null;
      }
    }
    if (got == null) got = request(api, position);
    boolean ok = false;
    try (DataConnection.Direct answer = got) {
      fetchNanos += System.nanoTime() - t0;
      fetches++;
      ByteBuffer r = answer.view;
      fetchedBytes += r.remaining();
      r.getInt();
      Buf.str(r);
      r.getInt();
      short code = r.getShort();
      String message = Buf.str(r);
      long high = r.getLong();   // FETCH_TIER: the tier's end
      long start = r.getLong();  // FETCH_TIER: the tier's start
      long next = r.getLong();
      int framesBase = r.position() + 4;  // where the frames start in answer.buf
      ByteBuffer frames = Buf.slice(r);
      int abortedCount = r.getInt();
      long[] aborted = new long[3 * abortedCount];  // (producer id, first offset, abort marker offset) each
      for (int i = 0; i < aborted.length; i++) aborted[i] = r.getLong();
      // a FETCH with a pushdown block: the payload kinds (a broker that predates the block sends none: frames)
      boolean stream = r.remaining() >= 5 && r.getInt() == 1 && r.get() == 1;
      if (api == DataConnection.FETCH_TIER) {
        tierStart = start;
        tierEnd = high;
      }
      if (code == ErrorCodes.OFFSET_OUT_OF_RANGE) return code;
      if (code != 0) {
        if (ErrorCodes.retriable(code) || (code == ErrorCodes.TIER_UNAVAILABLE && ++tierRetries <= TIER_RETRIES)) {
          lastRetriable = ErrorCodes.name(code) + ": " + message;
          if (code == ErrorCodes.FENCED_LEADER_EPOCH || code == ErrorCodes.UNKNOWN_LEADER_EPOCH) cluster.epochRefusals++;
          cluster.topic(part.topic, true);
          Cluster.sleep(code == ErrorCodes.TIER_UNAVAILABLE ? 100L << Math.min(tierRetries, 4) : 50);
          return code;
        }
        throw SparkLogException.of(code, part.topic + "-" + part.partition + ": " + message);
      }
      if (api == DataConnection.FETCH_TIER) tierRetries = 0;
      long t1 = System.nanoTime();
      if (stream) decodeStream(answer.buf, framesBase, frames.limit());
      else decode(frames, aborted, answer.buf, framesBase);
      decodeNanos += System.nanoTime() - t1;
      if (next > position) position = Math.min(next, part.end);
      ok = true;
    }
    if (ok && api == DataConnection.FETCH && position < part.end && !noPrefetch) {
      long at = position;
      inflightAt = at;
      inflight = PREFETCH.submit(() -> request(DataConnection.FETCH, at));
    }
    return 0;
  }

  /** The brokers answered OFFSET_OUT_OF_RANGE at {@code position}: read it from the Delta tier
   *  when the tier holds it (ListOffsets' earliest is the tier's start, KIP-405), else it is
   *  lost (below what both hold: failOnDataLoss decides) or past the end of the log. */
  private void afterLoss() {
    TopicPartition tp = new TopicPartition(part.topic, part.partition);
    long earliest = cluster.listOffsets(java.util.Collections.singletonList(tp), -2, false).get(tp);
    String what;
    long resume;
    if (earliest <= position) {
      long latest = cluster.listOffsets(java.util.Collections.singletonList(tp), -1, false).get(tp);
      if (position < latest) {  // below the brokers' local log start, at or past the tier's start: in the Delta tier
        int code = fetch(DataConnection.FETCH_TIER);
        if (code == 0) {
          unexplained = 0;
          inTier = position < tierEnd;
          return;
        }
        if (code != ErrorCodes.OFFSET_OUT_OF_RANGE) return;  // retriable: asked again
        if (tierStart > position && tierStart < tierEnd) {  // tier retention ran past it since ListOffsets answered
          what = tp + ": records [" + position + ", " + Math.min(tierStart, part.end) + ") were deleted from the Delta "
              + "tier (retention) before this query read them";
          resume = tierStart;
        } else if (++unexplained < 5) {
          Cluster.sleep(50L << unexplained);  // the brokers' and the tier's views may be a moment apart: ask again
          return;
        } else {  // a tier that does not hold what the brokers say it holds: never skipped as lost
          throw new SparkLogException("TierUnavailableError", ErrorCodes.TIER_UNAVAILABLE, tp + ": offset " + position
              + " is below the brokers' local log start and at or past the topic's earliest offset (" + earliest
              + "), but its Delta tier holds [" + tierStart + ", " + tierEnd + ") only");
        }
      } else {
        what = tp + ": offset " + position + " is past the end of the log (was the topic recreated?)";
        resume = part.end;
      }
    } else {
      what = tp + ": records [" + position + ", " + Math.min(earliest, part.end) + ") were deleted (retention) before this "
          + "query read them";
      resume = earliest;
    }
    if (failOnDataLoss) {
      throw new SparkLogException("OffsetOutOfRangeError", 11, "data loss: " + what
          + ". Set failOnDataLoss=false to skip them and go on.");
    }
    position = Math.min(resume, part.end);
  }

  private static boolean isAborted(long producerId, long base, long[] aborted) {
    for (int i = 0; i < aborted.length; i += 3) {
      if (aborted[i] == producerId && aborted[i + 1] <= base && base <= aborted[i + 2]) return true;
    }
    return false;
  }

  private void decode(ByteBuffer frames, long[] aborted, ArrowBuf answer, int framesBase) {
    frames.order(ByteOrder.LITTLE_ENDIAN);
    int at = 0;
    int limit = frames.limit();
    CRC32C crc = new CRC32C();
    while (at < limit) {
      if (limit - at < 64) throw corrupt(at, "truncated header");
      long base = frames.getLong(at);
      int length = frames.getInt(at + 8);
      int version = frames.get(at + 18);
      if (frames.get(at + 16) != 'S' || frames.get(at + 17) != 'L' || (version != 1 && version != 2) || length < 72
          || length > limit - at) {
        throw corrupt(at, "bad magic, version or length");
      }
      int attributes = frames.getShort(at + 24) & 0xFFFF;
      int count = frames.getInt(at + 28);
      long firstTs = frames.getLong(at + 32);
      boolean appendTime = (attributes & ATTR_LOG_APPEND_TIME) != 0;
      long frameTs = appendTime ? frames.getLong(at + 40) : firstTs;  // the append time (both header stamps)
      int schemaId = frames.getInt(at + 60);
      long storedCrc = frames.getInt(at + 20) & 0xFFFFFFFFL;
      ByteBuffer covered = frames.duplicate();
      covered.position(at + 24).limit(at + length);
      long tc = System.nanoTime();
      crc.reset();
      crc.update(covered);
      crcNanos += System.nanoTime() - tc;
      if (crc.getValue() != storedCrc) throw corrupt(at, "CRC mismatch at offset " + base);
      long span = version == 1 ? count : (long) frames.getInt(at + 64) + 1;
      long next = base + span;
      int frameAt = at;
      at += length;
      if ((attributes & 0x20) != 0 || count == 0 || next <= position || base >= part.end) continue;
      // read_committed: the frames of aborted transactions are dropped (transactional bit 0x10, producer id at 48)
      if ((attributes & 0x10) != 0 && aborted.length > 0 && isAborted(frames.getLong(at - length + 48), base, aborted)) {
        continue;
      }
      long[] offsets = null;
      int bodyStart = 64;
      if (version == 2) {
        offsets = new long[count];
        for (int i = 0; i < count; i++) offsets[i] = base + (frames.getInt(frameAt + 72 + 4 * i) & 0xFFFFFFFFL);
        bodyStart = 72 + ((4 * count + 7) & ~7);
      }
      int lo = 0, hi = count;
      if (offsets == null) {
        lo = (int) Math.max(0, position - base);
        hi = (int) Math.min(count, part.end - base);
      } else {
        while (lo < count && offsets[lo] < position) lo++;
        while (hi > lo && offsets[hi - 1] >= part.end) hi--;
      }
      if (hi <= lo) continue;
      emit(answer, framesBase + frameAt + bodyStart, length - bodyStart, schemaId, base, offsets, lo, hi, frameTs, appendTime, count);
    }
  }

  /** An Arrow IPC stream of the rows the brokers kept (the projected columns, then offset and
   *  timestamp: brokers/server/pushdown.py): one batch per stream batch, without the rows at or
   *  past the partition's end (the brokers send the frame straddling it whole). */
  private void decodeStream(ArrowBuf answer, int at, int length) {
    if (length == 0) return;
    try (org.apache.arrow.vector.ipc.ArrowStreamReader reader = new org.apache.arrow.vector.ipc.ArrowStreamReader(
        MemoryChannels.reader(answer.nioBuffer(at, length)), allocator, Lz4Codecs.INSTANCE)) {
      VectorSchemaRoot loaded = reader.getVectorSchemaRoot();
      while (reader.loadNextBatch()) {
        org.apache.arrow.vector.BigIntVector offsets = (org.apache.arrow.vector.BigIntVector) loaded.getVector("offset");
        int n = loaded.getRowCount();
        int keep = 0;
        while (keep < n && offsets.get(keep) < part.end) keep++;
        if (keep == 0) continue;
        VectorSchemaRoot root = loaded.slice(0, keep);
        ColumnVector[] columns = new ColumnVector[schema.length()];
        int i = 0;
        for (StructField f : schema.fields()) columns[i++] = streamColumn(root, f, keep);
        ready.add(new ColumnarBatch(columns, keep));
        readyRoots.add(root);
      }
    } catch (IOException | RuntimeException e) {
      if (e instanceof SparkLogException) throw (SparkLogException) e;
      throw new SparkLogException("CorruptRecordError", 13, part.topic + "-" + part.partition
          + ": a filtered fetch answer is not a valid Arrow stream: " + e);
    }
  }

  /** The ``topic`` or ``partition`` column: one value for every row of this range. */
  private ColumnVector partColumn(String name, int rows) {
    if (name.equals("topic")) {
      ConstantColumnVector v = new ConstantColumnVector(rows, DataTypes.StringType);
      v.setUtf8String(UTF8String.fromString(part.topic));
      return v;
    }
    ConstantColumnVector v = new ConstantColumnVector(rows, DataTypes.IntegerType);
    v.setInt(part.partition);
    return v;
  }

  private ColumnVector streamColumn(VectorSchemaRoot root, StructField f, int rows) {
    switch (f.name()) {
      case "topic":
      case "partition":
        return partColumn(f.name(), rows);
      default:
        break;
    }
    FieldVector vector = root.getVector(f.name());
    if (vector == null) {
      ConstantColumnVector v = new ConstantColumnVector(rows, f.dataType());
      v.setNull();
      return v;
    }
    return Vectors.wrap(vector, f.dataType());
  }

  private SparkLogException corrupt(int at, String what) {
    return new SparkLogException("CorruptRecordError", 13, part.topic + "-" + part.partition + ": frame at byte " + at
        + " of a fetch answer: " + what);
  }


  /** The Arrow IPC record batch at answer[bodyAt, bodyAt + bodyLength): its metadata parsed,
   *  its body a slice of the answer's off-heap buffer (no copy; LZ4 bodies decompress from it). */
  private void emit(ArrowBuf answer, int bodyAt, int bodyLength, int schemaId, long base, long[] offsets, int lo, int hi,
                    long frameTs, boolean appendTime, int count) {
    Schema arrow = cluster.topic(part.topic, false).schemas.get(schemaId);
    if (arrow == null) arrow = cluster.topic(part.topic, true).schemas.get(schemaId);
    if (arrow == null) {
      throw new SparkLogException("SchemaMismatchError", 14, part.topic + "-" + part.partition + ": unknown schema id " + schemaId);
    }
    long tb = System.nanoTime();
    Pruned pruned = pruned(schemaId, arrow);
    VectorSchemaRoot root = VectorSchemaRoot.create(pruned.schema, allocator);
    try {
      ReadChannel channel = new ReadChannel(MemoryChannels.reader(answer.nioBuffer(bodyAt, bodyLength)));
      MessageMetadataResult message = MessageSerializer.readMessage(channel);
      if (message == null || message.getMessage().headerType() != MessageHeader.RecordBatch) {
        throw new IOException("no record batch message");
      }
      long start = channel.bytesRead(), size = message.getMessageBodyLength();
      if (start + size > bodyLength) throw new IOException("record batch body past the frame's end");
      ArrowBuf body = answer.slice(bodyAt + start, size);
      body.getReferenceManager().retain();  // deserializeRecordBatch releases its body once
      long tl = System.nanoTime();
      long tlCpu = PROFILE ? THREADS.getCurrentThreadCpuTime() : 0;
      copyNanos += tl - tb;
      try (ArrowRecordBatch records = MessageSerializer.deserializeRecordBatch(message, body)) {
        if (pruned.keep == null) {
          new VectorLoader(root, Lz4Codecs.INSTANCE).load(records);
        } else {
          try (ArrowRecordBatch kept = pruned.select(records)) {
            new VectorLoader(root, Lz4Codecs.INSTANCE).load(kept);
          }
        }
      }
      loadNanos += System.nanoTime() - tl;
      if (PROFILE) loadCpuNanos += THREADS.getCurrentThreadCpuTime() - tlCpu;
    } catch (IOException | RuntimeException e) {
      root.close();
      if (e instanceof SparkLogException) throw (SparkLogException) e;
      throw new SparkLogException("CorruptRecordError", 13, part.topic + "-" + part.partition + ": frame at offset " + base
          + " does not hold a valid Arrow batch: " + e);
    }
    if (root.getRowCount() != count) {
      root.close();
      throw new SparkLogException("CorruptRecordError", 13, "frame at offset " + base + " claims " + count + " records, holds "
          + root.getRowCount());
    }
    if (lo > 0 || hi < count) {
      VectorSchemaRoot sliced = root.slice(lo, hi - lo);
      root.close();
      root = sliced;
    }
    int rows = hi - lo;
    ColumnVector[] columns = new ColumnVector[schema.length()];
    int i = 0;
    for (StructField f : schema.fields()) {
      columns[i++] = column(root, f, rows, base, offsets, lo, frameTs, appendTime);
    }
    ColumnarBatch out = new ColumnarBatch(columns, rows);
    ready.add(out);
    readyRoots.add(root);
  }

  /** Column pruning down to the frame's buffers: the Arrow fields of a schema id that the
   *  read schema names, and where their field nodes and buffers sit in a record batch of the
   *  full schema (depth first, as IPC lays them out).  Arrow IPC compresses each buffer on its
   *  own, so the buffers of the other columns (a compaction job's values) are never
   *  decompressed nor allocated.  {@code keep == null}: every field is read (nothing to prune,
   *  or a layout this does not slice: view types' variadic buffers). */
  static final class Pruned {
    final Schema schema;
    final int[][] keep;  // per kept field: {first node, nodes, first buffer, buffers}

    Pruned(Schema schema, int[][] keep) {
      this.schema = schema;
      this.keep = keep;
    }

    ArrowRecordBatch select(ArrowRecordBatch all) {
      List<org.apache.arrow.vector.ipc.message.ArrowFieldNode> nodes = new ArrayList<>();
      List<ArrowBuf> buffers = new ArrayList<>();
      List<org.apache.arrow.vector.ipc.message.ArrowFieldNode> allNodes = all.getNodes();
      List<ArrowBuf> allBuffers = all.getBuffers();
      for (int[] k : keep) {
        if (k[0] + k[1] > allNodes.size() || k[2] + k[3] > allBuffers.size()) {
          throw new IllegalArgumentException("record batch has " + allNodes.size() + " field nodes and "
              + allBuffers.size() + " buffers, fewer than its schema lays out");
        }
        nodes.addAll(allNodes.subList(k[0], k[0] + k[1]));
        buffers.addAll(allBuffers.subList(k[2], k[2] + k[3]));
      }
      return new ArrowRecordBatch(all.getLength(), nodes, buffers, all.getBodyCompression());  // retains its buffers
    }
  }

  private final java.util.Map<Integer, Pruned> prunedBySchema = new java.util.HashMap<>();

  private Pruned pruned(int schemaId, Schema arrow) {
    Pruned known = prunedBySchema.get(schemaId);
    if (known != null) return known;  // a schema id names one schema
    java.util.Set<String> wanted = new java.util.HashSet<>(java.util.Arrays.asList(schema.fieldNames()));
    List<org.apache.arrow.vector.types.pojo.Field> fields = new ArrayList<>();
    List<int[]> keep = new ArrayList<>();
    int node = 0, buffer = 0;
    boolean sliceable = true;
    for (org.apache.arrow.vector.types.pojo.Field f : arrow.getFields()) {
      int[] counts = layout(f);
      if (counts == null) {
        sliceable = false;
        break;
      }
      if (wanted.contains(f.getName())) {
        fields.add(f);
        keep.add(new int[] {node, counts[0], buffer, counts[1]});
      }
      node += counts[0];
      buffer += counts[1];
    }
    Pruned out = !sliceable || fields.size() == arrow.getFields().size() ? new Pruned(arrow, null)
        : new Pruned(new Schema(fields, arrow.getCustomMetadata()), keep.toArray(new int[0][]));
    prunedBySchema.put(schemaId, out);
    return out;
  }

  /** {field nodes, buffers} a field takes in a record batch (children included); null for a
   *  type with variadic buffers (their count is per batch, not per type). */
  private static int[] layout(org.apache.arrow.vector.types.pojo.Field f) {
    org.apache.arrow.vector.types.pojo.ArrowType type = f.getType();
    if (type instanceof org.apache.arrow.vector.types.pojo.ArrowType.Utf8View
        || type instanceof org.apache.arrow.vector.types.pojo.ArrowType.BinaryView) {
      return null;
    }
    int nodes = 1, buffers = org.apache.arrow.vector.TypeLayout.getTypeBufferCount(type);
    for (org.apache.arrow.vector.types.pojo.Field child : f.getChildren()) {
      int[] c = layout(child);
      if (c == null) return null;
      nodes += c[0];
      buffers += c[1];
    }
    return new int[] {nodes, buffers};
  }

  /** {@code frameTs}: the frame's timestamp (a typed topic's records', or with {@code appendTime}
   *  a LogAppendTime frame's append time, which every record takes over its timestamp column). */
  private ColumnVector column(VectorSchemaRoot root, StructField f, int rows, long base, long[] offsets, int lo, long frameTs,
                              boolean appendTime) {
    switch (f.name()) {
      case "topic":
      case "partition":
        return partColumn(f.name(), rows);
      case "offset":
        return new Vectors.Offsets(base, offsets, lo);
      case "timestampType":
        if (!typed) {
          ConstantColumnVector v = new ConstantColumnVector(rows, DataTypes.IntegerType);
          v.setInt(timestampType);
          return v;
        }
        break;
      case "timestamp":
        if (typed || appendTime) {
          ConstantColumnVector v = new ConstantColumnVector(rows, DataTypes.TimestampType);
          v.setLong(frameTs * 1000);
          return v;
        }
        break;
      default:
        break;
    }
    FieldVector vector = root.getVector(f.name());
    if (vector == null) {  // a column an older schema version lacks
      ConstantColumnVector v = new ConstantColumnVector(rows, f.dataType());
      v.setNull();
      return v;
    }
    return Vectors.wrap(vector, f.dataType());
  }

  /** Fetch answers and ListOffsets refused for their leader epoch so far (EpochProbe, tests). */
  int epochRefusals() { return cluster.epochRefusals; }

  @Override
  public void close() {
    if (PROFILE) {
      System.err.printf("spark-log profile %s: task %.1f ms (reader built in %.1f, first batch at %.1f, Spark on the batches %.1f), %d fetches %.1f ms (%d bytes), decode %.1f ms (crc %.1f, copy+deserialize %.1f, load+decompress %.1f, of it CPU %.1f), task thread CPU %.1f ms, connections opened "
          + "in this JVM so far %d%n", part, (System.nanoTime() - created) / 1e6, ctorNanos / 1e6,
          (firstBatchAt == 0 ? 0 : firstBatchAt - created) / 1e6, consumeNanos / 1e6, fetches, fetchNanos / 1e6, fetchedBytes,
          decodeNanos / 1e6, crcNanos / 1e6, copyNanos / 1e6, loadNanos / 1e6, loadCpuNanos / 1e6,
          (THREADS.getCurrentThreadCpuTime() - createdCpu) / 1e6, DataConnection.OPENED.get());
    }
    release();
    if (inflight != null) {  // the answer of a prefetch this task no longer needs
      try {
        awaitPrefetch().close();
      } catch (RuntimeException ignored) {
        // the task is over: a failed prefetch does not matter
      }
    }
    for (ColumnarBatch b : ready) b.close();
    ready.clear();
    for (VectorSchemaRoot r : readyRoots) r.close();
    readyRoots.clear();
    cluster.close();
    allocator.close();
  }
}
