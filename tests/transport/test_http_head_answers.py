"""What mcpsync's own HTTP server answers at a request's head, before any of its body is read or
budgeted, beyond the endpoint's authentication: a request pipelined behind a stream in the same
write, a CORS preflight that carries a body, a body to the public metadata, and the fallback's own
requests (still read, and served by the fallback). Over real sockets (`Server.start_http` and
`WsgiServer`), with the static tokens the body-budget tests use.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

import pytest

from mcpsync import Server, Service
from mcpsync.auth import Auth
from mcpsync.auth.resource.guard import METADATA_PATH
from mcpsync.auth.resource.static import StaticTokens
from tests.auth.test_attack_bodies import GOOD, SCOPE, get_stream, open_session, refused_at_the_head
from tests.httpd.raw_http import RawClient, Servers, request

pytestmark = pytest.mark.timeout(60)

BODY = 1024 * 1024
PAGE = "https://app.example.com"


def _head(method: str, path: str, length: int, *, token: str | None = None, extra: tuple[tuple[str, str], ...] = (), expect: bool = True) -> bytes:
    """A request's head alone, declaring a body of `length` bytes."""
    headers = [*extra, ("Host", "127.0.0.1"), ("Content-Type", "application/json"), ("Accept", "application/json, text/event-stream"),
               ("Content-Length", str(length)), *([("Expect", "100-continue")] if expect else [])]
    if token is not None:
        headers.append(("Authorization", f"Bearer {token}"))
    return request(method, path, headers=headers, host=False)


def test_a_body_pipelined_with_a_stream_request_in_one_write_holds_no_budget_for_the_stream() -> None:
    """A caller with a valid token sends, in one write, its session's GET (which becomes a stream)
    and the head of a POST declaring 1 MiB, never the body. The server reads both at once, so
    the POST's head is parsed, and its share of the body budget taken, before the GET is
    served; the stream would then hold it for its life. Instead the pipelined request is
    dropped, its share given back at once, and the stream's head says `Connection: close`: the
    stream still works, and another caller's 1 MiB body is let in (`100 Continue`, not 503)."""
    server = Server("bodies", services=[Service("bodies")], auth=Auth(StaticTokens({GOOD: [SCOPE]}), required_scopes=[SCOPE]))
    app = server.wsgi_app()
    servers = Servers()
    try:
        http = servers.start(app, head_check=app.check_head, max_body_bytes=BODY, max_buffered_bytes=BODY + 1)
        holder = servers.connect(http)
        session = open_session(holder)
        holder.send(get_stream(session) + _head("POST", "/mcp", BODY, token=GOOD, expect=False))
        stream = holder.read_head()
        assert stream.status == 200 and stream.closes, stream.raw_head
        other = servers.connect(http)
        other.send(_head("POST", "/mcp", BODY, token=GOOD))
        reply = other.read_response()
        assert reply.status == 100, reply.raw_head
        server.refresh_tools()
        holder.read_until(b"notifications/tools/list_changed")  # the stream itself goes on
    finally:
        servers.close()
        server.shutdown()


def _served(**options: Any) -> tuple[Server, int]:
    auth = Auth(StaticTokens({GOOD: [SCOPE]}), required_scopes=[SCOPE])
    server = Server("heads", services=[Service("heads")], auth=auth)
    return server, server.start_http("127.0.0.1", 0, threads=4, max_body_bytes=BODY, **options).port


def test_a_preflight_with_a_body_is_answered_at_its_head_and_its_body_never_read() -> None:
    """A preflight (`OPTIONS` with `Origin`) from a listed origin that declares a body gets the
    answer it gets without one, 204 with the CORS headers, at its head: no `100 Continue`, no
    body read (RFC 9110 gives an OPTIONS body no use), and the connection closes after it."""
    server, port = _served(allowed_origins=[PAGE])
    client = RawClient(port)
    try:
        client.send(_head("OPTIONS", "/mcp", BODY, extra=(("Origin", PAGE), ("Access-Control-Request-Method", "POST"))))
        reply = refused_at_the_head(client, 204)
        assert reply.header("Access-Control-Allow-Origin") == PAGE and reply.header("Access-Control-Allow-Methods"), reply.raw_head
    finally:
        client.close()
        server.shutdown()


@pytest.mark.parametrize(("method", "status"), [("GET", 200), ("HEAD", 200), ("POST", 405)])
def test_a_body_to_the_metadata_is_answered_at_its_head(method: str, status: int) -> None:
    """The protected resource metadata never depends on a body: a GET declaring one is sent the
    metadata at its head, a HEAD the same head (its length the GET's), a POST its 405 (`Allow:
    GET, HEAD`), none after `100 Continue`."""
    server, port = _served()
    client = RawClient(port)
    try:
        client.send(_head(method, METADATA_PATH + "/mcp", BODY))
        if method == "HEAD":
            head = client.read_head()
            assert head.status == 200 and head.closes and int(head.header("Content-Length") or 0) > 0, head.raw_head
            assert client.wait_closed() == b""
            return
        reply = refused_at_the_head(client, status)
        if status == 200:
            assert json.loads(reply.body)["resource"].endswith("/mcp"), reply.body
        else:
            assert reply.header("Allow") == "GET, HEAD", reply.raw_head
    finally:
        client.close()
        server.shutdown()


def test_the_fallback_still_reads_its_own_bodies() -> None:
    """With a fallback app, a path that is not the endpoint's is the fallback's: its body is
    read (after `100 Continue`, budgeted like any other) and the fallback answers it."""
    seen: list[bytes] = []

    def fallback(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        seen.append(environ["wsgi.input"].read())
        start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "2")])
        return [b"ok"]

    server, port = _served(fallback=fallback)
    client = RawClient(port)
    try:
        client.send(_head("POST", "/upload", 5))
        assert client.read_response().status == 100
        client.send(b"hello")
        reply = client.read_response()
        assert reply.status == 200 and reply.body == b"ok" and seen == [b"hello"]
    finally:
        client.close()
        server.shutdown()


class _HeldStream:
    """A `Parkable` body: one piece, then nothing until `end()`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sent = False
        self._ended = False
        self._wake: Callable[[], None] | None = None

    def take(self, now: float) -> bytes | None:
        with self._lock:
            if not self._sent:
                self._sent = True
                return b"first"
            if self._ended:
                raise StopIteration
            return None

    def park(self, wake: Callable[[], None]) -> float | None:
        with self._lock:
            if not self._ended:
                self._wake = wake
                return None
        wake()
        return None

    def end(self) -> None:
        with self._lock:
            self._ended = True
            wake, self._wake = self._wake, None
        if wake is not None:
            wake()

    def close(self) -> None:
        pass


def test_a_request_pipelined_behind_an_open_stream_is_served_when_the_stream_ends() -> None:
    """A client that sends its next request (with a body) while a stream is open is answered
    after the stream's end, in order: what it sent is kept, unparsed while the stream lasts,
    and read then (so its body is budgeted, and timed, from then)."""
    held = _HeldStream()

    def app(environ: dict[str, Any], start_response: Any) -> Any:
        if environ["PATH_INFO"] == "/stream":
            start_response("200 OK", [("Content-Type", "text/event-stream")])
            return held
        body = environ["wsgi.input"].read()
        start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
        return [body]

    servers = Servers()
    try:
        http = servers.start(app, max_body_bytes=BODY)
        client = servers.connect(http)
        client.send(request("GET", "/stream"))
        assert client.read_head().status == 200
        assert client.read_chunk() == b"first"
        client.send(request("POST", "/after", headers=[("Content-Type", "text/plain")], body=b"hello"))
        assert client.quiet_for(0.2)  # nothing for it while the stream is open
        held.end()
        assert client.read_chunk() == b""  # the stream's end first
        reply = client.read_response()
        assert reply.status == 200 and reply.body == b"hello"
    finally:
        servers.close()
