package io.sparklog.spark;

import java.io.BufferedOutputStream;
import java.io.Closeable;
import java.io.DataInputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Deque;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedDeque;

import javax.net.ssl.SSLParameters;
import javax.net.ssl.SSLSocket;

/** One TCP (or TLS) connection to a broker's data listener (brokers/server/data_listener.py);
 *  one request at a time.  Connections are pooled per executor JVM ({@link #borrow} /
 *  {@link #giveBack}): a task takes an idle connection to the broker it needs and gives it
 *  back when it closes, so a task costs no TCP/TLS handshake or SCRAM exchange once its JVM
 *  has talked to that broker. */
final class DataConnection implements Closeable {
  static final int METADATA = 1, LIST_OFFSETS = 2, FETCH = 3, PRODUCE = 4, SCRAM_START = 5, SCRAM_FINISH = 6,
      PRODUCE_TXN = 7, FETCH_TIER = 8;
  /** LIST_OFFSETS, FETCH and FETCH_TIER with the client's leader epoch after each partition number
   *  (KIP-320; brokers/server/data_listener.py's docstring): what this connector sends. */
  static final int LIST_OFFSETS_V2 = 11, FETCH_V2 = 12, FETCH_TIER_V2 = 13;
  /** METADATA with each topic's id: leader epochs are remembered per topic id (a topic created again
   *  under the same name starts over). */
  static final int METADATA_V2 = 14;
  /** Idle connections older than this are closed rather than reused. */
  static final long MAX_IDLE_MS = 60_000;
  static final int MAX_IDLE_PER_BROKER = 8;
  private static final Map<String, Deque<DataConnection>> IDLE = new ConcurrentHashMap<>();
  static final java.util.concurrent.atomic.AtomicLong OPENED = new java.util.concurrent.atomic.AtomicLong();

  final String host;
  final int port;
  final String key;
  private final Socket socket;
  private final DataInputStream in;
  private final OutputStream out;
  private int correlation;
  private final byte[] chunk = new byte[1 << 16];
  private volatile boolean broken;
  private long idleSince;

  DataConnection(String host, int port, int timeoutMs, Security security) throws IOException {
    this.host = host;
    this.port = port;
    this.key = poolKey(host, port, security);
    Socket plain = new Socket();
    plain.setTcpNoDelay(true);
    plain.setReceiveBufferSize(4 << 20);
    plain.connect(new InetSocketAddress(host, port), 10_000);
    plain.setSoTimeout(timeoutMs);
    if (security.tls()) {
      SSLSocket tls;
      try {
        tls = (SSLSocket) security.socketFactory().createSocket(plain, host, port, true);
        SSLParameters params = tls.getSSLParameters();
        params.setEndpointIdentificationAlgorithm("HTTPS");  // the broker's certificate must name this host
        tls.setSSLParameters(params);
        tls.startHandshake();
      } catch (IOException e) {
        plain.close();
        throw new SparkLogException("AuthenticationError", 100, "TLS handshake with the data listener at " + host + ":"
            + port + " failed: " + e.getMessage());
      }
      socket = tls;
    } else {
      socket = plain;
    }
    in = new DataInputStream(new java.io.BufferedInputStream(socket.getInputStream(), 1 << 16));
    out = new BufferedOutputStream(socket.getOutputStream(), 1 << 16);
    OPENED.incrementAndGet();
    try {
      if (security.sasl()) scram(security);
    } catch (IOException | RuntimeException e) {
      close();
      throw e;
    }
  }

  private static String poolKey(String host, int port, Security security) {
    return host + ":" + port + "|" + security.key();
  }

  /** An idle pooled connection to host:port with these settings, else a new one. */
  static DataConnection borrow(String host, int port, int timeoutMs, Security security) throws IOException {
    Deque<DataConnection> idle = IDLE.get(poolKey(host, port, security));
    if (idle != null) {
      long now = System.currentTimeMillis();
      DataConnection c;
      while ((c = idle.pollFirst()) != null) {
        if (!c.broken && now - c.idleSince < MAX_IDLE_MS) return c;
        c.close();
      }
    }
    return new DataConnection(host, port, timeoutMs, security);
  }

  /** Back to the pool (closed instead when broken or the pool is full). */
  static void giveBack(DataConnection c) {
    if (c.broken) return;
    Deque<DataConnection> idle = IDLE.computeIfAbsent(c.key, k -> new ConcurrentLinkedDeque<>());
    if (idle.size() >= MAX_IDLE_PER_BROKER) {
      c.close();
      return;
    }
    c.idleSince = System.currentTimeMillis();
    idle.offerFirst(c);
  }

  boolean broken() { return broken; }

  /** Send {@code payload} as request {@code api}; the answer positioned after its error
   *  fields.  Whole-request errors raise {@link SparkLogException}; IO errors IOException
   *  (and the connection is then unusable). */
  synchronized ByteBuffer call(int api, Buf payload) throws IOException {
    try {
      int id = ++correlation;
      int length = 5 + payload.size();
      byte[] head = new byte[9];
      putInt(head, 0, length);
      head[4] = (byte) api;
      putInt(head, 5, id);
      out.write(head);
      out.write(payload.array(), 0, payload.size());
      out.flush();
      int size = Integer.reverseBytes(in.readInt());
      byte[] answer = new byte[size];
      in.readFully(answer);
      ByteBuffer buf = ByteBuffer.wrap(answer).order(ByteOrder.LITTLE_ENDIAN);
      int got = buf.getInt();
      if (got != id) throw new IOException("data listener answered request " + got + ", expected " + id);
      short code = buf.getShort();
      String message = Buf.str(buf);
      if (code != 0) throw SparkLogException.of(code, message);
      return buf;
    } catch (IOException e) {
      close();
      throw e;
    }
  }

  /** An answer read into off-heap memory: {@code buf} (the caller closes it) and {@code view},
   *  a little-endian view of it positioned after the error fields. */
  static final class Direct implements AutoCloseable {
    final org.apache.arrow.memory.ArrowBuf buf;
    final ByteBuffer view;

    Direct(org.apache.arrow.memory.ArrowBuf buf, ByteBuffer view) { this.buf = buf; this.view = view; }

    @Override public void close() { buf.close(); }
  }

  /** As {@link #call}, but the answer goes from the socket into an ArrowBuf of {@code allocator}
   *  through a small reused chunk (no answer-sized heap array: the stored frames' Arrow bodies
   *  are then sliced out of it without another copy). */
  synchronized Direct callDirect(int api, Buf payload, org.apache.arrow.memory.BufferAllocator allocator) throws IOException {
    org.apache.arrow.memory.ArrowBuf buf = null;
    try {
      int id = ++correlation;
      byte[] head = new byte[9];
      putInt(head, 0, 5 + payload.size());
      head[4] = (byte) api;
      putInt(head, 5, id);
      out.write(head);
      out.write(payload.array(), 0, payload.size());
      out.flush();
      int size = Integer.reverseBytes(in.readInt());
      buf = allocator.buffer(Math.max(size, 1));
      int got = 0;
      while (got < size) {
        int n = in.read(chunk, 0, Math.min(chunk.length, size - got));
        if (n < 0) throw new java.io.EOFException("data listener closed the connection mid-answer");
        buf.setBytes(got, chunk, 0, n);
        got += n;
      }
      buf.writerIndex(size);
      ByteBuffer view = buf.nioBuffer(0, size).order(ByteOrder.LITTLE_ENDIAN);
      int answered = view.getInt();
      if (answered != id) throw new IOException("data listener answered request " + answered + ", expected " + id);
      short code = view.getShort();
      String message = Buf.str(view);
      if (code != 0) throw SparkLogException.of(code, message);
      Direct d = new Direct(buf, view);
      buf = null;
      return d;
    } catch (IOException e) {
      close();
      throw e;
    } finally {
      if (buf != null) buf.close();
    }
  }

  private void scram(Security s) throws IOException {
    Scram.run(s, clientFirst -> {
      ByteBuffer r = call(SCRAM_START, new Buf().str(clientFirst));
      String exchange = Buf.str(r);
      return new String[] {exchange, Buf.str(r)};
    }, (exchange, clientFinal) -> Buf.str(call(SCRAM_FINISH, new Buf().str(exchange).str(clientFinal))));
  }

  private static void putInt(byte[] b, int at, int v) {
    for (int i = 0; i < 4; i++) b[at + i] = (byte) (v >> (8 * i));
  }

  @Override
  public void close() {
    broken = true;
    try {
      socket.close();
    } catch (IOException ignored) {
      // closing
    }
  }
}
