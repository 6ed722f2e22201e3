package io.sparklog.spark;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;

import org.sparkproject.connect.grpc.CallOptions;
import org.sparkproject.connect.grpc.Channel;
import org.sparkproject.connect.grpc.ChannelCredentials;
import org.sparkproject.connect.grpc.ClientInterceptors;
import org.sparkproject.connect.grpc.InsecureChannelCredentials;
import org.sparkproject.connect.grpc.ManagedChannel;
import org.sparkproject.connect.grpc.Metadata;
import org.sparkproject.connect.grpc.MethodDescriptor;
import org.sparkproject.connect.grpc.StatusRuntimeException;
import org.sparkproject.connect.grpc.TlsChannelCredentials;
import org.sparkproject.connect.grpc.netty.NettyChannelBuilder;
import org.sparkproject.connect.grpc.stub.ClientCalls;
import org.sparkproject.connect.grpc.stub.MetadataUtils;

/** The few gRPC calls the JVM connector makes to the brokers' gRPC listeners (DataListener.Describe,
 *  Security.ScramStart/ScramFinish, Admin.CreateTopic) through the gRPC runtime shaded in pyspark's
 *  spark-connect jar, with messages encoded by hand (a handful of string/int fields) and the
 *  same TLS and SCRAM settings as the data listener. */
final class Grpc {
  private Grpc() {}

  static final Metadata.Key<String> SESSION = Metadata.Key.of("spark-log-session", Metadata.ASCII_STRING_MARSHALLER);
  static final Metadata.Key<String> CLIENT_ID = Metadata.Key.of("spark-log-client-id", Metadata.ASCII_STRING_MARSHALLER);
  /** SCRAM session tokens per (gRPC address, security): valid on that broker only. */
  private static final Map<String, String> SESSIONS = new ConcurrentHashMap<>();

  static final MethodDescriptor.Marshaller<byte[]> RAW = new MethodDescriptor.Marshaller<byte[]>() {
    @Override public InputStream stream(byte[] value) { return new ByteArrayInputStream(value); }

    @Override public byte[] parse(InputStream stream) {
      try {
        return stream.readAllBytes();
      } catch (IOException e) {
        throw new RuntimeException(e);
      }
    }
  };

  static MethodDescriptor<byte[], byte[]> method(String name) {
    return MethodDescriptor.<byte[], byte[]>newBuilder().setType(MethodDescriptor.MethodType.UNARY)
        .setFullMethodName(name).setRequestMarshaller(RAW).setResponseMarshaller(RAW).build();
  }

  static ManagedChannel channel(String address, Security security) throws IOException {
    ChannelCredentials credentials = InsecureChannelCredentials.create();
    if (security.tls()) {
      TlsChannelCredentials.Builder b = TlsChannelCredentials.newBuilder();
      byte[] ca = security.caPem != null ? security.caPem.getBytes(StandardCharsets.UTF_8)
          : security.caFile != null ? Files.readAllBytes(Paths.get(security.caFile)) : null;
      if (ca != null) b.trustManager(new ByteArrayInputStream(ca));
      if (security.certFile != null || security.certPem != null) {
        byte[] chain = security.certPem != null ? security.certPem.getBytes(StandardCharsets.UTF_8)
            : Files.readAllBytes(Paths.get(security.certFile));
        byte[] key = security.keyPem != null ? security.keyPem.getBytes(StandardCharsets.UTF_8)
            : Files.readAllBytes(Paths.get(security.keyFile));
        if (security.keyPassword != null) b.keyManager(new ByteArrayInputStream(chain), new ByteArrayInputStream(key), security.keyPassword);
        else b.keyManager(new ByteArrayInputStream(chain), new ByteArrayInputStream(key));
      }
      credentials = b.build();
    }
    return NettyChannelBuilder.forTarget(address, credentials).build();
  }

  /** {@code channel} with the SCRAM session (SASL_SSL: obtained once per broker address) and client id. */
  static Channel authenticated(ManagedChannel channel, Security security) throws IOException {
    Metadata headers = new Metadata();
    if (!security.clientId.isEmpty()) headers.put(CLIENT_ID, security.clientId);
    if (security.sasl()) {
      String key = channel.authority() + "|" + security.key();
      String token = SESSIONS.get(key);
      if (token == null) {
        token = login(channel, security);
        SESSIONS.put(key, token);
      }
      headers.put(SESSION, token);
    }
    return ClientInterceptors.intercept(channel, MetadataUtils.newAttachHeadersInterceptor(headers));
  }

  static void forget(ManagedChannel channel, Security security) {
    SESSIONS.remove(channel.authority() + "|" + security.key());
  }

  private static String login(Channel channel, Security security) throws IOException {
    String[] token = new String[1];
    Scram.run(security, clientFirst -> {
      List<Object[]> f = fields(unary(channel, "spark_log.security.v1.Security/ScramStart", new Proto().str(1, clientFirst).bytes()));
      return new String[] {string(f, 2), string(f, 1)};
    }, (exchange, clientFinal) -> {
      List<Object[]> f = fields(unary(channel, "spark_log.security.v1.Security/ScramFinish",
          new Proto().str(1, exchange).str(2, clientFinal).bytes()));
      token[0] = string(f, 2);
      return string(f, 1);
    });
    return token[0];
  }

  /** One unary call; a broker's typed error (status description "CODE: message" or the
   *  spark-log error trailer) becomes a SparkLogException. */
  static byte[] unary(Channel channel, String method, byte[] request) {
    try {
      return ClientCalls.blockingUnaryCall(channel, method(method), CallOptions.DEFAULT.withDeadlineAfter(30, TimeUnit.SECONDS),
          request);
    } catch (StatusRuntimeException e) {
      throw Grpc.error(e);
    }
  }

  static final Metadata.Key<String> ERROR_CODE = Metadata.Key.of("spark-log-error-code", Metadata.ASCII_STRING_MARSHALLER);

  static SparkLogException error(StatusRuntimeException e) {
    Metadata trailers = e.getTrailers();
    String code = trailers == null ? null : trailers.get(ERROR_CODE);
    String message = e.getStatus().getDescription() == null ? e.getStatus().getCode().toString() : e.getStatus().getDescription();
    if (code != null) {
      try {
        return SparkLogException.of(Integer.parseInt(code.trim()), message);
      } catch (NumberFormatException ignored) {
        // fall through
      }
    }
    switch (e.getStatus().getCode()) {
      case UNAUTHENTICATED: return new SparkLogException("AuthenticationError", 100, message);
      case PERMISSION_DENIED: return new SparkLogException("UnauthorizedError", 17, message);
      case UNAVAILABLE: case DEADLINE_EXCEEDED:
        return new SparkLogException("BrokerNotAvailableError", ErrorCodes.BROKER_NOT_AVAILABLE, message);
      default: return new SparkLogException("SparkLogError", 1, message);
    }
  }

  // --- protobuf, by hand -------------------------------------------------------------------

  static final class Proto {
    private final ByteArrayOutputStream out = new ByteArrayOutputStream();

    Proto varint(long v) {
      while ((v & ~0x7FL) != 0) {
        out.write((int) ((v & 0x7F) | 0x80));
        v >>>= 7;
      }
      out.write((int) v);
      return this;
    }

    Proto tag(int field, int wire) { return varint(((long) field << 3) | wire); }

    Proto i64(int field, long v) { return tag(field, 0).varint(v); }

    Proto bool(int field, boolean v) { return v ? tag(field, 0).varint(1) : this; }

    Proto bytes(int field, byte[] b) {
      tag(field, 2).varint(b.length);
      out.write(b, 0, b.length);
      return this;
    }

    Proto str(int field, String s) { return bytes(field, s.getBytes(StandardCharsets.UTF_8)); }

    byte[] bytes() { return out.toByteArray(); }
  }

  /** (field, value) pairs: Long for varints, byte[] for length-delimited fields. */
  static List<Object[]> fields(byte[] b) throws IOException {
    List<Object[]> out = new ArrayList<>();
    int[] at = {0};
    while (at[0] < b.length) {
      long key = varint(b, at);
      int field = (int) (key >>> 3), wire = (int) (key & 7);
      if (wire == 0) {
        out.add(new Object[] {field, varint(b, at)});
      } else if (wire == 2) {
        int n = (int) varint(b, at);
        byte[] v = java.util.Arrays.copyOfRange(b, at[0], at[0] + n);
        at[0] += n;
        out.add(new Object[] {field, v});
      } else if (wire == 1) {
        at[0] += 8;
      } else if (wire == 5) {
        at[0] += 4;
      } else {
        throw new IOException("unexpected protobuf wire type " + wire);
      }
    }
    return out;
  }

  static String string(List<Object[]> fields, int field) {
    for (Object[] f : fields) if ((int) f[0] == field && f[1] instanceof byte[]) return new String((byte[]) f[1], StandardCharsets.UTF_8);
    return "";
  }

  static long number(List<Object[]> fields, int field) {
    for (Object[] f : fields) if ((int) f[0] == field && f[1] instanceof Long) return (Long) f[1];
    return 0;
  }

  private static long varint(byte[] b, int[] at) {
    long value = 0;
    int shift = 0;
    while (true) {
      int x = b[at[0]++] & 0xFF;
      value |= (long) (x & 0x7F) << shift;
      if ((x & 0x80) == 0) return value;
      shift += 7;
    }
  }
}
