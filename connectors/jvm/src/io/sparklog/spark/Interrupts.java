package io.sparklog.spark;

import java.io.InterruptedIOException;
import java.io.UncheckedIOException;

/** An interrupt met where a checked InterruptedException cannot be thrown (a backoff sleep, a
 *  wait for a prefetch).  The thread's flag is set again and the exception thrown is one that
 *  Spark's StreamExecution.isInterruptionException recognises (an UncheckedIOException of an
 *  InterruptedIOException), so a query stopped during the wait ends as stopped: wrapped in a
 *  plain RuntimeException, the stop was reported as the query failing. */
final class Interrupts {
  private Interrupts() {}

  static RuntimeException unchecked(InterruptedException e) {
    Thread.currentThread().interrupt();
    InterruptedIOException io = new InterruptedIOException("interrupted (the query or task was stopped)");
    io.initCause(e);
    return new UncheckedIOException(io);
  }
}
