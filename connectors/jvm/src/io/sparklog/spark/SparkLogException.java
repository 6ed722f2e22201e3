package io.sparklog.spark;

/** A typed error of the spark-log JVM connector: {@code code} is spark_log.errors.ErrorCode
 *  (0 for errors raised by the connector itself, with {@code kind} naming the Python class). */
public class SparkLogException extends RuntimeException {
  public final int code;
  public final String kind;

  public SparkLogException(String kind, int code, String message) {
    super(kind + ": " + message);
    this.kind = kind;
    this.code = code;
  }

  public static SparkLogException config(String option, String message) {
    return new SparkLogException("InvalidConfigError", 0, "option '" + option + "': " + message);
  }

  /** The broker's typed error {@code code}; security refusals carry the code's name too
   *  (TOPIC_AUTHORIZATION_FAILED, ...), as the Python connector's errors do. */
  public static SparkLogException of(int code, String message) {
    String name = code == 100 ? "AUTHENTICATION_FAILED" : code == 101 ? "TOPIC_AUTHORIZATION_FAILED"
        : code == 17 ? "UNAUTHORIZED" : code == 107 ? "SESSION_EXPIRED" : null;
    return new SparkLogException(ErrorCodes.name(code), code, name == null ? message : name + ": " + message);
  }

  public boolean retriable() {
    return ErrorCodes.retriable(code);
  }
}
