package io.sparklog.spark;

import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.nio.channels.ReadableByteChannel;
import java.nio.channels.WritableByteChannel;

/** Channels over memory for Arrow IPC (de)serialisation that a thread's interrupt does not
 *  close.  {@code java.nio.channels.Channels.newChannel} wraps a stream in an interruptible
 *  channel: when Spark stopped a query (it interrupts the stream's thread) while the driver
 *  parsed a topic's schema, the parse failed with ClosedByInterruptException, and the stopped
 *  query ended as failed ("InvalidSchemaError: cannot read a topic schema").  Parsing bytes
 *  already in memory has nothing to interrupt; the interrupt is seen at the next wait. */
final class MemoryChannels {
  private MemoryChannels() {}

  static ReadableByteChannel reader(byte[] bytes) { return reader(ByteBuffer.wrap(bytes)); }

  /** Reads {@code src} from its position to its limit (the position moves on). */
  static ReadableByteChannel reader(ByteBuffer src) {
    return new ReadableByteChannel() {
      @Override public int read(ByteBuffer dst) {
        if (!src.hasRemaining()) return -1;
        int n = Math.min(dst.remaining(), src.remaining());
        ByteBuffer part = src.duplicate();
        part.limit(part.position() + n);
        dst.put(part);
        src.position(src.position() + n);
        return n;
      }

      @Override public boolean isOpen() { return true; }

      @Override public void close() {}
    };
  }

  static WritableByteChannel writer(ByteArrayOutputStream out) {
    return new WritableByteChannel() {
      @Override public int write(ByteBuffer src) {
        int n = src.remaining();
        if (src.hasArray()) {
          out.write(src.array(), src.arrayOffset() + src.position(), n);
          src.position(src.limit());
        } else {
          byte[] copy = new byte[n];
          src.get(copy);
          out.write(copy, 0, n);
        }
        return n;
      }

      @Override public boolean isOpen() { return true; }

      @Override public void close() {}
    };
  }
}
