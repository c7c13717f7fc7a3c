"""The HTTP server on both pollers: epoll (Linux) and the queued `selectors` one used elsewhere
(macOS's kqueue), which this machine would otherwise never run. Each test serves real requests on
127.0.0.1 and a parked event stream (`SseBody` on a `Channel`) woken from another thread."""

from __future__ import annotations

import http.client
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from mcpsync.httpd import server as httpd_server
from mcpsync.httpd._poller import EpollPoller, QueuedPoller
from mcpsync.transport.http._stream import Channel, SseBody
from mcpsync.httpd.server import WsgiServer

from .._timeouts import LONG

pytestmark = pytest.mark.timeout(60)


class StreamApp:
    """`/stream` answers an event stream fed by `channel`; anything else says hello."""

    def __init__(self) -> None:
        self.channel = Channel(16)
        self.opened = threading.Event()
        self.closed = threading.Event()

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        if environ["PATH_INFO"] == "/stream":
            start_response("200 OK", [("Content-Type", "text/event-stream")])
            self.opened.set()
            return SseBody(self.channel, keepalive=LONG * 2, on_close=lambda _completed: self.closed.set())
        start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "5")])
        return [b"hello"]


@pytest.fixture(params=[EpollPoller, QueuedPoller], ids=["epoll", "queued"])
def served(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[WsgiServer, StreamApp]]:
    monkeypatch.setattr(httpd_server, "new_poller", request.param)
    app = StreamApp()
    server = WsgiServer(app, "127.0.0.1", 0, threads=2, idle_timeout=0.3)
    loop = threading.Thread(target=server.serve, name="test-http-loop")
    loop.start()
    try:
        yield server, app
    finally:
        assert server.stop(timeout=LONG)
        loop.join(LONG)
        server.close()
    assert not [t.name for t in threading.enumerate() if t.name.startswith("mcpsync-http-")]


def test_keep_alive_requests_are_served_on_one_connection(served: tuple[WsgiServer, StreamApp]) -> None:
    server, _ = served
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=LONG)
    try:
        for _ in range(20):
            connection.request("GET", "/")
            reply = connection.getresponse()
            assert (reply.status, reply.read()) == (200, b"hello")
    finally:
        connection.close()


def test_a_parked_stream_holds_no_worker_and_is_woken_by_its_channel(served: tuple[WsgiServer, StreamApp]) -> None:
    server, app = served
    stream = socket.create_connection(("127.0.0.1", server.port), timeout=LONG)
    try:
        stream.sendall(b"GET /stream HTTP/1.1\r\nHost: test\r\n\r\n")
        reader = stream.makefile("rb")
        assert reader.readline().startswith(b"HTTP/1.1 200")
        assert app.opened.wait(LONG)
        # with the stream parked, both workers are free: two more clients are served meanwhile
        for _ in range(2):
            connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=LONG)
            connection.request("GET", "/")
            assert connection.getresponse().read() == b"hello"
            connection.close()
        app.channel.put(b'{"jsonrpc":"2.0","method":"x"}')  # from this thread: it wakes the parked stream
        seen = b""
        while b'"method":"x"' not in seen:
            line = reader.readline()
            assert line, "the stream ended before the event came"
            seen += line
        reader.close()  # the socket closes only once its file is closed too
    finally:
        stream.close()
    assert app.closed.wait(LONG), "a client that closed its stream was not noticed"


def test_an_idle_connection_is_closed_after_the_idle_timeout(served: tuple[WsgiServer, StreamApp]) -> None:
    server, _ = served
    client = socket.create_connection(("127.0.0.1", server.port), timeout=LONG)
    try:
        client.sendall(b"GET / HTTP/1.1\r\nHost: test\r\n\r\n")
        received = b""
        while chunk := client.recv(4096):  # the answer, then the end of file the idle timeout brings
            received += chunk
        assert received.startswith(b"HTTP/1.1 200") and received.endswith(b"hello")
    finally:
        client.close()


class _LockThatWakes:
    """The poller's lock, which once armed calls `then` right after its next release: a wake()
    from another thread landing just there, in the middle of the loop's drain of the wake-up pipe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.then: Any = None

    def __enter__(self) -> None:
        self._lock.acquire()

    def __exit__(self, *exc: object) -> None:
        self._lock.release()
        then, self.then = self.then, None
        if then is not None:
            then()


@pytest.mark.parametrize("kind", [EpollPoller, QueuedPoller], ids=["epoll", "queued"])
def test_a_wake_that_lands_while_the_loop_drains_the_last_one_is_never_lost(kind: type[EpollPoller | QueuedPoller]) -> None:
    """`stop()`, a nearer deadline and a lingering close each wake the loop; a wake that came while
    the loop was draining the previous one once left the poller marked woken with nothing in its
    pipe, so every later wake() was dropped and the loop slept until its next timer (up to 60 s):
    a server that did not stop."""
    poller = kind()
    lock = _LockThatWakes()
    poller._lock = lock  # type: ignore[assignment]
    try:
        poller.wake()
        lock.then = poller.wake  # inside the drain that wait() is about to do
        assert poller.wait(0) == []
        poller.wake()  # say, stop()
        began = time.monotonic()
        poller.wait(LONG)
        assert time.monotonic() - began < LONG / 2, "the wake was lost: wait() ran to its timeout"
    finally:
        poller.close()
