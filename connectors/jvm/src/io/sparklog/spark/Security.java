package io.sparklog.spark;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.Serializable;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.security.KeyFactory;
import java.security.KeyStore;
import java.security.MessageDigest;
import java.security.PrivateKey;
import java.security.SecureRandom;
import java.security.cert.Certificate;
import java.security.cert.CertificateFactory;
import java.security.spec.PKCS8EncodedKeySpec;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Collection;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import javax.crypto.EncryptedPrivateKeyInfo;
import javax.crypto.SecretKeyFactory;
import javax.crypto.spec.PBEKeySpec;
import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLSocketFactory;
import javax.net.ssl.TrustManagerFactory;

/** The client security options (Kafka's names with the {@code kafka.} prefix, as
 *  connectors/security_options.py and spark_log.ClientSecurity.from_properties read them)
 *  for the data listener: TLS through Java's SSLSocket with the PEM CA, certificate chain and
 *  key converted in memory, and SCRAM-SHA-256 (the broker's Security.ScramStart/ScramFinish
 *  exchange, run on the data connection itself).  Secrets never appear in toString or errors. */
final class Security implements Serializable {
  static final Security PLAINTEXT = new Security();

  String protocol = "PLAINTEXT";
  String caFile, certFile, keyFile, caPem, certPem, keyPem;
  String keyPassword, mechanism = "SCRAM-SHA-256", username, password;
  String clientId = "";

  private static final Map<String, SSLSocketFactory> FACTORIES = new ConcurrentHashMap<>();

  boolean tls() { return !protocol.equals("PLAINTEXT"); }

  boolean sasl() { return protocol.equals("SASL_SSL"); }

  /** Pool key: connections are shared only between equal settings (the password by digest). */
  String key() {
    return protocol + "|" + caFile + "|" + certFile + "|" + keyFile + "|" + digest(caPem) + "|" + digest(certPem) + "|"
        + digest(keyPem) + "|" + username + "|" + digest(password);
  }

  @Override public String toString() { return "Security(" + protocol + (username != null ? ", user " + username : "") + ")"; }

  private static String digest(String s) {
    if (s == null) return "-";
    try {
      return Base64.getEncoder().encodeToString(MessageDigest.getInstance("SHA-256").digest(s.getBytes(StandardCharsets.UTF_8)));
    } catch (Exception e) {
      throw new IllegalStateException(e);
    }
  }

  /** The security settings among {@code raw} options (kafka.security.*, kafka.ssl.*, kafka.sasl.*,
   *  kafka.client.id); InvalidConfigError names a wrong or unknown one, never its value. */
  static Security parse(Map<String, String> raw) {
    Security s = new Security();
    boolean any = false, keyFromKeystore = false;
    for (Map.Entry<String, String> e : new TreeMap<>(raw).entrySet()) {
      String name = e.getKey().toLowerCase(Locale.ROOT);
      if (!name.startsWith("kafka.")) continue;
      String key = name.substring("kafka.".length());
      String value = e.getValue() == null ? "" : e.getValue().trim();
      if (key.equals("client.id")) {
        s.clientId = value;
        continue;
      }
      if (key.equals("bootstrap.servers")) continue;
      if (!key.startsWith("security.") && !key.startsWith("ssl.") && !key.startsWith("sasl.")) {
        throw SparkLogException.config(e.getKey(), "unknown client option (the kafka. prefix takes security options and "
            + "kafka.client.id)");
      }
      any = true;
      switch (key) {
        case "security.protocol": s.protocol = value.toUpperCase(Locale.ROOT); break;
        case "ssl.ca.location": case "ssl.truststore.location": s.caFile = value; break;
        case "ssl.truststore.certificates": s.caPem = value; break;
        case "ssl.certificate.location": s.certFile = value; break;
        case "ssl.keystore.location": s.certFile = value; keyFromKeystore = true; break;
        case "ssl.keystore.certificate.chain": s.certPem = value; break;
        case "ssl.key.location": s.keyFile = value; break;
        case "ssl.keystore.key": s.keyPem = value; break;
        case "ssl.key.password": case "ssl.keystore.password": s.keyPassword = e.getValue(); break;
        case "ssl.truststore.type": case "ssl.keystore.type":
          if (!value.equalsIgnoreCase("PEM")) {
            throw SparkLogException.config(e.getKey(), "must be PEM (JKS and PKCS12 stores are not read)");
          }
          break;
        case "ssl.endpoint.identification.algorithm":
          if (!value.equalsIgnoreCase("https")) {
            throw SparkLogException.config(e.getKey(), "must be https: the broker's host name is always checked");
          }
          break;
        case "sasl.mechanism": s.mechanism = value.toUpperCase(Locale.ROOT); break;
        case "sasl.jaas.config": {
          String[] up = jaas(e.getValue(), e.getKey());
          s.username = up[0];
          s.password = up[1];
          break;
        }
        case "sasl.username": s.username = value; break;
        case "sasl.password": s.password = e.getValue(); break;
        default: throw SparkLogException.config(e.getKey(), "unknown security setting");
      }
    }
    if (!any) {
      Security p = new Security();
      p.clientId = s.clientId;
      return p;
    }
    if (keyFromKeystore && s.keyFile == null && s.keyPem == null) s.keyFile = s.certFile;
    if (!s.protocol.equals("PLAINTEXT") && !s.protocol.equals("SSL") && !s.protocol.equals("SASL_SSL")) {
      throw SparkLogException.config("kafka.security.protocol", "must be PLAINTEXT, SSL or SASL_SSL (SASL_PLAINTEXT is "
          + "refused: it would send credentials unencrypted)");
    }
    if (s.sasl()) {
      if (!s.mechanism.equals("SCRAM-SHA-256")) {
        throw SparkLogException.config("kafka.sasl.mechanism", "must be SCRAM-SHA-256 (PLAIN, GSSAPI and OAUTHBEARER are "
            + "not supported)");
      }
      if (s.username == null || s.password == null) {
        throw SparkLogException.config("kafka.sasl.jaas.config", "SASL_SSL needs a username and password "
            + "(kafka.sasl.jaas.config or kafka.sasl.username/kafka.sasl.password)");
      }
    } else if (s.username != null || s.password != null) {
      throw SparkLogException.config("kafka.sasl.jaas.config", "SASL credentials need kafka.security.protocol=SASL_SSL");
    }
    if (!s.tls() && (s.caFile != null || s.certFile != null || s.caPem != null || s.certPem != null)) {
      throw SparkLogException.config("kafka.security.protocol", "TLS files are given but the protocol is PLAINTEXT");
    }
    if ((s.certFile != null || s.certPem != null) != (s.keyFile != null || s.keyPem != null)) {
      throw SparkLogException.config("kafka.ssl.key.location", "a client certificate needs its private key and the other "
          + "way round");
    }
    return s;
  }

  private static String[] jaas(String text, String option) {
    Matcher m = Pattern.compile("^\\s*(\\S+)\\s+required\\s*(.*?);?\\s*$", Pattern.DOTALL).matcher(text == null ? "" : text);
    if (!m.matches() || !m.group(1).endsWith("ScramLoginModule")) {
      throw SparkLogException.config(option, "must be 'org.apache.kafka.common.security.scram.ScramLoginModule required "
          + "username=\"...\" password=\"...\";'");
    }
    String user = null, pass = null;
    Matcher kv = Pattern.compile("(\\w+)\\s*=\\s*\"((?:[^\"\\\\]|\\\\.)*)\"").matcher(m.group(2));
    while (kv.find()) {
      String v = kv.group(2).replaceAll("\\\\(.)", "$1");
      if (kv.group(1).equals("username")) user = v;
      else if (kv.group(1).equals("password")) pass = v;
    }
    if (user == null || pass == null) throw SparkLogException.config(option, "needs username=\"...\" and password=\"...\"");
    return new String[] {user, pass};
  }

  private static byte[] read(String path, String option) {
    try {
      return Files.readAllBytes(Paths.get(path));
    } catch (IOException e) {
      throw SparkLogException.config(option, "cannot read " + path + ": " + e.getClass().getSimpleName());
    }
  }

  /** The TLS socket factory of these settings (built once per JVM and settings). */
  SSLSocketFactory socketFactory() {
    return FACTORIES.computeIfAbsent(key(), k -> buildFactory());
  }

  private SSLSocketFactory buildFactory() {
    try {
      TrustManagerFactory tmf = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
      byte[] ca = caPem != null ? caPem.getBytes(StandardCharsets.UTF_8) : caFile != null ? read(caFile, "kafka.ssl.truststore.location") : null;
      if (ca != null) {
        KeyStore trust = KeyStore.getInstance(KeyStore.getDefaultType());
        trust.load(null, null);
        int i = 0;
        for (Certificate c : certificates(ca, "kafka.ssl.truststore.location")) trust.setCertificateEntry("ca-" + i++, c);
        tmf.init(trust);
      } else {
        tmf.init((KeyStore) null);  // the JVM's roots
      }
      KeyManagerFactory kmf = null;
      if (certFile != null || certPem != null) {
        byte[] chain = certPem != null ? certPem.getBytes(StandardCharsets.UTF_8) : read(certFile, "kafka.ssl.keystore.location");
        byte[] keyBytes = keyPem != null ? keyPem.getBytes(StandardCharsets.UTF_8) : read(keyFile, "kafka.ssl.key.location");
        PrivateKey key = privateKey(new String(keyBytes, StandardCharsets.US_ASCII));
        KeyStore store = KeyStore.getInstance(KeyStore.getDefaultType());
        store.load(null, null);
        char[] none = new char[0];
        store.setKeyEntry("client", key, none, certificates(chain, "kafka.ssl.keystore.location").toArray(new Certificate[0]));
        kmf = KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm());
        kmf.init(store, none);
      }
      SSLContext ctx = SSLContext.getInstance("TLS");
      ctx.init(kmf == null ? null : kmf.getKeyManagers(), tmf.getTrustManagers(), new SecureRandom());
      return ctx.getSocketFactory();
    } catch (SparkLogException e) {
      throw e;
    } catch (Exception e) {
      throw SparkLogException.config("kafka.security.protocol", "cannot set up TLS from the given PEM files: "
          + e.getClass().getSimpleName());
    }
  }

  private static Collection<Certificate> certificates(byte[] pem, String option) {
    try {
      Collection<? extends Certificate> out = CertificateFactory.getInstance("X.509").generateCertificates(new ByteArrayInputStream(pem));
      if (out.isEmpty()) throw new IOException("no certificate");
      return new ArrayList<>(out);
    } catch (Exception e) {
      throw SparkLogException.config(option, "holds no PEM certificate");
    }
  }

  private PrivateKey privateKey(String pem) throws Exception {
    Matcher m = Pattern.compile("-----BEGIN ([A-Z ]*PRIVATE KEY)-----(.*?)-----END \\1-----", Pattern.DOTALL).matcher(pem);
    if (!m.find()) throw SparkLogException.config("kafka.ssl.key.location", "holds no PEM private key");
    String kind = m.group(1);
    byte[] der = Base64.getMimeDecoder().decode(m.group(2).trim());
    PKCS8EncodedKeySpec spec;
    if (kind.equals("PRIVATE KEY")) {
      spec = new PKCS8EncodedKeySpec(der);
    } else if (kind.equals("ENCRYPTED PRIVATE KEY")) {
      if (keyPassword == null) throw SparkLogException.config("kafka.ssl.key.password", "the private key is encrypted");
      EncryptedPrivateKeyInfo info = new EncryptedPrivateKeyInfo(der);
      SecretKeyFactory f = SecretKeyFactory.getInstance(info.getAlgName());
      spec = info.getKeySpec(f.generateSecret(new PBEKeySpec(keyPassword.toCharArray())));
    } else {
      throw SparkLogException.config("kafka.ssl.key.location", "holds a '" + kind + "' key; the JVM implementation reads "
          + "PKCS#8 keys (BEGIN PRIVATE KEY); convert it with `openssl pkcs8 -topk8 -nocrypt`");
    }
    List<String> algorithms = List.of("EC", "RSA", "Ed25519");
    for (String a : algorithms) {
      try {
        return KeyFactory.getInstance(a).generatePrivate(spec);
      } catch (Exception ignored) {
        // try the next
      }
    }
    throw SparkLogException.config("kafka.ssl.key.location", "holds a private key of an unsupported algorithm");
  }
}
