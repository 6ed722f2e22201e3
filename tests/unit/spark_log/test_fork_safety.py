"""A process that uses spark_log's gRPC clients can still start child processes.

grpc/grpc#43055: with gRPC's fork support on, a child forked by ``subprocess.Popen`` with a
``preexec_fn`` (as PySpark starts its JVM gateway) can die before ``exec`` once a channel
is live (seen here: 12 of 100 children, and the demo's Spark session failing with
JAVA_GATEWAY_EXITED under load).  Importing spark_log turns fork support off.
"""
from __future__ import annotations

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent("""
    import os, subprocess, sys
    import spark_log  # before grpc, as a user of the library does
    import grpc
    from concurrent import futures
    assert os.environ["GRPC_ENABLE_FORK_SUPPORT"] == "false"
    server = grpc.server(futures.ThreadPoolExecutor(2))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    grpc.channel_ready_future(channel).result(timeout=30)
    failed = 0
    for _ in range(int(sys.argv[1])):
        child = subprocess.Popen(["/bin/true"], preexec_fn=lambda: None, stdin=subprocess.PIPE, stderr=subprocess.DEVNULL)
        failed += child.wait() != 0
    print(failed)
""")


def test_children_forked_beside_a_live_channel_all_run() -> None:
    env = {k: v for k, v in __import__("os").environ.items() if k != "GRPC_ENABLE_FORK_SUPPORT"}
    result = subprocess.run([sys.executable, "-c", SCRIPT, "100"], capture_output=True, text=True, timeout=120, env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "0", f"{result.stdout.strip()} of 100 children died before exec"
