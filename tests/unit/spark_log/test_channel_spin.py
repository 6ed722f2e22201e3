"""``spark_log._channel_spin.pin``: a channel's ``future()`` calls all complete on one
thread that lives as long as the channel (grpcio alone starts a thread per call when calls
do not overlap), and that thread ends when the channel closes or is dropped."""
from __future__ import annotations

import gc
import threading
import time
from concurrent import futures
from typing import Any, Iterator

import grpc
import pytest

from spark_log._channel_spin import pin


def echo_server(workers: int) -> tuple[grpc.Server, str]:
    """A started loopback server of ``/t.Echo/Echo``: answers its request, fails ``b"fail"``
    with INVALID_ARGUMENT, answers ``b"slow<seconds>"`` after that long (also the churn child's)."""
    def echo(request: bytes, context: Any) -> bytes:
        if request == b"fail":
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "asked to fail")
        if request.startswith(b"slow"):
            time.sleep(float(request[4:]))  # the handler's own work, for calls still in flight at a close
        return request

    handler = grpc.method_handlers_generic_handler("t.Echo", {"Echo": grpc.unary_unary_rpc_method_handler(echo)})
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=workers))
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    return server, f"127.0.0.1:{port}"


@pytest.fixture()
def address() -> Iterator[str]:
    server, address = echo_server(2)
    yield address
    server.stop(None)


def _callback_threads(channel: grpc.Channel, calls: int) -> list[threading.Thread]:
    """The thread each of ``calls`` sequential ``future()`` calls completed on (each call's
    result checked, one failing call among them)."""
    echo = channel.unary_unary("/t.Echo/Echo")
    threads: list[threading.Thread] = []
    for i in range(calls):
        request = b"fail" if i == calls // 2 else str(i).encode()
        future = echo.future(request, timeout=10)
        done = threading.Event()
        future.add_done_callback(lambda _f: (threads.append(threading.current_thread()), done.set()))
        assert done.wait(10)
        if request == b"fail":
            with pytest.raises(grpc.RpcError) as failed:
                future.result()
            assert failed.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        else:
            assert future.result() == request
    return threads


def _distinct(threads: list[threading.Thread]) -> list[threading.Thread]:
    out: list[threading.Thread] = []
    for thread in threads:
        if not any(thread is seen for seen in out):
            out.append(thread)
    return out


def _ended(thread: threading.Thread, deadline_s: float = 10.0) -> bool:
    thread.join(deadline_s)
    return not thread.is_alive()


def test_grpcio_alone_starts_a_thread_per_call(address: str) -> None:
    """What ``pin`` is for (and the check that this grpcio still behaves so)."""
    with grpc.insecure_channel(address) as channel:
        assert len(_distinct(_callback_threads(channel, 20))) > 10


def test_a_pinned_channel_completes_every_call_on_one_thread_until_closed(address: str) -> None:
    channel = grpc.insecure_channel(address)
    assert pin(channel)
    threads = _distinct(_callback_threads(channel, 20))
    assert len(threads) == 1 and threads[0] is not threading.current_thread() and threads[0].is_alive()
    assert _distinct(_callback_threads(channel, 5)) == threads  # still the same thread later
    channel.close()
    assert _ended(threads[0])


def test_a_dropped_pinned_channel_ends_its_thread(address: str) -> None:
    channel = grpc.insecure_channel(address)
    assert pin(channel)
    [thread] = _distinct(_callback_threads(channel, 3))
    del channel
    deadline = time.monotonic() + 10
    while thread.is_alive() and time.monotonic() < deadline:
        gc.collect()
        thread.join(0.2)
    assert not thread.is_alive()


def test_pin_leaves_a_channel_it_cannot_pin(address: str) -> None:
    with grpc.insecure_channel(address) as channel:
        echo = channel.unary_unary("/t.Echo/Echo")
        assert echo(b"x", timeout=10) == b"x"
        assert pin(channel)  # blocking calls run no spin thread: nothing in flight
        assert not pin(channel)  # pinned already: one more call counted would be a second thread
        assert not pin(grpc.intercept_channel(channel))  # an interceptor's wrapper has no call state
        assert len(_distinct(_callback_threads(channel, 5))) == 1


_CHURN = r'''
import gc, random, sys
import grpc
from spark_log._channel_spin import pin
from tests.unit.spark_log.test_channel_spin import echo_server

server, address = echo_server(16)
rnd = random.Random(int(sys.argv[1]))
left_open = []
for i in range(150):
    channel = grpc.insecure_channel(address)
    assert pin(channel)
    echo_call = channel.unary_unary("/t.Echo/Echo")
    calls = [echo_call.future(b"slow0.0%d" % rnd.randint(0, 5) if rnd.random() < 0.5 else b"x", timeout=10)
             for _ in range(rnd.randint(0, 4))]
    if calls and rnd.random() < 0.5:
        calls[0].result()
    how = rnd.random()
    if how < 0.5:  # closed with calls in flight: they end cancelled, or answered just before
        channel.close()
        for call in calls:
            try:
                call.result()
            except grpc.RpcError as exc:
                assert exc.code() == grpc.StatusCode.CANCELLED, exc.code()
    elif how < 0.8:  # dropped without close while its stub goes on
        del channel
        for call in calls:
            assert call.result() in (b"x",) or call.result().startswith(b"slow")
        if rnd.random() < 0.5:
            assert echo_call(b"y", timeout=10) == b"y"
    else:  # still open when the process exits
        left_open.append(channel)
    if i % 30 == 0:
        gc.collect()
# The server is stopped before the exit, as a broker stops its own: a worker of an unstopped
# server can wait for a closed call's request for ever, and the exit joins its thread pool
# (a hang in 1 of about 110 runs; the client's pinned threads were idle, as they should be).
# The channels in left_open stay open across the exit.
server.stop(None)
print("CHURN OK", flush=True)
'''


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_channels_closed_dropped_or_left_open_with_calls_in_flight_never_abort(seed: int) -> None:
    """grpcio aborts the process when a channel's completion queue is destroyed under a thread
    waiting on it: channels closed with calls in flight, dropped, or open at exit, in a child
    process whose exit status tells."""
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[3]
    done = subprocess.run([sys.executable, "-c", _CHURN, str(seed)], capture_output=True, text=True, timeout=120,
                          cwd=repo, env={"PYTHONPATH": str(repo), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0 and "CHURN OK" in done.stdout, done.stderr[-2000:]
