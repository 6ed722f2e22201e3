package io.sparklog.spark;

import java.io.FileOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;

/** Named crash points of the transactional sink's driver, for kill -9 tests: the JVM twin of
 *  connectors/crash_points.py, with the same points ({@code before-commit}: every task of the
 *  micro-batch wrote and returned, the driver has not asked the coordinator to commit yet;
 *  {@code during-commit}: the coordinator took the commit, Spark has not recorded the batch in
 *  its checkpoint) and the same variables: {@code SPARK_LOG_SINK_CRASH_AT} names the point,
 *  {@code SPARK_LOG_SINK_CRASH_MARKER} the file the point's name is appended to (fsynced) before
 *  the driver's whole process group (the Python driver, this JVM, the Python workers) is killed
 *  with SIGKILL.  A no-op unless the variable names the point; production never sets it. */
final class CrashPoints {
  private CrashPoints() {}

  static void reach(String name) {
    if (!name.equals(System.getenv("SPARK_LOG_SINK_CRASH_AT"))) return;
    String marker = System.getenv("SPARK_LOG_SINK_CRASH_MARKER");
    try {
      if (marker != null && !marker.isEmpty()) {
        try (FileOutputStream out = new FileOutputStream(marker, true)) {
          out.write((name + "\n").getBytes(StandardCharsets.UTF_8));
          out.getFD().sync();
        }
      }
      // the process group: field 5 of /proc/self/stat, after the command name in parentheses
      String stat = new String(Files.readAllBytes(Paths.get("/proc/self/stat")), StandardCharsets.UTF_8);
      String pgid = stat.substring(stat.lastIndexOf(')') + 2).split(" ")[2];
      // procps' kill needs "--" before a negative id: "kill -9 -<pgid>" signals nothing and exits 0
      new ProcessBuilder("kill", "-s", "KILL", "--", "-" + pgid).inheritIO().start().waitFor();
    } catch (IOException | RuntimeException e) {
      // fall through to halting this JVM
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    Runtime.getRuntime().halt(137);
  }
}
