"""Requests the loop thread serves itself (`WsgiServer(answers_at_once=...)`), and what happens when
one of them holds the loop: a worker takes the loop over, the other connections go on being
served, and the caller of `serve()` takes the loop back once its request is over.

Each test runs a real server on 127.0.0.1 with real clients (the standard library's, raw sockets);
the application reports which thread ran it. Threads are ordered with Events, never sleeps.
"""

from __future__ import annotations

import http.client
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import pytest

from mcpsync.httpd.server import WsgiServer

from .._timeouts import LONG
from .raw_http import Servers, request

pytestmark = pytest.mark.timeout(60)

SERVE_THREAD = "test-http-serve"  # the thread `Servers` calls serve() on


class ThreadReporting:
    """Answers with the name of the thread that ran it; `/hold` waits for `release` first (a
    request that promised to be quick and is not)."""

    def __init__(self) -> None:
        self.holding = threading.Event()
        self.release = threading.Event()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        environ["wsgi.input"].read()
        if environ["PATH_INFO"] == "/hold":
            self.holding.set()
            self.release.wait(LONG)
        body = threading.current_thread().name.encode()
        start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
        return [body]


def at_once(environ: dict[str, Any], body: bytes) -> bool:
    return environ["PATH_INFO"] != "/slow"


@pytest.fixture
def servers() -> Iterator[Servers]:
    running = Servers()
    try:
        yield running
    finally:
        running.close()


def ask(server: WsgiServer, path: str = "/") -> str:
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=LONG)
    try:
        connection.request("POST", path, body=b"{}")
        reply = connection.getresponse()
        assert reply.status == 200
        return reply.read().decode()
    finally:
        connection.close()


def test_a_request_answered_at_once_runs_on_the_loop_thread_and_others_on_a_worker(servers: Servers) -> None:
    server = servers.start(ThreadReporting(), answers_at_once=at_once)
    assert ask(server, "/") == SERVE_THREAD
    assert ask(server, "/slow").startswith("mcpsync-http-")


def test_without_the_hook_every_request_goes_to_a_worker(servers: Servers) -> None:
    server = servers.start(ThreadReporting())
    assert ask(server, "/").startswith("mcpsync-http-")


def test_pipelined_requests_are_answered_in_order_across_the_hand_off(servers: Servers) -> None:
    server = servers.start(ThreadReporting(), answers_at_once=at_once)
    client = servers.connect(server)
    client.send(request("POST", "/", body=b"{}") + request("POST", "/slow", body=b"{}") + request("POST", "/", body=b"{}"))
    names = [client.read_response().body.decode() for _ in range(3)]
    assert names[0] == SERVE_THREAD
    assert names[1].startswith("mcpsync-http-")  # the rest of that step, the third request too, is the worker's
    assert names[2].startswith("mcpsync-http-")


def test_a_failing_hook_sends_the_request_to_a_worker(servers: Servers, caplog: pytest.LogCaptureFixture) -> None:
    def broken(environ: dict[str, Any], body: bytes) -> bool:
        raise RuntimeError("the hook's bug")

    server = servers.start(ThreadReporting(), answers_at_once=broken)
    with caplog.at_level(logging.ERROR, logger="mcpsync"):
        assert ask(server, "/").startswith("mcpsync-http-")
    assert "answers_at_once failed" in caplog.text


def test_a_request_that_holds_the_loop_does_not_hold_the_other_connections(servers: Servers) -> None:
    app = ThreadReporting()
    server = servers.start(app, answers_at_once=at_once)
    held = http.client.HTTPConnection("127.0.0.1", server.port, timeout=LONG)
    try:
        held.request("POST", "/hold", body=b"{}")
        assert app.holding.wait(LONG)
        # the loop thread is inside /hold; a worker has taken the loop over and serves the others
        for _ in range(3):
            assert ask(server, "/").startswith("mcpsync-http-")
        assert not app.release.is_set()
        app.release.set()
        reply = held.getresponse()
        assert (reply.status, reply.read().decode()) == (200, SERVE_THREAD)
    finally:
        held.close()
    # its request over, the caller of serve() takes the loop back (at the borrowing loop's next round)
    deadline = time.monotonic() + LONG
    while ask(server, "/") != SERVE_THREAD:
        assert time.monotonic() < deadline, "the loop never came back to the thread that called serve()"


def test_stopping_while_a_worker_holds_the_loop_ends_serve_and_every_thread(servers: Servers) -> None:
    app = ThreadReporting()
    server = servers.start(app, answers_at_once=at_once)
    held = http.client.HTTPConnection("127.0.0.1", server.port, timeout=LONG)
    try:
        held.request("POST", "/hold", body=b"{}")
        assert app.holding.wait(LONG)
        assert ask(server, "/").startswith("mcpsync-http-")  # the loop is a worker's now
        stopped: list[bool] = []
        stopping = threading.Thread(target=lambda: stopped.append(server.stop(timeout=LONG)), name="test-stop")
        stopping.start()
        app.release.set()  # the held request ends, is answered, and its thread finishes serve()
        reply = held.getresponse()
        assert reply.status == 200
        reply.read()
        stopping.join(LONG)
        assert stopped == [True]
    finally:
        held.close()
    serve_thread = next(thread for s, thread in servers.running if s is server)
    serve_thread.join(LONG)
    assert not serve_thread.is_alive()
    # Servers.close() then checks that no mcpsync-http-* thread is left
