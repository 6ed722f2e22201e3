package io.sparklog.spark;

import java.io.IOException;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;

import org.sparkproject.connect.grpc.ManagedChannel;

/** Calls to a transactional id's coordinator (spark_log/proto/transactions.proto), as
 *  spark_log/_txn_client.py makes them: FindCoordinator on a bootstrap broker (cached per
 *  id), then the call on the coordinator's gRPC listener; a coordinator that moved, is
 *  loading or cannot be reached is found again, and CONCURRENT_TRANSACTIONS (the previous
 *  transaction's markers being written) is retried, until the deadline. */
final class Txn {
  private Txn() {}

  private static final String SERVICE = "spark_log.transactions.v1.TransactionCoordinator/";
  private static final Map<String, String> COORDINATORS = new ConcurrentHashMap<>();
  static final int COORDINATOR_NOT_AVAILABLE = 40, NOT_COORDINATOR = 41, COORDINATOR_LOAD_IN_PROGRESS = 42,
      CONCURRENT_TRANSACTIONS = 63;

  static List<Object[]> call(String bootstrap, Security security, String transactionalId, String method, byte[] body,
                             long deadlineMs) {
    return call(SERVICE, bootstrap, security, transactionalId, method, body, deadlineMs);
  }

  /** {@code method} at the coordinator of {@code id} for {@code service} (the transaction
   *  coordinator's, or the group coordinator's: both find theirs with FindCoordinator(id = 1)
   *  answering the address as field 2). */
  static List<Object[]> call(String service, String bootstrap, Security security, String id, String method, byte[] body,
                             long deadlineMs) {
    String transactionalId = id;
    long backoff = 20;
    while (true) {
      String key = service + "|" + bootstrap + "|" + transactionalId;
      try {
        String address = COORDINATORS.get(key);
        if (address == null) {
          byte[] found = Admin.onBootstrap(bootstrap, security, ch -> Grpc.unary(ch, service + "FindCoordinator",
              new Grpc.Proto().str(1, transactionalId).bytes()));
          address = Grpc.string(Grpc.fields(found), 2);
          COORDINATORS.put(key, address);
        }
        ManagedChannel channel = Grpc.channel(address, security);
        try {
          return Grpc.fields(Grpc.unary(Grpc.authenticated(channel, security), service + method, body));
        } finally {
          channel.shutdownNow();
          channel.awaitTermination(5, TimeUnit.SECONDS);
        }
      } catch (SparkLogException e) {
        boolean moved = e.code == COORDINATOR_NOT_AVAILABLE || e.code == NOT_COORDINATOR
            || e.code == ErrorCodes.BROKER_NOT_AVAILABLE;
        boolean wait = moved || e.code == COORDINATOR_LOAD_IN_PROGRESS || e.code == CONCURRENT_TRANSACTIONS;
        if (!wait || System.currentTimeMillis() + backoff > deadlineMs) throw e;
        if (moved) COORDINATORS.remove(key);
      } catch (IOException e) {
        COORDINATORS.remove(key);
        if (System.currentTimeMillis() + backoff > deadlineMs) {
          throw new SparkLogException("BrokerNotAvailableError", ErrorCodes.BROKER_NOT_AVAILABLE, e.toString());
        }
      } catch (InterruptedException e) {
        throw Interrupts.unchecked(e);
      }
      Cluster.sleep(backoff);
      backoff = Math.min(backoff * 2, 500);
    }
  }

  /** A write task joins batch {@code label}'s transaction of writer {@code run}: {producer id,
   *  epoch}, or null when that batch committed before (write nothing). */
  static long[] join(String bootstrap, Security security, String transactionalId, long label, String run, int timeoutMs) {
    List<Object[]> f = call(bootstrap, security, transactionalId, "JoinTxn", new Grpc.Proto().str(1, transactionalId)
        .i64(4, label).str(5, run).i64(6, timeoutMs).bytes(), System.currentTimeMillis() + 60_000);
    if (Grpc.number(f, 3) != 0) return null;
    return new long[] {Grpc.number(f, 1), Grpc.number(f, 2)};
  }

  static void addPartition(String bootstrap, Security security, String transactionalId, long producerId, int epoch,
                           String topic, int partition) {
    byte[] tp = new Grpc.Proto().str(1, topic).i64(2, partition).bytes();
    call(bootstrap, security, transactionalId, "AddPartitions", new Grpc.Proto().str(1, transactionalId).i64(2, producerId)
        .i64(3, epoch).bytes(4, tp).bytes(), System.currentTimeMillis() + 60_000);
  }

  /** The driver's commit (or abort) of batch {@code label}: only {@code participants} commit. */
  static void end(String bootstrap, Security security, String transactionalId, long label, String run, boolean commit,
                  List<Long> participants, long timeoutMs) {
    Grpc.Proto req = new Grpc.Proto().str(1, transactionalId).bool(4, commit).i64(5, label);
    for (long p : participants) req.i64(7, p);
    req.str(8, run);
    call(bootstrap, security, transactionalId, "EndTxn", req.bytes(), System.currentTimeMillis() + Math.max(120_000, timeoutMs));
  }
}
