package io.sparklog.spark;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.security.MessageDigest;
import java.security.SecureRandom;
import java.text.Normalizer;
import java.util.Base64;

import javax.crypto.Mac;
import javax.crypto.SecretKeyFactory;
import javax.crypto.spec.PBEKeySpec;
import javax.crypto.spec.SecretKeySpec;

/** The client side of SCRAM-SHA-256 (spark_log/scram.py; RFC 5802, gs2 header "n,,"), over
 *  whatever carries the two round trips: the data listener's SCRAM_START/SCRAM_FINISH, or
 *  the gRPC Security.ScramStart/ScramFinish.  Checks the server's signature.  Nothing here
 *  puts the password or a proof in an error. */
final class Scram {
  private Scram() {}

  interface Start { String[] call(String clientFirst) throws IOException; }  // {exchange id, server-first}

  interface Finish { String call(String exchange, String clientFinal) throws IOException; }  // server-final

  static void run(Security s, Start start, Finish finish) throws IOException {
    byte[] nonceBytes = new byte[24];
    new SecureRandom().nextBytes(nonceBytes);
    String clientNonce = Base64.getUrlEncoder().withoutPadding().encodeToString(nonceBytes);
    String bare = "n=" + s.username.replace("=", "=3D").replace(",", "=2C") + ",r=" + clientNonce;
    String[] first = start.call("n,," + bare);
    String exchange = first[0], serverFirst = first[1];
    String nonce = null, salt = null;
    int iterations = 0;
    for (String part : serverFirst.split(",")) {
      if (part.startsWith("r=")) nonce = part.substring(2);
      else if (part.startsWith("s=")) salt = part.substring(2);
      else if (part.startsWith("i=")) {
        try {
          iterations = Integer.parseInt(part.substring(2));
        } catch (NumberFormatException e) {
          iterations = 0;
        }
      }
    }
    if (nonce == null || !nonce.startsWith(clientNonce) || nonce.length() <= clientNonce.length() || salt == null
        || iterations < 4096 || iterations > 16384) {
      throw new SparkLogException("AuthenticationError", 100, "SCRAM: the broker's first message is not valid");
    }
    try {
      String password = Normalizer.normalize(s.password, Normalizer.Form.NFKC);
      byte[] salted = SecretKeyFactory.getInstance("PBKDF2WithHmacSHA256")
          .generateSecret(new PBEKeySpec(password.toCharArray(), Base64.getDecoder().decode(salt), iterations, 256)).getEncoded();
      byte[] clientKey = hmac(salted, "Client Key".getBytes(StandardCharsets.UTF_8));
      byte[] storedKey = MessageDigest.getInstance("SHA-256").digest(clientKey);
      String withoutProof = "c=biws,r=" + nonce;
      byte[] auth = (bare + "," + serverFirst + "," + withoutProof).getBytes(StandardCharsets.UTF_8);
      byte[] signature = hmac(storedKey, auth);
      byte[] proof = new byte[clientKey.length];
      for (int i = 0; i < proof.length; i++) proof[i] = (byte) (clientKey[i] ^ signature[i]);
      String serverFinal = finish.call(exchange, withoutProof + ",p=" + Base64.getEncoder().encodeToString(proof));
      byte[] serverKey = hmac(salted, "Server Key".getBytes(StandardCharsets.UTF_8));
      String expected = "v=" + Base64.getEncoder().encodeToString(hmac(serverKey, auth));
      if (!MessageDigest.isEqual(expected.getBytes(StandardCharsets.UTF_8), serverFinal.getBytes(StandardCharsets.UTF_8))) {
        throw new SparkLogException("AuthenticationError", 100, "SCRAM: the broker's signature is wrong (it does not hold "
            + "this user's credential)");
      }
    } catch (GeneralSecurityException | IllegalArgumentException e) {
      throw new SparkLogException("AuthenticationError", 100, "SCRAM: " + e.getClass().getSimpleName());
    }
  }

  private static byte[] hmac(byte[] key, byte[] message) throws GeneralSecurityException {
    Mac mac = Mac.getInstance("HmacSHA256");
    mac.init(new SecretKeySpec(key, "HmacSHA256"));
    return mac.doFinal(message);
  }
}
