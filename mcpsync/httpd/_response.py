"""Writing one response of `WsgiServer`: the head from `start_response`, the body as framed, or
the whole response at once from another thread (`respond_now`).

Why ours and not h11's: framing a response is a few joins, and h11's costs about 15 µs per MCP
answer (`scripts/bench-http-parsers`), a quarter of the budget of a whole request; what h11 would
add, refusing what must not be sent, is done here: a status or header with CR, LF or NUL (the
application's bug, which would otherwise become response splitting) is refused with
`BadResponse` before any byte goes out, and the client gets a 500.

Strategy: the head is built when the first body chunk (or the end) is known, so a one-chunk body
with a `Content-Length` leaves in one send. The framing is ours to choose: the application's
`Content-Length` when it gives one (a longer body is cut, a shorter one ends the connection),
else chunked on HTTP/1.1 (one chunk per yielded piece: SSE events are not held back), else the
body ends with the connection. Before the connection's worker sends its first byte it claims the
connection, under the same lock `respond_now` takes, so exactly one thread writes each response.
A body that can wait without a thread (`Parkable`: the transport's event streams) is framed here
too (`frame`) but written by the connection between its parkings.
"""

from __future__ import annotations

import email.utils
import itertools
import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from ..errors import McpsyncError

log = logging.getLogger("mcpsync")

_FRAMING_SIZES = frozenset(len(name) for name in ("content-length", "connection", "transfer-encoding"))
"""The lengths of the names of the response fields the framing replaces or reads."""

REASONS = {400: "Bad Request", 408: "Request Timeout", 413: "Payload Too Large", 431: "Request Header Fields Too Large",
            500: "Internal Server Error", 501: "Not Implemented", 503: "Service Unavailable",
            505: "HTTP Version Not Supported"}


class _Gone(Exception):
    """The client closed the connection, or it timed out between requests: nothing to answer."""


class BadResponse(McpsyncError):
    """The application's status or headers cannot be sent as they are (CR, LF or NUL in them)."""


class Writer(Protocol):
    """The connection, as a response writes to it."""

    @property
    def stopping(self) -> bool: ...

    def send_all(self, data: bytes) -> None:
        """Send every byte, waiting for room up to the write timeout; raises `_Gone`."""

    def shutdown_write(self) -> None: ...

    def date_header(self) -> bytes: ...


class Parkable(Protocol):
    """A WSGI body that can wait for its next piece without a thread (an event stream):
    the server calls `take` while it returns pieces, then `park`, and `take` again once woken or
    at the time `park` returned. Iterating it instead (another WSGI server) blocks, as usual."""

    def take(self, now: float) -> bytes | None:
        """The next piece if one is ready, None if not; StopIteration at the end."""

    def park(self, wake: Callable[[], None]) -> float | None:
        """Call `wake()` (once, from any thread) when a piece is ready; the monotonic time at which
        `take` is due anyway (a keep-alive, a deadline), or None."""

    def close(self) -> None: ...


class Clock:
    """The `Date` header, formatted at most once a second (RFC 9110 §6.6.1: an origin server
    with a clock sends it)."""

    def __init__(self) -> None:
        self._second = -1
        self._value = b""

    def header(self) -> bytes:
        now = int(time.time())
        if now != self._second:
            self._value = b"Date: " + email.utils.formatdate(now, usegmt=True).encode("ascii") + b"\r\n"
            self._second = now
        return self._value


class Response:
    """One response: the status and headers from `start_response`, then the body as framed."""

    def __init__(self, writer: Writer, environ: dict[str, Any], keep_alive: bool) -> None:
        self._writer = writer
        self._method: str = environ["REQUEST_METHOD"]
        self._head_only = self._method == "HEAD"
        self._http11 = environ["SERVER_PROTOCOL"] == "HTTP/1.1"
        # What the logs name the request by (`_what`). Not the environ itself: it holds this
        # response's `respond_now`, and the cycle would keep every request's objects until a
        # garbage collection rather than free them when the request ends.
        self._path = environ.get("PATH_INFO", "")
        self.keep_alive = keep_alive
        self._status: str | None = None
        self._headers: list[tuple[str, str]] = []
        self.started = False
        self._sending = False  # the connection's thread has claimed the socket for this response
        self.answered_elsewhere = False  # respond_now() has written the whole response
        self._claim_lock = threading.Lock()
        self._chunked = False
        self._length: int | None = None
        self._sent = 0

    def _what(self) -> str:
        return f"{self._method} {self._path}"

    def start_response(self, status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Callable[[bytes], None]:
        if exc_info is not None:
            try:
                if self.started:
                    raise exc_info[1].with_traceback(exc_info[2])
            finally:
                exc_info = None
        elif self._status is not None:
            raise AssertionError("start_response called twice without exc_info")
        self._status = status
        self._headers = headers
        return self._write_now

    def _head(self) -> bytes:
        assert self._status is not None, "the application yielded before calling start_response"
        status = self._status
        check_sendable(status, self._headers)
        code = int(status[:3])  # a status that does not begin with its code fails the response here
        lines: list[str] = []
        for name, value in self._headers:
            if len(name) in _FRAMING_SIZES:  # a name of another length is none of them
                lowered = name.lower()
                if lowered == "content-length":
                    self._length = int(value)
                    continue
                if lowered == "connection":
                    if "close" in value.lower():
                        self.keep_alive = False
                    continue
                if lowered == "transfer-encoding":
                    continue  # the framing is ours to choose
            lines += (name, ": ", value, "\r\n")
        if self._length is not None:
            lines += ("Content-Length: ", str(self._length), "\r\n")
        elif code in (204, 304) or code < 200 or self._head_only:
            pass
        elif self._http11:
            self._chunked = True
            lines.append("Transfer-Encoding: chunked\r\n")
        else:
            self.keep_alive = False  # the body ends when the connection does
        if self._writer.stopping:
            self.keep_alive = False
        if not self.keep_alive:
            lines.append("Connection: close\r\n")
        elif not self._http11:
            lines.append("Connection: keep-alive\r\n")
        self.started = True
        fields = "".join(lines).encode("latin-1")
        return b"HTTP/1.1 " + status.encode("latin-1") + b"\r\n" + self._writer.date_header() + fields + b"\r\n"

    def frame(self, chunk: bytes) -> bytes:
        """The head (before the first piece) and `chunk` framed, as bytes to send."""
        return self._head() + self._frame(chunk) if not self.started else self._frame(chunk)

    def _frame(self, chunk: bytes) -> bytes:
        if self._head_only or not chunk:
            return b""
        if self._length is not None:
            room = self._length - self._sent
            if len(chunk) > room:
                log.error("the WSGI application sent more than its Content-Length (%d) for %s; the rest is dropped", self._length, self._what())
                chunk = chunk[:room]
            self._sent += len(chunk)
            return chunk
        if self._chunked:
            return b"%x\r\n%b\r\n" % (len(chunk), chunk)
        return chunk

    def _send(self, data: bytes) -> None:
        if not self._sending:
            self.claim()
        self._writer.send_all(data)

    def claim(self) -> None:
        """Before the connection's worker sends the first byte: the connection is its own from
        now on, unless another thread has written the whole response already (`_Gone`)."""
        with self._claim_lock:
            if self.answered_elsewhere:
                raise _Gone("the response was written by another thread")
            self._sending = True

    def respond_now(self, status: str, headers: list[tuple[str, str]], body: bytes) -> bool:
        """Write the whole response from the calling thread and end the connection, for when the
        connection's thread cannot (it is stuck in the application). Returns False, writing
        nothing, once that thread has begun sending, or if the client is gone. The response is
        framed by its length and says `Connection: close`; the application's own framing
        headers are replaced."""
        try:
            check_sendable(status, headers)
        except BadResponse:
            log.error("respond_now: %s", "a status or header with CR, LF or NUL; a 500 goes out instead")
            status, headers, body = "500 Internal Server Error", [("Content-Type", "text/plain")], b"internal server error\n"
        with self._claim_lock:
            if self._sending or self.answered_elsewhere:
                return False
            self.answered_elsewhere = True
        try:
            self._writer.send_all(closing_response(status, headers, body, self._writer.date_header(), head_only=self._head_only))
            self._writer.shutdown_write()  # the client reads the end of the response now
        except (_Gone, OSError):
            return False
        return True

    def _write_now(self, chunk: bytes) -> None:
        """The legacy `write()` callable of PEP 3333."""
        data = self.frame(chunk)
        if data:
            self._send(data)

    def write_all(self, result: Iterable[bytes]) -> None:
        if isinstance(result, list) and len(result) <= 1 and not self.started:  # the common case: one send
            head = self._head()
            if result and self._length == len(result[0]) and not self._head_only:  # a body of its declared length
                self._sent = self._length
                self._send(head + result[0])
                return
            data = self._frame(result[0]) if result else b""
            self._send(head + data + self.ending())
            return
        for chunk in result:
            if chunk:
                self._send(self.frame(chunk))
        if not self.started:
            self._send(self._head())
        ending = self.ending()
        if ending:
            self._send(ending)

    def ending(self) -> bytes:
        """What ends the body: the chunked terminator, or nothing; and a body shorter than its
        Content-Length ends the connection."""
        if self._length is not None and self._sent < self._length and not self._head_only:
            log.error("the WSGI application sent %d of its Content-Length %d for %s; closing the connection", self._sent, self._length, self._what())
            self.keep_alive = False
        return b"0\r\n\r\n" if self._chunked and not self._head_only else b""


def check_sendable(status: str, headers: list[tuple[str, str]]) -> None:
    # The status joins the fields' names and values, so one text holds them all (a field is two
    # pieces, so the status is in it once there is one field).
    text = status.join(itertools.chain.from_iterable(headers)) if headers else status
    if "\r" in text or "\n" in text or "\0" in text:
        raise BadResponse(f"the status or a header holds CR, LF or NUL: {status!r}")


def closing_response(status: str, headers: Iterable[tuple[str, str]], body: bytes, date: bytes, *, head_only: bool = False) -> bytes:
    """A whole response that ends its connection: framed by its length, `Connection: close`, the
    application's own framing headers replaced. The caller has checked it (`check_sendable`)."""
    lines = [b"HTTP/1.1 ", status.encode("latin-1"), b"\r\n", date]
    for name, value in headers:
        if name.lower() not in ("content-length", "connection", "transfer-encoding"):
            lines += (name.encode("latin-1"), b": ", value.encode("latin-1"), b"\r\n")
    lines.append(b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body))
    if not head_only:
        lines.append(body)
    return b"".join(lines)


def plain_response(status: int, why: str, date: bytes, headers: Iterable[tuple[str, str]] = ()) -> bytes:
    body = f"{status} {REASONS.get(status, '')}: {why}\n".encode("utf-8", "replace")
    extra = "".join(f"{name}: {value}\r\n" for name, value in headers)
    head = (
        f"HTTP/1.1 {status} {REASONS.get(status, 'Error')}\r\nContent-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\n{extra}Connection: close\r\n"
    ).encode("latin-1")
    return head + date + b"\r\n" + body
