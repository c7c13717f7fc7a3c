"""`WsgiServer`'s refusals and deadlines (issue 13's contract), as a raw-socket client sees them.

Every refusal is a 4xx/5xx status with `Connection: close` and a text/plain body, after which the
server closes the connection: never a dropped connection, never a traceback in the log (the
`servers` fixture fails a test that logged at ERROR or with exc_info, unless the test expects the
application's bug to be logged). The application never sees a refused request.

The deadlines run with small settings (timeout=0.5 and the like). The bytes a dribbling client
spaces out are the stimulus; every wait for the server's answer is a socket timeout or a select,
and the timing assertions are generous bounds (a deadline that a per-byte timer would keep
extending shows up as no answer for many seconds, not as a few hundred milliseconds' difference).
"""

from __future__ import annotations

import logging
import queue
import time
from typing import Any, Callable, Iterable, Iterator

import pytest

from mcpsync.httpd._parse import RequestReader
from mcpsync.httpd.server import MAX_HEAD_BYTES, MAX_HEADERS

from .._timeouts import LONG
from .raw_http import Closed, RawClient, Reply, Servers, chunked, request

pytestmark = pytest.mark.timeout(120)

StartResponse = Callable[..., Any]


# -- fixtures and applications ------------------------------------------------------------------------

class Checked(Servers):
    allow_app_bug_log = False


@pytest.fixture
def servers(caplog: pytest.LogCaptureFixture) -> Iterator[Checked]:
    caplog.set_level(logging.DEBUG)
    running = Checked()
    try:
        yield running
    finally:
        running.close()
        records = caplog.get_records("setup") + caplog.get_records("call") + caplog.records
        bad = [r for r in records if r.levelno >= logging.ERROR or r.exc_info]
        if not running.allow_app_bug_log:
            assert not bad, "logged at ERROR or with a traceback:\n" + "\n".join(
                f"{r.levelname} {r.name}: {r.getMessage()}" + (" [exc_info]" if r.exc_info else "") for r in bad
            )


class Echo:
    """Records each request (method, PATH_INFO, body) and answers with the body it read."""

    def __init__(self) -> None:
        self.seen: queue.Queue[tuple[str, str, bytes]] = queue.Queue()

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        body = environ["wsgi.input"].read()
        self.seen.put((environ["REQUEST_METHOD"], environ["PATH_INFO"], body))
        start_response("200 OK", [("Content-Type", "application/octet-stream"), ("Content-Length", str(len(body)))])
        return [body]


def assert_refused(client: RawClient, statuses: set[int], sent: bytes = b"") -> Reply:
    """The next thing on the connection is a refusal in `statuses`, then the close."""
    where = f"after sending {sent[:300]!r}{'...' if len(sent) > 300 else ''}"
    try:
        reply = client.read_response()
    except Closed as exc:
        raise AssertionError(f"the connection was dropped without an answer {where}: {exc}") from None
    assert reply.status in statuses, f"status {reply.status}, expected one of {sorted(statuses)} {where}; head {reply.raw_head!r}"
    assert [v.lower() for v in reply.all("Connection")] == ["close"], f"no Connection: close in {reply.raw_head!r} {where}"
    content_type = reply.header("Content-Type") or ""
    assert content_type.startswith("text/plain"), f"a refusal's body is text/plain, got {content_type!r} {where}"
    rest = client.wait_closed()
    assert rest == b"", f"more bytes after the refusal {where}: {rest[:300]!r}"
    return reply


# -- refusals of the request ------------------------------------------------------------------------

H = b"Host: test\r\n"
BIG = MAX_HEAD_BYTES + 10

REFUSALS: dict[str, tuple[bytes, set[int]]] = {
    # the request line
    "garbage request line": (b"GARBAGE\r\n\r\n", {400}),
    "four-part request line": (b"GET / HTTP/1.1 extra\r\n" + H + b"\r\n", {400}),
    "space after the version": (b"GET / HTTP/1.1 \r\n" + H + b"\r\n", {400}),
    "not http": (b"GET / FTP/1.1\r\n" + H + b"\r\n", {400}),
    "method not a token": (b"G(T / HTTP/1.1\r\n" + H + b"\r\n", {400}),
    "method unknown to llhttp": (b"FROB / HTTP/1.1\r\n" + H + b"\r\n", {400}),
    "lower-case method": (b"get / HTTP/1.1\r\n" + H + b"\r\n", {400}),
    "target with NUL": (b"GET /a\x00b HTTP/1.1\r\n" + H + b"\r\n", {400}),
    "target with SOH": (b"GET /a\x01b HTTP/1.1\r\n" + H + b"\r\n", {400}),
    "target with DEL": (b"GET /a\x7fb HTTP/1.1\r\n" + H + b"\r\n", {400}),
    "target with tab": (b"GET /a\tb HTTP/1.1\r\n" + H + b"\r\n", {400}),
    "target with vertical tab": (b"GET /a\x0bb HTTP/1.1\r\n" + H + b"\r\n", {400}),
    "absolute-form target that does not parse": (b"GET http://[evil/mcp HTTP/1.1\r\n" + H + b"\r\n", {400}),
    # versions
    "http/2.0": (b"GET / HTTP/2.0\r\n" + H + b"\r\n", {505}),
    "http/0.9 version": (b"GET / HTTP/0.9\r\n" + H + b"\r\n", {505}),
    "http/1.2": (b"GET / HTTP/1.2\r\n" + H + b"\r\n", {400, 505}),
    "http/3.0": (b"GET / HTTP/3.0\r\n" + H + b"\r\n", {400, 505}),
    "http/0.9 request line": (b"GET /\r\n\r\n", {400, 505}),
    # header lines
    "header name not a token": (b"GET / HTTP/1.1\r\n" + H + b"X(y: v\r\n\r\n", {400}),
    "header name with @": (b"GET / HTTP/1.1\r\nHo@st: test\r\n\r\n", {400}),
    "empty header name": (b"GET / HTTP/1.1\r\n" + H + b": value\r\n\r\n", {400}),
    "no colon": (b"GET / HTTP/1.1\r\n" + H + b"NoColon\r\n\r\n", {400}),
    "space before colon": (b"GET / HTTP/1.1\r\nHost : test\r\n\r\n", {400}),
    "tab before colon": (b"GET / HTTP/1.1\r\nHost\t: test\r\n\r\n", {400}),
    "obs-fold": (b"GET / HTTP/1.1\r\n" + H + b"X-A: one\r\n two\r\n\r\n", {400}),
    "obs-fold with a tab": (b"GET / HTTP/1.1\r\n" + H + b"X-A: one\r\n\ttwo\r\n\r\n", {400}),
    "bare LF line endings": (b"GET / HTTP/1.1\nHost: test\n\n", {400}),
    "bare LF after a header": (b"GET / HTTP/1.1\r\nHost: test\nX-A: b\r\n\r\n", {400}),
    "bare LF ending the head": (b"GET / HTTP/1.1\r\nHost: test\r\n\n", {400}),
    "bare CR after a header": (b"GET / HTTP/1.1\r\nHost: test\rX-A: b\r\n\r\n", {400}),
    "bare CR after the request line": (b"GET / HTTP/1.1\rHost: test\r\n\r\n", {400}),
    # framing
    "content-length and transfer-encoding": (
        b"POST / HTTP/1.1\r\n" + H + b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", {400}),
    "transfer-encoding and content-length": (
        b"POST / HTTP/1.1\r\n" + H + b"Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n", {400}),
    "same content-length twice": (b"POST / HTTP/1.1\r\n" + H + b"Content-Length: 2\r\nContent-Length: 2\r\n\r\nhi", {400}),
    "two different content-lengths": (b"POST / HTTP/1.1\r\n" + H + b"Content-Length: 1\r\nContent-Length: 2\r\n\r\nxx", {400}),
    "content-length list": (b"POST / HTTP/1.1\r\n" + H + b"Content-Length: 2, 2\r\n\r\nhi", {400}),
    "content-length list without space": (b"POST / HTTP/1.1\r\n" + H + b"Content-Length: 2,2\r\n\r\nhi", {400}),
    "content-length padded with \\x0b": (b"POST / HTTP/1.1\r\n" + H + b"Content-Length: \x0b2\r\n\r\nhi", {400}),
    "content-length padded with \\xa0": (b"POST / HTTP/1.1\r\n" + H + b"Content-Length: \xa02\r\n\r\nhi", {400}),
    "content-length followed by \\x0b": (b"POST / HTTP/1.1\r\n" + H + b"Content-Length: 2\x0b\r\n\r\nhi", {400}),
    "content-length +2": (b"POST / HTTP/1.1\r\n" + H + b"Content-Length: +2\r\n\r\nhi", {400}),
    "content-length -1": (b"POST / HTTP/1.1\r\n" + H + b"Content-Length: -1\r\n\r\n", {400}),
    "content-length 0x2": (b"POST / HTTP/1.1\r\n" + H + b"Content-Length: 0x2\r\n\r\nhi", {400}),
    "content-length abc": (b"POST / HTTP/1.1\r\n" + H + b"Content-Length: abc\r\n\r\n", {400}),
    "content-length 2 2": (b"POST / HTTP/1.1\r\n" + H + b"Content-Length: 2 2\r\n\r\nhi", {400}),
    "empty content-length": (b"POST / HTTP/1.1\r\n" + H + b"Content-Length:\r\n\r\n", {400}),
    "non-ascii digit content-length": ("POST / HTTP/1.1\r\nHost: test\r\nContent-Length: ١\r\n\r\nx".encode(), {400}),
    "content-length of 5,000 digits": (b"POST / HTTP/1.1\r\n" + H + b"Content-Length: " + b"9" * 5000 + b"\r\n\r\n", {400}),
    "transfer-encoding gzip, chunked": (b"POST / HTTP/1.1\r\n" + H + b"Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", {501}),
    "transfer-encoding gzip": (b"POST / HTTP/1.1\r\n" + H + b"Transfer-Encoding: gzip\r\n\r\n", {501}),
    "transfer-encoding chunked, gzip": (b"POST / HTTP/1.1\r\n" + H + b"Transfer-Encoding: chunked, gzip\r\n\r\n0\r\n\r\n", {400, 501}),
    "transfer-encoding identity": (b"POST / HTTP/1.1\r\n" + H + b"Transfer-Encoding: identity\r\n\r\n", {501}),
    "transfer-encoding chunked twice": (
        b"POST / HTTP/1.1\r\n" + H + b"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", {400, 501}),
    "transfer-encoding chunked<tab>, then chunked": (  # found by test_http_fuzz (seed 7, 30,000 cases)
        b"POST / HTTP/1.1\r\n" + H + b"Transfer-Encoding: chunked\t\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", {400, 501}),
    "chunked on http/1.0": (b"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", {400}),
    "malformed chunk size": (b"POST / HTTP/1.1\r\n" + H + b"Transfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n", {400}),
    "chunk size 0x5": (b"POST / HTTP/1.1\r\n" + H + b"Transfer-Encoding: chunked\r\n\r\n0x5\r\nhello\r\n0\r\n\r\n", {400}),
    "chunk data longer than its size": (b"POST / HTTP/1.1\r\n" + H + b"Transfer-Encoding: chunked\r\n\r\n3\r\nhello\r\n0\r\n\r\n", {400}),
    "chunk size ended by bare LF": (b"POST / HTTP/1.1\r\n" + H + b"Transfer-Encoding: chunked\r\n\r\n5\nhello\r\n0\r\n\r\n", {400}),
    # Host
    "no host on http/1.1": (b"GET / HTTP/1.1\r\n\r\n", {400}),
    "two hosts": (b"GET / HTTP/1.1\r\nHost: test\r\nHost: evil.example\r\n\r\n", {400}),
    "two hosts, the same": (b"GET / HTTP/1.1\r\nHost: test\r\nhost: test\r\n\r\n", {400}),
    "two hosts on http/1.0": (b"GET / HTTP/1.0\r\nHost: test\r\nHost: evil.example\r\n\r\n", {400}),
    # sizes
    "header over 64 KiB": (b"GET / HTTP/1.1\r\n" + H + b"X-Big: " + b"a" * BIG + b"\r\n\r\n", {431}),
    "head over 64 KiB in many headers": (
        b"GET / HTTP/1.1\r\n" + H + b"".join(b"X-H%d: %s\r\n" % (i, b"b" * 1000) for i in range(70)) + b"\r\n", {431}),
    "request line over 64 KiB": (b"GET /" + b"a" * BIG + b" HTTP/1.1\r\n" + H + b"\r\n", {431}),
    "too many headers": (b"GET / HTTP/1.1\r\n" + H + b"".join(b"X-H%d: v\r\n" % i for i in range(MAX_HEADERS)) + b"\r\n", {431}),
    "too many trailers": (
        b"POST / HTTP/1.1\r\n" + H + b"Transfer-Encoding: chunked\r\n\r\n"
        + chunked(b"hello", trailer=b"".join(b"X-T%d: v\r\n" % i for i in range(MAX_HEADERS + 1))), {400, 431}),
    "trailer over 64 KiB": (
        b"POST / HTTP/1.1\r\n" + H + b"Transfer-Encoding: chunked\r\n\r\n" + chunked(b"hello", trailer=b"X-T: " + b"t" * BIG + b"\r\n"),
        {400, 431}),
    "one chunk extension over 64 KiB": (
        b"POST / HTTP/1.1\r\n" + H + b"Transfer-Encoding: chunked\r\n\r\n1;" + b"e" * (70 * 1024) + b"\r\nx\r\n0\r\n\r\n", {400, 431}),
    "2 KiB of extension on each of 100 chunks": (
        b"POST / HTTP/1.1\r\n" + H + b"Transfer-Encoding: chunked\r\n\r\n"
        + b"".join(b"1;ext=" + b"e" * 2048 + b"\r\nx\r\n" for _ in range(100)) + b"0\r\n\r\n", {400, 431}),
}


@pytest.mark.parametrize(("data", "statuses"), list(REFUSALS.values()), ids=list(REFUSALS))
def test_refused_then_closed(servers: Checked, data: bytes, statuses: set[int]) -> None:
    app = Echo()
    client = servers.connect(servers.start(app))
    client.send_watching(data)
    assert_refused(client, statuses, data)
    assert app.seen.empty(), f"the application saw a refused request: {app.seen.get()}"


BODY_BEFORE = request("POST", body=b"x" * 8192)
"""A request whose body the server parses in one piece, beyond the first slice of the read."""
HEAD_BEHIND = b"GET / HTTP/1.1\r\n" + H + b"".join(b"X-H%d: %s\r\n" % (i, b"b" * 1200) for i in range(80)) + b"\r\n"
"""A head of about 100 KiB that begins inside that body's piece."""


def test_a_head_over_64_kib_behind_a_body_in_the_same_read_is_refused(servers: Checked) -> None:
    """A body is parsed in one piece, so a head that begins inside it was not counted slice by
    slice: the bound must still hold when that head ends (answered 431 after the request before it)."""
    app = Echo()
    client = servers.connect(servers.start(app))
    client.send(BODY_BEFORE + HEAD_BEHIND)  # whole: the server reads it in as few pieces as it may
    assert client.read_response().status == 200
    assert_refused(client, {431}, HEAD_BEHIND)
    assert app.seen.qsize() == 1


def test_the_reader_counts_a_head_that_began_inside_a_body_piece() -> None:
    """The same, fed to the reader as one read delivers it: the request before is ready, the head
    after it refused."""
    reader = RequestReader(1 << 20, lambda head: {})
    data = BODY_BEFORE + HEAD_BEHIND
    reader.feed(data[:65536])
    assert len(reader.ready) == 1 and reader.in_request
    reader.feed(data[65536:])
    assert reader.refusal is not None and reader.refusal.status == 431


CTLS = [c for c in range(0x20) if c != 0x09] + [0x7F]


@pytest.mark.parametrize("ctl", CTLS, ids=[f"0x{c:02x}" for c in CTLS])
def test_control_character_in_a_header_value_is_refused(servers: Checked, ctl: int) -> None:
    app = Echo()
    client = servers.connect(servers.start(app))
    data = b"GET / HTTP/1.1\r\nHost: test\r\nX-Value: a" + bytes([ctl]) + b"b\r\n\r\n"
    client.send(data)
    assert_refused(client, {400}, data)
    assert app.seen.empty()


@pytest.mark.parametrize(
    "data",
    [
        # RFC 9112 lets a server read these leniently (§3: words split on whitespace; §2.2: empty
        # lines, and a bare LF as a line end, before the request line). llhttp does, and its reading
        # stands: it moves no message boundary, which is what request smuggling needs.
        b"GET  / HTTP/1.1\r\nHost: test\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: test\r\n\r\n".replace(b"/ HTTP", b"/  HTTP"),
        b"\nGET / HTTP/1.1\r\nHost: test\r\n\r\n",
        b"\rGET / HTTP/1.1\r\nHost: test\r\n\r\n",
    ],
    ids=["two spaces before the target", "two spaces before the version", "LF before the request line", "CR before the request line"],
)
def test_what_llhttp_reads_within_the_rfcs_leniency_is_served(servers: Checked, data: bytes) -> None:
    app = Echo()
    client = servers.connect(servers.start(app))
    client.send(data)
    assert client.read_response().status == 200


@pytest.mark.parametrize(
    "data",
    [
        request(headers=[("X-Value", "a\tb"), ("X-Obs", "caf\xe9")]),  # HTAB and obs-text are field-content
        request(version="HTTP/1.0", host=False),  # Host is HTTP/1.1's rule
        request(headers=[("X-H%d" % i, "v") for i in range(MAX_HEADERS - 1)]),  # exactly MAX_HEADERS fields
        b"POST / HTTP/1.1\r\nHost: test\r\nContent-Length: 2 \r\n\r\nhi",  # OWS around the value is not the value
        b"POST / HTTP/1.1\r\nHost: test\r\nContent-Length: 002\r\n\r\nhi",  # 1*DIGIT
        b"POST / HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n\r\n"
        + b"".join(b"1;ext=" + b"e" * 500 + b"\r\nx\r\n" for _ in range(100)) + b"0\r\nX-T: 1\r\n\r\n",  # 50 KiB: inside the allowance
    ],
    ids=["htab and obs-text in values", "http/1.0 without host", "exactly max headers", "content-length with ows",
         "content-length with leading zeros", "small chunk extensions and a trailer"],
)
def test_near_misses_are_served(servers: Checked, data: bytes) -> None:
    app = Echo()
    client = servers.connect(servers.start(app))
    client.send(data)
    reply = client.read_response()
    assert reply.status == 200, f"{reply.raw_head!r} for {data[:200]!r}"
    assert not app.seen.empty()


def test_body_over_max_body_bytes_by_content_length_is_refused_413(servers: Checked) -> None:
    app = Echo()
    client = servers.connect(servers.start(app, max_body_bytes=16))
    data = request("POST", body=b"x" * 17)
    client.send_watching(data)
    assert_refused(client, {413}, data)
    assert app.seen.empty()


def test_body_over_max_body_bytes_chunked_is_refused_413(servers: Checked) -> None:
    app = Echo()
    client = servers.connect(servers.start(app, max_body_bytes=16))
    data = request("POST", headers=[("Transfer-Encoding", "chunked")]) + chunked(b"a" * 10, b"b" * 7)
    client.send_watching(data)
    assert_refused(client, {413}, data)
    assert app.seen.empty()


def test_body_at_max_body_bytes_is_served(servers: Checked) -> None:
    client = servers.connect(servers.start(Echo(), max_body_bytes=16))
    client.send(request("POST", body=b"x" * 16) + request("POST", headers=[("Transfer-Encoding", "chunked")]) + chunked(b"a" * 10, b"b" * 6))
    assert client.read_response().body == b"x" * 16
    assert client.read_response().body == b"a" * 10 + b"b" * 6


def test_connect_is_refused_and_closed(servers: Checked) -> None:
    client = servers.connect(servers.start(Echo()))
    data = b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n" + request("GET", "/after")
    client.send(data)
    assert_refused(client, {400, 405}, data)


def test_upgrade_is_served_as_an_ordinary_request_and_the_connection_closed(servers: Checked) -> None:
    app = Echo()
    client = servers.connect(servers.start(app))
    upgrade = request("GET", "/up", headers=[("Connection", "Upgrade"), ("Upgrade", "websocket")])
    client.send(upgrade + request("GET", "/after"))  # pipelined behind it: never served
    reply = client.read_response()
    assert reply.status == 200, reply.raw_head
    assert reply.header("Upgrade") is None
    assert client.wait_closed() == b""
    assert app.seen.get(timeout=LONG)[:2] == ("GET", "/up")
    assert app.seen.empty(), "the request after the Upgrade was served"


def test_past_max_connections_a_new_connection_gets_503_at_once(servers: Checked) -> None:
    server = servers.start(Echo(), max_connections=1)
    first = servers.connect(server)
    first.send(request("GET", "/first"))
    assert first.read_response().status == 200  # an open keep-alive connection holds the one slot
    started = time.monotonic()
    second = servers.connect(server)  # sends nothing: the answer comes at once anyway
    assert_refused(second, {503})
    assert time.monotonic() - started < 2.0, "the 503 waited for the refused client"
    first.send(request("GET", "/still"))
    assert first.read_response().status == 200


# -- response splitting -----------------------------------------------------------------------------

BAD_HEADERS = {
    "CRLF in a value": ("X-Fine", "ok\r\nX-Injected: yes"),
    "LF in a value": ("X-Fine", "ok\nX-Injected: yes"),
    "CR in a value": ("X-Fine", "ok\rX-Injected: yes"),
    "NUL in a value": ("X-Fine", "ok\x00X-Injected: yes"),
    "CRLF in a name": ("X-Injected: yes\r\nX-Fine", "ok"),
    "LF in a name": ("X-Injected: yes\nX-Fine", "ok"),
}


@pytest.mark.parametrize(("name", "value"), list(BAD_HEADERS.values()), ids=list(BAD_HEADERS))
def test_a_response_header_with_cr_lf_or_nul_is_a_500_not_a_split(servers: Checked, name: str, value: str) -> None:
    def app(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        start_response("200 OK", [("Content-Type", "text/plain"), (name, value), ("Content-Length", "2")])
        return [b"hi"]

    servers.allow_app_bug_log = True
    client = servers.connect(servers.start(app))
    client.send(request("GET", "/split") + request("GET", "/next"))
    reply = assert_refused(client, {500})
    assert b"X-Injected" not in reply.raw_head + reply.body, f"the injected header went out: {reply.raw_head!r}"
    assert b"hi" != reply.body


@pytest.mark.parametrize(
    ("status", "headers"),
    [("OK", [("Content-Length", "2")]), ("200 OK\r\nX-Injected: yes", [("Content-Length", "2")]), ("200 OK\nX-Injected: yes", [])],
    ids=["no code", "CRLF in the status", "LF in the status, no fields"],
)
def test_a_status_without_its_code_or_with_cr_lf_is_a_500(servers: Checked, status: str, headers: list[tuple[str, str]]) -> None:
    def app(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        start_response(status, headers)
        return [b"hi"]

    servers.allow_app_bug_log = True
    client = servers.connect(servers.start(app))
    client.send(request("GET", "/bad"))
    reply = assert_refused(client, {500})
    assert b"X-Injected" not in reply.raw_head + reply.body, f"the injected header went out: {reply.raw_head!r}"


def test_the_app_bug_behind_a_split_is_logged(servers: Checked, caplog: pytest.LogCaptureFixture) -> None:
    def app(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        start_response("200 OK", [("X-Fine", "ok\r\nX-Injected: yes"), ("Content-Length", "2")])
        return [b"hi"]

    servers.allow_app_bug_log = True
    client = servers.connect(servers.start(app))
    client.send(request("GET", "/split"))
    assert_refused(client, {500})
    assert [r for r in caplog.records if r.levelno >= logging.WARNING], "the application's bad header was not logged"


# -- deadlines ----------------------------------------------------------------------------------------

def dribble(client: RawClient, data: bytes, step: int, every: float) -> tuple[int, float]:
    """Send `data` `step` bytes at a time, one piece per `every` seconds (the stimulus), until the
    server answers or closes; (bytes sent, seconds since the first byte) when it does. Fails if
    all of `data` went out unanswered."""
    sent = 0
    started = time.monotonic()
    while sent < len(data):
        try:
            client.sock.sendall(data[sent:sent + step])
        except (BrokenPipeError, ConnectionResetError):
            return sent, time.monotonic() - started
        sent += step
        if not client.quiet_for(every):
            return sent, time.monotonic() - started
    raise AssertionError(f"no answer while {len(data)} bytes were dribbled over {time.monotonic() - started:.1f} s")


def test_a_dribbled_head_gets_408_within_the_timeout_in_total(servers: Checked) -> None:
    server = servers.start(Echo(), timeout=0.5, idle_timeout=0.5)
    client = servers.connect(server)
    head = b"GET /" + b"a" * 150 + b" HTTP/1.1\r\nHost: test\r\n\r\n"  # 18 s at one byte per 0.1 s
    sent, elapsed = dribble(client, head, 1, 0.1)
    assert_refused(client, {408}, head[:sent])
    assert 0.3 <= elapsed <= 3.0, f"408 after {elapsed:.2f} s and {sent} bytes, timeout=0.5"


def test_a_head_sent_in_pieces_within_the_timeout_is_served(servers: Checked) -> None:
    server = servers.start(Echo(), timeout=1.0, idle_timeout=1.0)
    client = servers.connect(server)
    head = request("GET", "/pieces")
    for piece in (head[:5], head[5:20]):
        client.send(piece)
        assert client.quiet_for(0.1)  # the stimulus: pieces 0.1 s apart; nothing comes before the end
    client.send(head[20:])
    reply = client.read_response()
    assert reply.status == 200


def test_a_connection_that_sends_nothing_is_closed_without_an_answer(servers: Checked) -> None:
    server = servers.start(Echo(), timeout=0.5, idle_timeout=30.0)
    client = servers.connect(server)
    started = time.monotonic()
    assert client.wait_closed() == b"", "a silent connection got an answer"
    elapsed = time.monotonic() - started
    assert 0.3 <= elapsed <= 3.0, f"closed after {elapsed:.2f} s, timeout=0.5"


def test_an_idle_keep_alive_connection_is_closed_after_idle_timeout(servers: Checked) -> None:
    server = servers.start(Echo(), timeout=30.0, idle_timeout=0.5)
    client = servers.connect(server)
    client.send(request("GET", "/once"))
    assert client.read_response().status == 200
    started = time.monotonic()
    assert client.wait_closed() == b"", "an idle connection got an answer"
    elapsed = time.monotonic() - started
    assert 0.3 <= elapsed <= 3.0, f"closed after {elapsed:.2f} s idle, idle_timeout=0.5"


def test_a_keep_alive_connection_idles_for_idle_timeout_not_timeout(servers: Checked) -> None:
    server = servers.start(Echo(), timeout=0.5, idle_timeout=30.0)
    client = servers.connect(server)
    client.send(request("GET", "/one"))
    assert client.read_response().status == 200
    assert client.quiet_for(1.5), "the idle connection was closed after `timeout`, not `idle_timeout`"
    client.send(request("GET", "/two"))
    assert client.read_response().status == 200


def test_a_body_slower_than_min_body_rate_gets_408(servers: Checked) -> None:
    server = servers.start(Echo(), timeout=0.5, idle_timeout=0.5, min_body_rate=1000)
    client = servers.connect(server)
    client.send(request("POST", headers=[("Content-Length", "100000")]))
    # 10 bytes per 0.1 s is 100 B/s; the deadline, 0.5 s + received / 1000 B/s, passes at about 0.56 s
    sent, elapsed = dribble(client, b"x" * 100000, 10, 0.1)
    assert_refused(client, {408}, b"<head>" + b"x" * sent)
    assert elapsed <= 4.0, f"408 after {elapsed:.2f} s and {sent} body bytes"


def test_a_body_at_min_body_rate_may_take_longer_than_the_timeout(servers: Checked) -> None:
    server = servers.start(Echo(), timeout=0.5, idle_timeout=0.5, min_body_rate=1000)
    client = servers.connect(server)
    client.send(request("POST", headers=[("Content-Length", "6000")]))
    started = time.monotonic()
    for _ in range(9):  # 600 bytes per 0.1 s: 6,000 B/s over about 1 s, twice the timeout
        client.send(b"y" * 600)
        assert client.quiet_for(0.1), "answered before the body was complete"
    client.send(b"y" * 600)
    assert time.monotonic() - started > 0.5
    reply = client.read_response()
    assert (reply.status, reply.body) == (200, b"y" * 6000)
