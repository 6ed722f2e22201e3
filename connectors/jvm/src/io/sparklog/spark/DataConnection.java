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

/** One TCP connection to a broker's data listener (brokers/server/data_listener.py); one
 *  request at a time. */
final class DataConnection implements Closeable {
  static final int METADATA = 1, LIST_OFFSETS = 2, FETCH = 3, PRODUCE = 4;
  final String host;
  final int port;
  private final Socket socket;
  private final DataInputStream in;
  private final OutputStream out;
  private int correlation;

  DataConnection(String host, int port, int timeoutMs) throws IOException {
    this.host = host;
    this.port = port;
    socket = new Socket();
    socket.setTcpNoDelay(true);
    socket.setReceiveBufferSize(4 << 20);
    socket.connect(new InetSocketAddress(host, port), 10_000);
    socket.setSoTimeout(timeoutMs);
    in = new DataInputStream(socket.getInputStream());
    out = new BufferedOutputStream(socket.getOutputStream(), 1 << 16);
  }

  /** Send {@code payload} as request {@code api}; the answer positioned after its error
   *  fields.  Whole-request errors raise {@link SparkLogException}; IO errors IOException. */
  synchronized ByteBuffer call(int api, Buf payload) throws IOException {
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
  }

  private static void putInt(byte[] b, int at, int v) {
    for (int i = 0; i < 4; i++) b[at + i] = (byte) (v >> (8 * i));
  }

  @Override
  public void close() {
    try {
      socket.close();
    } catch (IOException ignored) {
      // closing
    }
  }
}
