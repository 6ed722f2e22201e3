package io.sparklog.spark;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;

import net.jpountz.lz4.LZ4FrameInputStream;
import net.jpountz.lz4.LZ4FrameOutputStream;
import org.apache.arrow.compression.CommonsCompressionFactory;
import org.apache.arrow.memory.ArrowBuf;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.vector.compression.AbstractCompressionCodec;
import org.apache.arrow.vector.compression.CompressionCodec;
import org.apache.arrow.vector.compression.CompressionUtil;
import org.apache.arrow.vector.compression.NoCompressionCodec;

/** Arrow IPC body compression for frames: LZ4_FRAME through lz4-java (JNI, much faster than
 *  the pure-Java commons-compress codec of arrow-compression), ZSTD through arrow-compression. */
final class Lz4Codecs implements CompressionCodec.Factory {
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
    @Override protected ArrowBuf doCompress(BufferAllocator allocator, ArrowBuf uncompressed) {
      byte[] in = new byte[(int) uncompressed.writerIndex()];
      uncompressed.getBytes(0, in);
      ByteArrayOutputStream out = new ByteArrayOutputStream(in.length / 2 + 64);
      try (LZ4FrameOutputStream lz4 = new LZ4FrameOutputStream(out)) {
        lz4.write(in);
      } catch (IOException e) {
        throw new RuntimeException(e);
      }
      byte[] compressed = out.toByteArray();
      ArrowBuf buf = allocator.buffer(CompressionUtil.SIZE_OF_UNCOMPRESSED_LENGTH + compressed.length);
      buf.setBytes(CompressionUtil.SIZE_OF_UNCOMPRESSED_LENGTH, compressed);
      buf.writerIndex(CompressionUtil.SIZE_OF_UNCOMPRESSED_LENGTH + compressed.length);
      return buf;
    }

    @Override protected ArrowBuf doDecompress(BufferAllocator allocator, ArrowBuf compressed) {
      long length = readUncompressedLength(compressed);
      int size = (int) (compressed.writerIndex() - CompressionUtil.SIZE_OF_UNCOMPRESSED_LENGTH);
      byte[] in = new byte[size];
      compressed.getBytes(CompressionUtil.SIZE_OF_UNCOMPRESSED_LENGTH, in);
      byte[] out = new byte[(int) length];
      try (LZ4FrameInputStream lz4 = new LZ4FrameInputStream(new ByteArrayInputStream(in))) {
        int got = 0;
        while (got < out.length) {
          int n = lz4.read(out, got, out.length - got);
          if (n < 0) throw new IOException("LZ4 frame ended after " + got + " of " + length + " bytes");
          got += n;
        }
      } catch (IOException e) {
        throw new SparkLogException("CorruptRecordError", 13, "cannot decompress an LZ4 body: " + e.getMessage());
      }
      ArrowBuf buf = allocator.buffer(length);
      buf.setBytes(0, out);
      buf.writerIndex(length);
      return buf;
    }

    @Override public CompressionUtil.CodecType getCodecType() { return CompressionUtil.CodecType.LZ4_FRAME; }
  }
}
