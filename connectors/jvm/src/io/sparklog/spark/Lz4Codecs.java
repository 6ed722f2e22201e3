package io.sparklog.spark;

import java.io.IOException;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;

import org.apache.arrow.compression.CommonsCompressionFactory;
import org.apache.arrow.memory.ArrowBuf;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.vector.compression.AbstractCompressionCodec;
import org.apache.arrow.vector.compression.CompressionCodec;
import org.apache.arrow.vector.compression.CompressionUtil;
import org.apache.arrow.vector.compression.NoCompressionCodec;

/** Arrow IPC body compression for frames: LZ4_FRAME through lz4-java (JNI, much faster than
 *  the pure-Java commons-compress codec of arrow-compression), ZSTD through arrow-compression. */
public final class Lz4Codecs implements CompressionCodec.Factory {
  static final Lz4Codecs INSTANCE = new Lz4Codecs();

  @Override public CompressionCodec createCodec(CompressionUtil.CodecType type) {
    switch (type) {
      case LZ4_FRAME: return new EmptySafe(new Lz4());
      case ZSTD: return new EmptySafe(CommonsCompressionFactory.INSTANCE.createCodec(type));
      default: return NoCompressionCodec.INSTANCE;
    }
  }

  /** Empty buffers as Arrow C++ (pyarrow) writes and reads them: zero bytes, no length prefix
   *  (Arrow Java writes an 8-byte zero prefix, which pyarrow then fails to decompress). */
  static final class EmptySafe implements CompressionCodec {
    private final CompressionCodec inner;

    EmptySafe(CompressionCodec inner) { this.inner = inner; }

    @Override public ArrowBuf compress(BufferAllocator allocator, ArrowBuf uncompressed) {
      if (uncompressed.writerIndex() == 0) {
        uncompressed.close();
        return allocator.getEmpty();
      }
      return inner.compress(allocator, uncompressed);
    }

    @Override public ArrowBuf decompress(BufferAllocator allocator, ArrowBuf compressed) {
      if (compressed.writerIndex() == 0) return compressed;
      return inner.decompress(allocator, compressed);
    }

    @Override public CompressionUtil.CodecType getCodecType() { return inner.getCodecType(); }
  }

  @Override public CompressionCodec createCodec(CompressionUtil.CodecType type, int level) { return createCodec(type); }

  static final class Lz4 extends AbstractCompressionCodec {
    private static final net.jpountz.lz4.LZ4Compressor COMPRESSOR = net.jpountz.lz4.LZ4Factory.fastestInstance().fastCompressor();
    private static final int BLOCK = 4 << 20;  // the frame's block maximum size (BD 0x70: 4 MiB)
    private static final byte[] HEADER = header();

    private static byte[] header() {
      byte flg = 0x60, bd = 0x70;  // version 01, independent blocks, no checksums or content size; 4 MiB blocks
      int hc = (net.jpountz.xxhash.XXHashFactory.fastestInstance().hash32().hash(new byte[] {flg, bd}, 0, 2, 0) >> 8) & 0xFF;
      return new byte[] {0x04, 0x22, 0x4D, 0x18, flg, bd, (byte) hc};
    }

    /** One LZ4 frame written straight between the (off-heap) buffers, blocks compressed by
     *  lz4-java's block compressor (an incompressible block is stored as it is).  Replaces
     *  LZ4FrameOutputStream, which allocated and zeroed two block-sized (4 MiB) heap buffers
     *  per Arrow buffer compressed: most of the writer's time. */
    @Override protected ArrowBuf doCompress(BufferAllocator allocator, ArrowBuf uncompressed) {
      int length = (int) uncompressed.writerIndex();
      int blocks = (length + BLOCK - 1) / BLOCK;
      long worst = CompressionUtil.SIZE_OF_UNCOMPRESSED_LENGTH + HEADER.length + 4L
          + (long) blocks * (4 + COMPRESSOR.maxCompressedLength(Math.min(length, BLOCK)));
      ArrowBuf out = allocator.buffer(worst);
      ByteBuffer src = uncompressed.nioBuffer(0L, length);
      ByteBuffer dst = out.nioBuffer(0, (int) worst).order(ByteOrder.LITTLE_ENDIAN);
      int o = (int) CompressionUtil.SIZE_OF_UNCOMPRESSED_LENGTH;
      dst.put(o, HEADER);
      o += HEADER.length;
      for (int at = 0; at < length; at += BLOCK) {
        int n = Math.min(BLOCK, length - at);
        int packed = COMPRESSOR.compress(src, at, n, dst, o + 4, COMPRESSOR.maxCompressedLength(n));
        if (packed >= n) {
          dst.putInt(o, n | 0x80000000);
          dst.put(o + 4, src, at, n);
          o += 4 + n;
        } else {
          dst.putInt(o, packed);
          o += 4 + packed;
        }
      }
      dst.putInt(o, 0);  // end mark
      o += 4;
      out.writerIndex(o);
      return out;
    }

    /** Straight from the (off-heap) compressed buffer into the new one: no heap copies. */
    @Override protected ArrowBuf doDecompress(BufferAllocator allocator, ArrowBuf compressed) {
      long length = readUncompressedLength(compressed);
      int size = (int) (compressed.writerIndex() - CompressionUtil.SIZE_OF_UNCOMPRESSED_LENGTH);
      ArrowBuf buf = allocator.buffer(Math.max(length, 1));
      try {
        ByteBuffer in = compressed.nioBuffer(CompressionUtil.SIZE_OF_UNCOMPRESSED_LENGTH, size);
        ByteBuffer out = buf.nioBuffer(0, (int) length);
        decodeExactly(in, out);
      } catch (IOException | RuntimeException e) {
        buf.close();
        throw new SparkLogException("CorruptRecordError", 13, "cannot decompress an LZ4 body: " + e.getMessage());
      }
      buf.writerIndex(length);
      return buf;
    }

    @Override public CompressionUtil.CodecType getCodecType() { return CompressionUtil.CodecType.LZ4_FRAME; }
  }

  /** The {@code length} bytes the LZ4 frames {@code in} hold, decoded as a read task decodes an
   *  Arrow buffer (off-heap, as its answers are); IOException when they hold another length or
   *  are damaged.  For tests (tests/spark/test_jvm_lz4.py: py4j copies arrays, so a test
   *  cannot read back an array it passed in). */
  public static byte[] decoded(byte[] in, int length) throws IOException {
    ByteBuffer source = ByteBuffer.allocateDirect(Math.max(in.length, 1));
    source.put(0, in).limit(in.length);
    ByteBuffer target = ByteBuffer.allocateDirect(Math.max(length, 1));
    target.limit(length);
    decodeExactly(source, target);
    byte[] out = new byte[length];
    target.get(0, out);
    return out;
  }

  /** {@link #decodeFrames} filling {@code out} from its position to its limit exactly (an
   *  Arrow buffer's declared length); IOException when the frames hold another length. */
  static void decodeExactly(ByteBuffer in, ByteBuffer out) throws IOException {
    int length = out.limit() - out.position();
    int got = decodeFrames(in, out);
    if (got != length) throw new IOException("LZ4 frame holds " + got + " of " + length + " bytes");
  }

  /** Decode LZ4 frames (the LZ4 frame format, v1.6) from {@code in} into {@code out}; the
   *  bytes written.  Blocks are decoded into the one output buffer, so linked blocks (whose
   *  matches reach into earlier blocks: what Arrow C++, i.e. pyarrow, writes by default, and
   *  lz4-java's LZ4FrameInputStream refuses) decode like independent ones.  Checksums are not
   *  verified (the frame's CRC-32C already covers the body).  By absolute index: the buffers'
   *  positions are not moved.  Stored blocks are copied straight from {@code in} to
   *  {@code out} (an incompressible buffer, the values of most topics, is nothing else); once
   *  a compressed block comes, the output so far and the rest are decoded on heap arrays
   *  ({@link #decodeBlock}) and copied out once at the end: an Arrow buffer of offsets or
   *  timestamps is a run of matches a few bytes long each, and a bulk copy between direct
   *  buffers per literal run and per match cost about 100 ns each (most of a read task's
   *  decoding, by JFR), against a few ns on arrays. */
  static int decodeFrames(ByteBuffer in, ByteBuffer out) throws IOException {
    int at = in.position(), end = in.limit(), start = out.position(), o = start;
    in = in.duplicate().order(ByteOrder.LITTLE_ENDIAN);
    byte[] heap = null;  // the output from start on, once a compressed block needs arrays
    byte[] block = null;
    int capacity = out.limit() - start;
    while (at < end) {
      if (end - at < 7) throw new IOException("truncated LZ4 frame header");
      int magic = in.getInt(at);
      if ((magic & 0xFFFFFFF0) == 0x184D2A50) {  // skippable frame
        if (end - at < 8) throw new IOException("truncated LZ4 skippable frame");
        int skip = in.getInt(at + 4);
        if (skip < 0 || skip > end - at - 8) throw new IOException("truncated LZ4 skippable frame");
        at += 8 + skip;
        continue;
      }
      if (magic != 0x184D2204) throw new IOException("not an LZ4 frame (magic " + Integer.toHexString(magic) + ")");
      int flg = in.get(at + 4) & 0xFF;
      if ((flg >> 6) != 1) throw new IOException("unsupported LZ4 frame version");
      boolean blockChecksum = (flg & 0x10) != 0, contentSize = (flg & 0x08) != 0, contentChecksum = (flg & 0x04) != 0,
          dictId = (flg & 0x01) != 0;
      at += 6 + (contentSize ? 8 : 0) + (dictId ? 4 : 0) + 1;  // magic, FLG, BD, [size], [dict], HC
      while (true) {
        if (at < 0 || at + 4 > end) throw new IOException("truncated LZ4 block");
        int word = in.getInt(at);
        at += 4;
        if (word == 0) break;
        int n = word & 0x7FFFFFFF;
        if (n > end - at) throw new IOException("truncated LZ4 block");
        int made = o - start;
        if ((word & 0x80000000) != 0) {
          if (n > capacity - made) throw new IOException("LZ4 output larger than declared");
          if (heap == null) out.put(o, in, at, n);
          else in.get(at, heap, made, n);
          o += n;
        } else {
          if (heap == null) {
            heap = scratch(OUTPUT, capacity + WILD);
            out.get(start, heap, 0, made);
          }
          if (block == null || block.length < n) block = scratch(BLOCK_IN, n + WILD);
          in.get(at, block, 0, n);
          o = start + decodeBlock(block, 0, n, heap, made, capacity);
        }
        at += n + (blockChecksum ? 4 : 0);
      }
      if (contentChecksum) at += 4;
    }
    if (heap != null) out.put(start, heap, 0, o - start);
    return o - start;
  }

  private static final VarHandle LONGS = MethodHandles.byteArrayViewVarHandle(long[].class, ByteOrder.LITTLE_ENDIAN);
  static final int WILD = 16;  // bytes a word-wise copy may write past its end (decodeBlock)
  private static final ThreadLocal<byte[]> OUTPUT = new ThreadLocal<>();
  private static final ThreadLocal<byte[]> BLOCK_IN = new ThreadLocal<>();
  private static final int KEPT_SCRATCH = 16 << 20;  // a thread keeps arrays up to this size for its next buffers

  /** A heap array of at least {@code size} bytes for this thread (its contents undefined):
   *  the one it kept when big enough, so decoding a task's buffers allocates (and zeroes)
   *  no multi-MiB arrays per buffer. */
  private static byte[] scratch(ThreadLocal<byte[]> kept, int size) {
    byte[] array = kept.get();
    if (array != null && array.length >= size) return array;
    array = new byte[size];
    if (size <= KEPT_SCRATCH) kept.set(array);
    return array;
  }

  /** One LZ4 block of src[at, end) appended to dst at o, at most up to {@code limit} (matches
   *  may reach before o, into earlier blocks); the end of what it wrote.  Every length and
   *  offset is checked against {@code end} and {@code limit} before a copy: damaged input is
   *  an IOException.  Short literal runs and matches are copied a word (8 bytes) at a time, as
   *  LZ4's own decoder does: up to {@link #WILD} bytes past a copy's end may be written with
   *  bytes that a later copy overwrites (or that lie past {@code limit}, never read), so
   *  {@code dst} needs that much room past {@code limit} to take this path (the scratch arrays
   *  have it; a copy that would pass the array's end takes the exact path). */
  static int decodeBlock(byte[] src, int at, int end, byte[] dst, int o, int limit) throws IOException {
    while (at < end) {
      int token = src[at++] & 0xFF;
      int literals = token >>> 4;
      if (literals == 15) {
        int b;
        do {
          if (at >= end) throw new IOException("bad LZ4 literal run");
          b = src[at++] & 0xFF;
          literals += b;
        } while (b == 255);
      }
      if (literals < 0 || literals > end - at || literals > limit - o) throw new IOException("bad LZ4 literal run");
      if (literals <= WILD && at + WILD <= src.length && o + WILD <= dst.length) {  // most runs: two words, no call
        LONGS.set(dst, o, (long) LONGS.get(src, at));
        LONGS.set(dst, o + 8, (long) LONGS.get(src, at + 8));
      } else {
        System.arraycopy(src, at, dst, o, literals);
      }
      at += literals;
      o += literals;
      if (at >= end) break;  // the last sequence has literals only
      if (end - at < 2) throw new IOException("bad LZ4 match");
      int offset = (src[at] & 0xFF) | (src[at + 1] & 0xFF) << 8;
      at += 2;
      int match = token & 0x0F;
      if (match == 15) {
        int b;
        do {
          if (at >= end) throw new IOException("bad LZ4 match");
          b = src[at++] & 0xFF;
          match += b;
        } while (b == 255);
      }
      match += 4;
      int from = o - offset;
      if (offset == 0 || from < 0 || match < 0 || match > limit - o) throw new IOException("bad LZ4 match");
      if (offset >= 8 && o + match + 8 <= dst.length) {  // word by word: each word read is written already
        for (int i = 0; i < match; i += 8) LONGS.set(dst, o + i, (long) LONGS.get(dst, from + i));
      } else if (offset >= match) {
        System.arraycopy(dst, from, dst, o, match);
      } else {  // the match overlaps what it writes: repeat the last `offset` bytes
        for (int i = 0; i < match; i++) dst[o + i] = dst[from + i];
      }
      o += match;
    }
    return o;
  }
}
