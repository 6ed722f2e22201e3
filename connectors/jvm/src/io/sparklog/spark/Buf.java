package io.sparklog.spark;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/** A growable little-endian request builder, and readers for answers (the data listener's format). */
final class Buf {
  private byte[] data = new byte[256];
  private int size;

  private void ensure(int more) {
    if (size + more > data.length) data = Arrays.copyOf(data, Math.max(data.length * 2, size + more));
  }

  Buf u8(int v) { ensure(1); data[size++] = (byte) v; return this; }

  Buf i16(int v) { ensure(2); data[size++] = (byte) v; data[size++] = (byte) (v >> 8); return this; }

  Buf i32(int v) {
    ensure(4);
    for (int i = 0; i < 4; i++) data[size++] = (byte) (v >> (8 * i));
    return this;
  }

  Buf i64(long v) {
    ensure(8);
    for (int i = 0; i < 8; i++) data[size++] = (byte) (v >> (8 * i));
    return this;
  }

  Buf bytes(byte[] b, int off, int len) { i32(len); ensure(len); System.arraycopy(b, off, data, size, len); size += len; return this; }

  /** Raw bytes, no length. */
  Buf raw(byte[] b) { ensure(b.length); System.arraycopy(b, 0, data, size, b.length); size += b.length; return this; }

  Buf str(String s) { byte[] b = s.getBytes(StandardCharsets.UTF_8); return bytes(b, 0, b.length); }

  byte[] array() { return data; }

  int size() { return size; }

  static String str(ByteBuffer in) {
    int n = in.getInt();
    byte[] b = new byte[n];
    in.get(b);
    return new String(b, StandardCharsets.UTF_8);
  }

  static byte[] bytes(ByteBuffer in) {
    int n = in.getInt();
    byte[] b = new byte[n];
    in.get(b);
    return b;
  }

  /** A view of the next {@code bytes} field (no copy); the buffer moves past it. */
  static ByteBuffer slice(ByteBuffer in) {
    int n = in.getInt();
    ByteBuffer out = in.slice();
    out.limit(n);
    out.order(ByteOrder.LITTLE_ENDIAN);
    in.position(in.position() + n);
    return out;
  }
}
