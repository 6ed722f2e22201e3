package io.sparklog.spark;

/** spark_log.errors.ErrorCode numbers the connector acts on (the wire carries the number). */
final class ErrorCodes {
  static final int UNKNOWN_TOPIC_OR_PARTITION = 8;
  static final int NOT_LEADER = 9;
  static final int OFFSET_OUT_OF_RANGE = 11;
  static final int NOT_ENOUGH_REPLICAS = 15;
  static final int THROTTLED = 18;
  static final int BROKER_NOT_AVAILABLE = 19;
  static final int REQUEST_TIMEOUT = 20;
  static final int NOT_ENOUGH_REPLICAS_AFTER_APPEND = 90;
  static final int OFFSET_NOT_AVAILABLE = 91;
  static final int TIER_UNAVAILABLE = 122;
  /** KIP-320: the request's leader epoch is older than the replica's (refresh metadata, ask again). */
  static final int FENCED_LEADER_EPOCH = 145;
  /** KIP-320: the request's leader epoch is newer than the replica's (the broker is behind, or a
   *  deposed leader cut off from the controller: refresh metadata, ask again). */
  static final int UNKNOWN_LEADER_EPOCH = 146;

  private ErrorCodes() {}

  static boolean retriable(int code) {
    switch (code) {
      case UNKNOWN_TOPIC_OR_PARTITION: case NOT_LEADER: case NOT_ENOUGH_REPLICAS: case THROTTLED:
      case BROKER_NOT_AVAILABLE: case REQUEST_TIMEOUT: case NOT_ENOUGH_REPLICAS_AFTER_APPEND:
      case OFFSET_NOT_AVAILABLE: case FENCED_LEADER_EPOCH: case UNKNOWN_LEADER_EPOCH: case 10: case 31: case 40: case 41: case 42: case 107:
        return true;
      default:
        return false;
    }
  }

  static String name(int code) {
    switch (code) {
      case 2: return "InvalidRequestError";
      case 3: return "InvalidConfigError";
      case 8: return "UnknownTopicOrPartitionError";
      case 9: return "NotLeaderError";
      case 11: return "OffsetOutOfRangeError";
      case 12: return "RecordTooLargeError";
      case 13: return "CorruptRecordError";
      case 14: return "SchemaMismatchError";
      case 15: return "NotEnoughReplicasError";
      case 16: return "FencedEpochError";
      case 17: return "UnauthorizedError";
      case 19: return "BrokerNotAvailableError";
      case 20: return "RequestTimeoutError";
      case 21: return "StorageError";
      case 22: return "DuplicateSequenceError";
      case 23: return "OutOfOrderSequenceError";
      case 25: return "NoSchemaError";
      case 30: return "MissingKeyError";
      case 90: return "NotEnoughReplicasAfterAppendError";
      case 91: return "OffsetNotAvailableError";
      case 100: return "AuthenticationError";
      case 101: return "TopicAuthorizationError";
      case 107: return "SessionExpiredError";
      case 120: return "TieringNotEnabledError";
      case 121: return "TierOffsetInvalidError";
      case TIER_UNAVAILABLE: return "TierUnavailableError";
      case FENCED_LEADER_EPOCH: return "FencedLeaderEpochError";
      case UNKNOWN_LEADER_EPOCH: return "UnknownLeaderEpochError";
      default: return "SparkLogError(" + code + ")";
    }
  }
}
