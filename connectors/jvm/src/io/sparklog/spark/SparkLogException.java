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

  public static SparkLogException of(int code, String message) {
    return new SparkLogException(ErrorCodes.name(code), code, message);
  }

  public boolean retriable() {
    return ErrorCodes.retriable(code);
  }
}
