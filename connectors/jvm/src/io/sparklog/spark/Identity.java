package io.sparklog.spark;

import java.nio.charset.StandardCharsets;

/** connectors/writer.py's producer_identity (BLAKE2b-64 of "query/partition/era", epoch =
 *  batch id & 0x7FFF), so a task re-run by either implementation is the same producer; and
 *  Kafka's murmur2 partitioner (spark_log/partitioner.py). */
final class Identity {
  private Identity() {}

  static final int EPOCH_BITS = 15;

  /** {producer id, producer epoch}. */
  static long[] producer(String queryId, int sparkPartition, long batchId) {
    long era = batchId >> EPOCH_BITS;
    byte[] digest = blake2b((queryId + "/" + sparkPartition + "/" + era).getBytes(StandardCharsets.UTF_8), 8);
    long id = 0;
    for (byte b : digest) id = (id << 8) | (b & 0xFF);
    return new long[] {id & 0x7FFF_FFFF_FFFF_FFFFL, batchId & ((1 << EPOCH_BITS) - 1)};
  }

  private static final long[] IV = {
      0x6a09e667f3bcc908L, 0xbb67ae8584caa73bL, 0x3c6ef372fe94f82bL, 0xa54ff53a5f1d36f1L,
      0x510e527fade682d1L, 0x9b05688c2b3e6c1fL, 0x1f83d9abfb41bd6bL, 0x5be0cd19137e2179L};
  private static final int[][] SIGMA = {
      {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, {14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3},
      {11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4}, {7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8},
      {9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13}, {2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9},
      {12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11}, {13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10},
      {6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5}, {10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0}};

  /** BLAKE2b (RFC 7693) without a key, {@code outLen} bytes of digest. */
  static byte[] blake2b(byte[] data, int outLen) {
    long[] h = IV.clone();
    h[0] ^= 0x01010000L ^ outLen;
    int blocks = Math.max(1, (data.length + 127) / 128);
    long[] m = new long[16];
    for (int b = 0; b < blocks; b++) {
      byte[] block = new byte[128];
      int off = b * 128;
      int n = Math.min(128, data.length - off);
      if (n > 0) System.arraycopy(data, off, block, 0, n);
      for (int i = 0; i < 16; i++) {
        long w = 0;
        for (int j = 7; j >= 0; j--) w = (w << 8) | (block[i * 8 + j] & 0xFF);
        m[i] = w;
      }
      boolean last = b == blocks - 1;
      long t = last ? data.length : (long) (b + 1) * 128;
      compress(h, m, t, last);
    }
    byte[] out = new byte[outLen];
    for (int i = 0; i < outLen; i++) out[i] = (byte) (h[i / 8] >>> (8 * (i % 8)));
    return out;
  }

  private static void compress(long[] h, long[] m, long t, boolean last) {
    long[] v = new long[16];
    System.arraycopy(h, 0, v, 0, 8);
    System.arraycopy(IV, 0, v, 8, 8);
    v[12] ^= t;
    if (last) v[14] = ~v[14];
    for (int r = 0; r < 12; r++) {
      int[] s = SIGMA[r % 10];
      g(v, 0, 4, 8, 12, m[s[0]], m[s[1]]);
      g(v, 1, 5, 9, 13, m[s[2]], m[s[3]]);
      g(v, 2, 6, 10, 14, m[s[4]], m[s[5]]);
      g(v, 3, 7, 11, 15, m[s[6]], m[s[7]]);
      g(v, 0, 5, 10, 15, m[s[8]], m[s[9]]);
      g(v, 1, 6, 11, 12, m[s[10]], m[s[11]]);
      g(v, 2, 7, 8, 13, m[s[12]], m[s[13]]);
      g(v, 3, 4, 9, 14, m[s[14]], m[s[15]]);
    }
    for (int i = 0; i < 8; i++) h[i] ^= v[i] ^ v[i + 8];
  }

  private static void g(long[] v, int a, int b, int c, int d, long x, long y) {
    v[a] = v[a] + v[b] + x;
    v[d] = Long.rotateRight(v[d] ^ v[a], 32);
    v[c] = v[c] + v[d];
    v[b] = Long.rotateRight(v[b] ^ v[c], 24);
    v[a] = v[a] + v[b] + y;
    v[d] = Long.rotateRight(v[d] ^ v[a], 16);
    v[c] = v[c] + v[d];
    v[b] = Long.rotateRight(v[b] ^ v[c], 63);
  }

  static int murmur2(byte[] data) {
    int length = data.length;
    final int m = 0x5bd1e995;
    int h = 0x9747b28c ^ length;
    int length4 = length / 4;
    for (int i = 0; i < length4; i++) {
      int i4 = i * 4;
      int k = (data[i4] & 0xff) + ((data[i4 + 1] & 0xff) << 8) + ((data[i4 + 2] & 0xff) << 16) + ((data[i4 + 3] & 0xff) << 24);
      k *= m;
      k ^= k >>> 24;
      k *= m;
      h *= m;
      h ^= k;
    }
    switch (length % 4) {
      case 3: h ^= (data[(length & ~3) + 2] & 0xff) << 16; // fall through
      case 2: h ^= (data[(length & ~3) + 1] & 0xff) << 8; // fall through
      case 1: h ^= data[length & ~3] & 0xff; h *= m; // fall through
      default: break;
    }
    h ^= h >>> 13;
    h *= m;
    h ^= h >>> 15;
    return h;
  }

  /** Entry point for tests: {@code java ... Identity <query> <partition> <batch> [key]}. */
  public static void main(String[] args) {
    long[] id = producer(args[0], Integer.parseInt(args[1]), Long.parseLong(args[2]));
    System.out.println(id[0] + " " + id[1]);
    if (args.length > 3) System.out.println(murmur2(args[3].getBytes(StandardCharsets.UTF_8)));
  }
}
